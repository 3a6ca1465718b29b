package controllers

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestAssignBrokerIDBlocks(t *testing.T) {
	zones := func(names ...string) []strata.ZoneSpec {
		var out []strata.ZoneSpec
		for _, n := range names {
			out = append(out, strata.ZoneSpec{Name: n})
		}
		return out
	}
	block := func(zone string, base int32, retired bool) strata.BrokerIDBlock {
		return strata.BrokerIDBlock{Zone: zone, Base: base, Retired: retired}
	}
	tests := []struct {
		name        string
		existing    []strata.BrokerIDBlock
		zones       []strata.ZoneSpec
		running     []string
		want        []strata.BrokerIDBlock
		wantChanged bool
	}{
		{
			name:        "new cluster gets blocks in spec order",
			zones:       zones("a", "b", "c"),
			want:        []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false), block("c", 200, false)},
			wantChanged: true,
		},
		{
			name:     "reordering zones renumbers nothing",
			existing: []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false), block("c", 200, false)},
			zones:    zones("c", "a", "b"),
			want:     []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false), block("c", 200, false)},
		},
		{
			name:        "an added zone gets the next block even when inserted first",
			existing:    []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false)},
			zones:       zones("d", "a", "b"),
			want:        []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false), block("d", 200, false)},
			wantChanged: true,
		},
		{
			name:        "a removed zone's block is retired, not reused",
			existing:    []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false), block("c", 200, false)},
			zones:       zones("a", "c", "d"),
			want:        []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, true), block("c", 200, false), block("d", 300, false)},
			wantChanged: true,
		},
		{
			name:     "a removed zone whose brokers still run (drained first, or the removal refused) keeps its block",
			existing: []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false)},
			zones:    zones("a"),
			running:  []string{"a", "b"},
			want:     []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false)},
		},
		{
			name:     "a zone that comes back before its brokers went gets them back under the same IDs",
			existing: []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false)},
			zones:    zones("a", "b"),
			running:  []string{"a", "b"},
			want:     []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, false)},
		},
		{
			name:        "a zone that comes back gets a fresh block",
			existing:    []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, true)},
			zones:       zones("a", "b"),
			want:        []strata.BrokerIDBlock{block("a", 0, false), block("b", 100, true), block("b", 200, false)},
			wantChanged: true,
		},
		{
			name:        "the next base is above the highest block, retired ones included",
			existing:    []strata.BrokerIDBlock{block("x", 500, true), block("a", 0, false)},
			zones:       zones("a", "b"),
			want:        []strata.BrokerIDBlock{block("x", 500, true), block("a", 0, false), block("b", 600, false)},
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]strata.BrokerIDBlock(nil), tt.existing...)
			got, changed := AssignBrokerIDBlocks(tt.existing, tt.zones, tt.running)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("blocks = %+v, want %+v", got, tt.want)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !reflect.DeepEqual(tt.existing, before) {
				t.Errorf("input was modified: %+v, was %+v", tt.existing, before)
			}
			// Invariant: no two blocks overlap, whatever happened.
			seen := map[int32]string{}
			for _, b := range got {
				if z, dup := seen[b.Base]; dup {
					t.Errorf("base %d handed to both %s and %s", b.Base, z, b.Zone)
				}
				seen[b.Base] = b.Zone
			}
		})
	}
}

func TestRenderBrokerConfig(t *testing.T) {
	kc := threeZoneCluster()
	bucket := fastBucket("wal-b", "zone-b", "strata-wal-b")
	tests := []struct {
		name    string
		mutate  func(*strata.KafkaCluster)
		zone    ZoneInput
		want    []string // lines that must appear
		notWant []string
	}{
		{
			name: "zone identity and bucket affinity",
			zone: ZoneInput{Zone: kc.Spec.Zones[1], IDBase: 100, Bucket: bucket},
			want: []string{
				"broker.rack=zone-b", "zone=zone-b", "broker.id.base=100",
				"wal.bucket.name=strata-wal-b", "wal.bucket.region=us-east-1",
				"wal.bucket.endpoint=http://s3.zone-b.example:9000", "wal.bucket.type=S3",
				"wal.bucket.force.path.style=true", "wal.bucket.credentials.source=Secret",
				"wal.bucket.credentials.secret=wal-keys", "wal.bucket.resource=wal-b",
				"wal.upload.interval.ms=10", "wal.object.max.bytes=262144", "wal.retention.ms=3600000",
				"metadata.etcd.endpoints=https://demo-etcd-0.demo-etcd.kafka.svc:2379,https://demo-etcd-1.demo-etcd.kafka.svc:2379,https://demo-etcd-2.demo-etcd.kafka.svc:2379",
				"metadata.etcd.ssl.ca.location=/etc/strata-tls/cluster/ca.crt",
				"metadata.etcd.ssl.certificate.location=/etc/strata-tls/cluster/tls.crt",
				"metadata.etcd.ssl.key.location=/etc/strata-tls/cluster/tls.key",
				// Secure by default: a SASL_SSL client listener with the
				// cluster CA's broker certificate, plus the operator's
				// mTLS inter-broker listener, and ACLs enforced with the
				// operator's and the brokers' principals as super users.
				"listeners=SASL_SSL://0.0.0.0:9092,REPLICATION://0.0.0.0:9091",
				"advertised.listeners=SASL_SSL://${POD_NAME}.demo-brokers.kafka.svc:9092,REPLICATION://${POD_NAME}.demo-brokers.kafka.svc:9091",
				"listener.security.protocol.map=SASL_SSL:SASL_SSL,REPLICATION:SSL",
				"listener.name.sasl_ssl.ssl.certificate.location=/etc/strata-tls/cluster/tls.crt",
				"listener.name.sasl_ssl.ssl.key.location=/etc/strata-tls/cluster/tls.key",
				"listener.name.sasl_ssl.ssl.client.auth=none",
				"inter.broker.listener.name=REPLICATION",
				"listener.name.replication.ssl.certificate.location=/etc/strata-tls/cluster/tls.crt",
				"listener.name.replication.ssl.key.location=/etc/strata-tls/cluster/tls.key",
				"listener.name.replication.ssl.ca.location=/etc/strata-tls/cluster/ca.crt",
				"listener.name.replication.ssl.client.auth=required",
				"authorizer.class.name=strata.acl",
				"super.users=User:CN=strata-operator,O=strata;User:CN=strata-broker,O=strata",
				"allow.everyone.if.no.acl.found=false",
			},
			notWant: []string{"listener.name.plaintext.", "listener.name.sasl_ssl.ssl.ca.location"},
		},
		{
			name: "legacy defaults kept: PLAINTEXT listener, an authorizer open where no ACL is set",
			mutate: func(kc *strata.KafkaCluster) {
				*kc = *WithSecurityDefaults(kc, SecurityDefaults{PlaintextListener: true, NoAuthorizer: true})
			},
			zone: ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0},
			want: []string{
				"listeners=PLAINTEXT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091",
				"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:SSL",
				"inter.broker.listener.name=REPLICATION",
				"authorizer.class.name=strata.acl",
				"super.users=User:CN=strata-operator,O=strata;User:CN=strata-broker,O=strata",
				"allow.everyone.if.no.acl.found=true",
			},
			notWant: []string{"listener.name.plaintext.", "allow.everyone.if.no.acl.found=false"},
		},
		{
			name: "authorization none; extra super users with acl",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationACL, SuperUsers: []string{"User:admin", "User:CN=strata-broker,O=strata"}}
			},
			zone: ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0},
			want: []string{"super.users=User:CN=strata-operator,O=strata;User:CN=strata-broker,O=strata;User:admin"},
		},
		{
			name: "mTLS client listener trusts the clients CA",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.Listeners = []strata.ListenerSpec{{Name: "MTLS", Port: 9094, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}}}
				kc.Spec.Security.Authorization = &strata.AuthorizationSpec{Type: strata.AuthorizationNone}
			},
			zone: ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0},
			want: []string{
				"listener.name.mtls.ssl.certificate.location=/etc/strata-tls/cluster/tls.crt",
				"listener.name.mtls.ssl.ca.location=/etc/strata-tls/clients/ca.crt",
				"listener.name.mtls.ssl.client.auth=required",
				"listener.name.replication.ssl.ca.location=/etc/strata-tls/cluster/ca.crt",
			},
			notWant: []string{"authorizer.class.name", "super.users"},
		},
		{
			name: "secured client listeners",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.Listeners = []strata.ListenerSpec{
					{Name: "CLIENT", Port: 9093, Protocol: "SASL_SSL"},
					{Name: "MTLS", Port: 9094, Protocol: "SSL", TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired}},
					{Name: "SASL", Port: 9095, Protocol: "SASL_PLAINTEXT"},
				}
				kc.Spec.Security.ListenerCertificate = &strata.SecretReference{Name: "public-tls"}
			},
			zone: ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0},
			want: []string{
				"listener.security.protocol.map=CLIENT:SASL_SSL,MTLS:SSL,SASL:SASL_PLAINTEXT,REPLICATION:SSL",
				"listener.name.client.ssl.certificate.location=/etc/strata-tls/listener/tls.crt",
				"listener.name.client.ssl.key.location=/etc/strata-tls/listener/tls.key",
				"listener.name.client.ssl.client.auth=none",
				"listener.name.mtls.ssl.certificate.location=/etc/strata-tls/listener/tls.crt",
				"listener.name.mtls.ssl.ca.location=/etc/strata-tls/listener/ca.crt",
				"listener.name.mtls.ssl.client.auth=required",
				// The inter-broker listener stays on the cluster CA.
				"listener.name.replication.ssl.certificate.location=/etc/strata-tls/cluster/tls.crt",
				"inter.broker.listener.name=REPLICATION",
			},
			notWant: []string{"listener.name.client.ssl.ca.location", "listener.name.sasl."},
		},
		{
			name: "zone map: every zone's bucket, credentials by Secret",
			zone: func() ZoneInput {
				fbc := fastBucket("wal-zone-c", "zone-c", "strata-wal-zone-c")
				fbc.Spec.Credentials.SecretRef = &strata.S3SecretReference{Name: "wal-keys-c"}
				fbc.Spec.Region = "eu-west-1"
				fbb := fastBucket("wal-zone-b", "zone-b", "strata-wal-zone-b")
				fbb.Spec.Credentials = strata.S3Credentials{Source: strata.CredentialsAmbient}
				fbb.Spec.Type = strata.BucketTypeS3Express
				return zoneInputs(kc, map[string]*strata.FastBucket{"zone-b": fbb, "zone-c": fbc})[0]
			}(),
			want: []string{
				"wal.enable=true",
				"wal.bucket.name=strata-wal-zone-a", "wal.bucket.endpoint=http://s3.zone-a.example:9000",
				"wal.zone.zone-a.bucket.name=strata-wal-zone-a", "wal.zone.zone-a.bucket.endpoint=http://s3.zone-a.example:9000",
				"wal.zone.zone-a.bucket.credentials.env=STRATA_WAL", "wal.zone.zone-a.bucket.credentials.secret=wal-keys",
				"wal.zone.zone-a.bucket.resource=wal-zone-a",
				"wal.zone.zone-b.bucket.name=strata-wal-zone-b", "wal.zone.zone-b.bucket.endpoint=http://s3.zone-b.example:9000",
				"wal.zone.zone-b.bucket.type=S3Express", "wal.zone.zone-b.bucket.credentials.source=Ambient",
				"wal.zone.zone-c.bucket.name=strata-wal-zone-c", "wal.zone.zone-c.bucket.region=eu-west-1",
				"wal.zone.zone-c.bucket.endpoint=http://s3.zone-c.example:9000", "wal.zone.zone-c.bucket.force.path.style=true",
				"wal.zone.zone-c.bucket.type=S3", "wal.zone.zone-c.bucket.credentials.source=Secret",
				"wal.zone.zone-c.bucket.credentials.secret=wal-keys-c", "wal.zone.zone-c.bucket.credentials.env=STRATA_WAL_ZONE_ZONE_C",
			},
			notWant: []string{"wal.enabled", "wal.zone.zone-b.bucket.credentials.env", "wal.zone.zone-b.bucket.credentials.secret"},
		},
		{
			name:    "no zone map without buckets",
			zone:    ZoneInput{Zone: kc.Spec.Zones[0], ZoneBuckets: map[string]*strata.FastBucket{"zone-b": nil}},
			want:    []string{"wal.enable=true"},
			notWant: []string{"wal.zone.", "wal.bucket."},
		},
		{
			name: "spec.config overrides and is sorted in",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.Config = map[string]string{"wal.upload.interval.ms": "5", "num.partitions": "12"}
			},
			zone:    ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0, Bucket: bucket},
			want:    []string{"wal.upload.interval.ms=5", "num.partitions=12"},
			notWant: []string{"wal.upload.interval.ms=10"},
		},
		{
			name: "external etcd endpoints",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.Metadata = strata.MetadataSpec{ExternalEndpoints: []string{"https://etcd-1:2379", "https://etcd-2:2379"}}
			},
			zone:    ZoneInput{Zone: kc.Spec.Zones[0]},
			want:    []string{"metadata.etcd.endpoints=https://etcd-1:2379,https://etcd-2:2379"},
			notWant: []string{"wal.bucket.name=", "metadata.etcd.ssl."},
		},
		{
			name:   "values and keys are escaped",
			mutate: func(kc *strata.KafkaCluster) { kc.Spec.Config = map[string]string{"odd key=x": "line1\nline2 \\ end"} },
			zone:   ZoneInput{Zone: kc.Spec.Zones[0]},
			want:   []string{`odd\ key\=x=line1\nline2 \\ end`},
		},
		{
			name: "sub-millisecond upload interval rounds up to 1ms",
			mutate: func(kc *strata.KafkaCluster) {
				kc.Spec.WAL.UploadInterval = &metav1.Duration{Duration: 500 * time.Microsecond}
			},
			zone: ZoneInput{Zone: kc.Spec.Zones[0]},
			want: []string{"wal.upload.interval.ms=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := threeZoneCluster()
			if tt.mutate != nil {
				tt.mutate(kc)
			}
			got := RenderBrokerConfig(kc, tt.zone)
			lines := map[string]bool{}
			for _, l := range strings.Split(got, "\n") {
				lines[l] = true
			}
			for _, w := range tt.want {
				if !lines[w] {
					t.Errorf("missing line %q in:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in:\n%s", w, got)
				}
			}
			if again := RenderBrokerConfig(kc, tt.zone); again != got {
				t.Errorf("rendering is not deterministic")
			}
		})
	}
}

// TestWALZoneCredentialsEnv: a zone's pods get the keys of every other
// zone's bucket whose Secret (or Secret keys) differ from their own, under
// STRATA_WAL_ZONE_<ZONE>_*, and nothing for ambient or shared keys.
func TestWALZoneCredentialsEnv(t *testing.T) {
	secret := func(name string, ref strata.S3SecretReference) func(*strata.FastBucket) {
		return func(b *strata.FastBucket) {
			ref.Name = name
			b.Spec.Credentials = strata.S3Credentials{SecretRef: &ref}
		}
	}
	ambient := func(b *strata.FastBucket) {
		b.Spec.Credentials = strata.S3Credentials{Source: strata.CredentialsAmbient}
	}
	tests := []struct {
		name    string
		buckets map[string]func(*strata.FastBucket)
		want    []string // env var names beyond POD_* and the tier keys, in order
	}{
		{name: "one Secret for all zones", want: []string{EnvWALAccessKeyID, EnvWALSecretKey}},
		{
			name:    "other zones with their own Secrets",
			buckets: map[string]func(*strata.FastBucket){"zone-b": secret("keys-b", strata.S3SecretReference{}), "zone-c": secret("keys-c", strata.S3SecretReference{SessionTokenKey: "t"})},
			want: []string{EnvWALAccessKeyID, EnvWALSecretKey,
				"STRATA_WAL_ZONE_ZONE_B_ACCESS_KEY_ID", "STRATA_WAL_ZONE_ZONE_B_SECRET_ACCESS_KEY",
				"STRATA_WAL_ZONE_ZONE_C_ACCESS_KEY_ID", "STRATA_WAL_ZONE_ZONE_C_SECRET_ACCESS_KEY", "STRATA_WAL_ZONE_ZONE_C_SESSION_TOKEN"},
		},
		{
			name:    "same Secret, other keys",
			buckets: map[string]func(*strata.FastBucket){"zone-b": secret("wal-keys", strata.S3SecretReference{AccessKeyIDKey: "idB", SecretAccessKeyKey: "secretAccessKey"})},
			want:    []string{EnvWALAccessKeyID, EnvWALSecretKey, "STRATA_WAL_ZONE_ZONE_B_ACCESS_KEY_ID", "STRATA_WAL_ZONE_ZONE_B_SECRET_ACCESS_KEY"},
		},
		{
			name:    "ambient own bucket, Secret elsewhere",
			buckets: map[string]func(*strata.FastBucket){"zone-a": ambient, "zone-c": secret("wal-keys", strata.S3SecretReference{})},
			want:    []string{"STRATA_WAL_ZONE_ZONE_B_ACCESS_KEY_ID", "STRATA_WAL_ZONE_ZONE_B_SECRET_ACCESS_KEY", "STRATA_WAL_ZONE_ZONE_C_ACCESS_KEY_ID", "STRATA_WAL_ZONE_ZONE_C_SECRET_ACCESS_KEY"},
		},
		{
			name:    "ambient other zones",
			buckets: map[string]func(*strata.FastBucket){"zone-b": ambient, "zone-c": ambient},
			want:    []string{EnvWALAccessKeyID, EnvWALSecretKey},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := threeZoneCluster()
			kc.Spec.TieredStorage = nil
			bs := map[string]*strata.FastBucket{}
			for _, z := range kc.Spec.Zones {
				bs[z.Name] = fastBucket("wal-"+z.Name, z.Name, "strata-wal-"+z.Name)
				if f := tt.buckets[z.Name]; f != nil {
					f(bs[z.Name])
				}
			}
			zi := zoneInputs(kc, bs)[0]
			var got []string
			for _, e := range BuildZoneStatefulSet(kc, zi, "h").Spec.Template.Spec.Containers[0].Env {
				if e.Name != EnvPodName && e.Name != EnvPodNamespace {
					got = append(got, e.Name)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("env = %v\nwant  %v", got, tt.want)
			}
			// Every per-zone prefix in the env is the one the config names.
			cfg := RenderBrokerConfig(kc, zi)
			for _, name := range got {
				if p, ok := strings.CutSuffix(name, "_ACCESS_KEY_ID"); ok && p != "STRATA_WAL" && !strings.Contains(cfg, ".bucket.credentials.env="+p+"\n") {
					t.Errorf("%s set but no zone's credentials.env is %s:\n%s", name, p, cfg)
				}
			}
		})
	}
}

func TestConfigHashFollowsConfig(t *testing.T) {
	kc := threeZoneCluster()
	zi := ZoneInput{Zone: kc.Spec.Zones[0], IDBase: 0, Bucket: fastBucket("wal-a", "zone-a", "b")}
	h1 := ConfigHash(BuildZoneConfigMap(kc, zi).Data)
	if h2 := ConfigHash(BuildZoneConfigMap(kc, zi).Data); h1 != h2 {
		t.Fatalf("hash of equal config differs: %s vs %s", h1, h2)
	}
	kc.Spec.Config = map[string]string{"num.partitions": "7"}
	h3 := ConfigHash(BuildZoneConfigMap(kc, zi).Data)
	if h3 == h1 {
		t.Fatal("hash did not change with spec.config")
	}
	sts := BuildZoneStatefulSet(kc, zi, h3)
	if got := sts.Spec.Template.Annotations[AnnotationConfigHash]; got != h3 {
		t.Fatalf("pod template config hash = %q, want %q", got, h3)
	}
}

func TestZoneStatefulSetPinsZone(t *testing.T) {
	kc := threeZoneCluster()
	for i, z := range kc.Spec.Zones {
		t.Run(z.Name, func(t *testing.T) {
			sts := BuildZoneStatefulSet(kc, ZoneInput{Zone: z, IDBase: int32(i) * 100}, "h")
			if sts.Name != "demo-"+z.Name {
				t.Errorf("name = %s", sts.Name)
			}
			if *sts.Spec.Replicas != z.Brokers {
				t.Errorf("replicas = %d, want %d", *sts.Spec.Replicas, z.Brokers)
			}
			terms := sts.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
				t.Fatalf("node affinity terms = %+v", terms)
			}
			e := terms[0].MatchExpressions[0]
			if e.Key != corev1.LabelTopologyZone || e.Operator != corev1.NodeSelectorOpIn || !reflect.DeepEqual(e.Values, []string{z.Name}) {
				t.Errorf("node affinity = %+v, want %s In [%s]", e, corev1.LabelTopologyZone, z.Name)
			}
			if sel := sts.Spec.Selector.MatchLabels; sel[LabelZone] != z.Name {
				t.Errorf("selector %v does not pin zone %s", sel, z.Name)
			}
			for k, v := range sts.Spec.Selector.MatchLabels {
				if sts.Spec.Template.Labels[k] != v {
					t.Errorf("template labels miss selector label %s=%s", k, v)
				}
			}
		})
	}
}

func TestClaimRetention(t *testing.T) {
	tests := []struct {
		name                    string
		deleteOnScaleDown       bool
		policy                  strata.DeletionPolicy
		wantScaled, wantDeleted string
	}{
		{"defaults keep claims", false, strata.DeletionPolicyRetain, "Retain", "Retain"},
		{"delete on scale down", true, strata.DeletionPolicyRetain, "Delete", "Retain"},
		{"delete with cluster", false, strata.DeletionPolicyDelete, "Retain", "Delete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := threeZoneCluster()
			kc.Spec.Storage.DeleteClaimOnScaleDown = tt.deleteOnScaleDown
			kc.Spec.DeletionPolicy = tt.policy
			p := BuildZoneStatefulSet(kc, ZoneInput{Zone: kc.Spec.Zones[0]}, "h").Spec.PersistentVolumeClaimRetentionPolicy
			if string(p.WhenScaled) != tt.wantScaled || string(p.WhenDeleted) != tt.wantDeleted {
				t.Errorf("retention = %+v, want scaled %s deleted %s", p, tt.wantScaled, tt.wantDeleted)
			}
		})
	}
}

// TestGolden compares the rendered objects with testdata/*.golden.yaml.
// Regenerate with: go test ./controllers -run Golden -update
func TestGolden(t *testing.T) {
	cases := map[string]func() (*strata.KafkaCluster, []ZoneInput){
		"three-zones-managed-etcd": func() (*strata.KafkaCluster, []ZoneInput) {
			kc := threeZoneCluster()
			// zone-c's bucket has keys of its own: the other zones' pods
			// get them as STRATA_WAL_ZONE_ZONE_C_*.
			fbc := fastBucket("wal-zone-c", "zone-c", "strata-wal-zone-c")
			fbc.Spec.Credentials.SecretRef = &strata.S3SecretReference{Name: "wal-keys-c", AccessKeyIDKey: "id", SecretAccessKeyKey: "secret", SessionTokenKey: "token"}
			return kc, zoneInputs(kc, map[string]*strata.FastBucket{"zone-c": fbc})
		},
		"external-etcd-ambient-credentials": func() (*strata.KafkaCluster, []ZoneInput) {
			kc := threeZoneCluster()
			kc.Spec.Zones = kc.Spec.Zones[:1]
			kc.Spec.Zones[0].NodeSelector = map[string]string{"node.kubernetes.io/instance-type": "i4i.xlarge"}
			kc.Spec.Zones[0].Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "kafka", Effect: corev1.TaintEffectNoSchedule}}
			kc.Spec.Metadata = strata.MetadataSpec{ExternalEndpoints: []string{"https://etcd.example:2379"}}
			kc.Spec.Listeners = []strata.ListenerSpec{{Name: "INTERNAL", Port: 9092}, {Name: "CLIENT_TLS", Port: 9093, Protocol: "SSL"}}
			kc.Spec.PodTemplate = strata.PodTemplateSpec{
				Labels: map[string]string{"team": "streaming"}, Annotations: map[string]string{"prometheus.io/scrape": "true"},
				ServiceAccountName: "strata-broker",
			}
			kc.Spec.Config = map[string]string{"num.partitions": "6"}
			kc.Spec.LeaderPlacement = strata.LeaderPlacementSpec{Policy: strata.LeaderPlacementZone, Zone: "zone-a"}
			fb := fastBucket("wal-a", "zone-a", "strata-wal--use1-az4--x-s3")
			fb.Spec.Type = strata.BucketTypeS3Express
			fb.Spec.Endpoint = ""
			fb.Spec.ForcePathStyle = false
			fb.Spec.Credentials = strata.S3Credentials{Source: strata.CredentialsAmbient}
			return kc, []ZoneInput{{Zone: kc.Spec.Zones[0], IDBase: 300, Bucket: fb}}
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			kc, zis := build()
			var docs []any
			for _, zi := range zis {
				cm := BuildZoneConfigMap(kc, zi)
				docs = append(docs, cm, BuildZoneStatefulSet(kc, zi, ConfigHash(cm.Data)))
			}
			for _, svc := range BuildServices(kc) {
				docs = append(docs, svc)
			}
			docs = append(docs, BuildBrokerPDB(kc))
			if e := BuildEtcd(kc); e != nil {
				docs = append(docs, e.Service, e.StatefulSet, e.PDB)
			}
			var sb strings.Builder
			for _, d := range docs {
				b, err := yaml.Marshal(d)
				if err != nil {
					t.Fatal(err)
				}
				sb.WriteString("---\n")
				sb.Write(b)
			}
			checkGolden(t, filepath.Join("testdata", name+".golden.yaml"), sb.String())
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (create it with `go test ./controllers -run Golden -update`): %v", err)
	}
	if string(want) == got {
		return
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			t.Fatalf("%s differs at line %d:\n  want: %q\n  got:  %q\nrerun with -update if the change is intended", path, i+1, w, g)
		}
	}
}

func threeZoneCluster() *strata.KafkaCluster {
	return &strata.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "kafka", UID: "11111111-2222-3333-4444-555555555555"},
		Spec: strata.KafkaClusterSpec{
			Image: "ghcr.io/strata-dev/strata:v0.1.0",
			Zones: []strata.ZoneSpec{
				{Name: "zone-a", Brokers: 3, FastBucketRef: &strata.LocalObjectReference{Name: "wal-zone-a"}},
				{Name: "zone-b", Brokers: 2, FastBucketRef: &strata.LocalObjectReference{Name: "wal-zone-b"}},
				{Name: "zone-c", Brokers: 1, FastBucketRef: &strata.LocalObjectReference{Name: "wal-zone-c"}},
			},
			Storage: strata.StorageSpec{Size: ptr.To(resource.MustParse("50Gi")), StorageClassName: ptr.To("fast-ssd")},
			WAL: strata.WALSpec{
				Enabled: ptr.To(true), UploadInterval: &metav1.Duration{Duration: 10 * time.Millisecond},
				MaxObjectBytes: 262144, Retention: &metav1.Duration{Duration: time.Hour},
			},
			TieredStorage: &strata.TieredStorageSpec{
				Bucket: "strata-tier", Region: "us-east-1",
				Credentials:    strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "tier-keys"}},
				LocalRetention: &metav1.Duration{Duration: 24 * time.Hour},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")},
			},
			DeletionPolicy: strata.DeletionPolicyRetain,
		},
	}
}

// zoneInputs is what the reconciler resolves for kc: ID bases in spec
// order, each zone's FastBucket (fastBucket defaults unless given) and the
// zone→bucket map of all of them.
func zoneInputs(kc *strata.KafkaCluster, buckets map[string]*strata.FastBucket) []ZoneInput {
	all := map[string]*strata.FastBucket{}
	for _, z := range kc.Spec.Zones {
		if b, ok := buckets[z.Name]; ok {
			all[z.Name] = b
			continue
		}
		all[z.Name] = fastBucket("wal-"+z.Name, z.Name, "strata-wal-"+z.Name)
	}
	var zis []ZoneInput
	for i, z := range kc.Spec.Zones {
		zis = append(zis, ZoneInput{Zone: z, IDBase: int32(i) * 100, Bucket: all[z.Name], ZoneBuckets: all})
	}
	return zis
}

func fastBucket(name, zone, bucket string) *strata.FastBucket {
	return &strata.FastBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kafka"},
		Spec: strata.FastBucketSpec{
			Zone: zone, Bucket: bucket, Region: "us-east-1", Endpoint: "http://s3." + zone + ".example:9000",
			Type: strata.BucketTypeS3, ForcePathStyle: true,
			Credentials: strata.S3Credentials{SecretRef: &strata.S3SecretReference{Name: "wal-keys", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"}},
		},
	}
}

// BenchmarkDesiredState measures rendering everything one reconcile of a
// 3-zone cluster builds: per zone ConfigMap + hash + StatefulSet, the
// Services, PDB and managed etcd.
func BenchmarkDesiredState(b *testing.B) {
	kc := threeZoneCluster()
	zis := zoneInputs(kc, nil)
	b.ReportAllocs()
	for b.Loop() {
		for _, zi := range zis {
			cm := BuildZoneConfigMap(kc, zi)
			_ = BuildZoneStatefulSet(kc, zi, ConfigHash(cm.Data))
		}
		_ = BuildServices(kc)
		_ = BuildBrokerPDB(kc)
		_ = BuildEtcd(kc)
	}
}

// TestEtcdQuotaBackendBytes pins the documented sizing of the managed etcd
// backend quota: half the member volume, within [256 MiB, 8 GiB], never
// above the volume.
func TestEtcdQuotaBackendBytes(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		storage *resource.Quantity
		want    int64
	}{
		{nil, 256 << 20},
		{q("0"), 256 << 20},
		{q("10Gi"), 5 << 30}, // the default volume
		{q("4Gi"), 2 << 30},
		{q("16Gi"), 8 << 30},
		{q("100Gi"), 8 << 30}, // capped at etcd's recommended maximum
		{q("300Mi"), 256 << 20},
		{q("100Mi"), 100 << 20}, // never above the volume
	} {
		got := EtcdQuotaBackendBytes(tc.storage)
		if got != tc.want {
			t.Errorf("EtcdQuotaBackendBytes(%v) = %d, want %d", tc.storage, got, tc.want)
		}
	}
}
