package controllers

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/server"
)

// TestBrokerConfigRoundTrip renders the ConfigMaps of a 3-zone cluster
// with 3 FastBuckets (zone-c's on other keys and region) and starts the
// broker's configuration from each exactly as a pod does: the file read by
// the broker's parser, ${POD_NAME} from the environment. Every zone's
// broker must come out with WAL on, its own bucket for uploads and all
// three buckets resolved to their zone's settings.
func TestBrokerConfigRoundTrip(t *testing.T) {
	kc := threeZoneCluster() // with spec.tieredStorage
	fbc := fastBucket("wal-zone-c", "zone-c", "strata-wal-zone-c")
	fbc.Spec.Region = "eu-west-1"
	fbc.Spec.Credentials.SecretRef = &strata.S3SecretReference{Name: "wal-keys-c"}
	zis := zoneInputs(kc, map[string]*strata.FastBucket{"zone-c": fbc})
	for _, zi := range zis {
		t.Run(zi.Zone.Name, func(t *testing.T) {
			t.Setenv(EnvPodName, ZoneStatefulSetName(kc.Name, zi.Zone.Name)+"-1")
			path := filepath.Join(t.TempDir(), BrokerConfigFile)
			if err := os.WriteFile(path, []byte(BuildZoneConfigMap(kc, zi).Data[BrokerConfigFile]), 0o644); err != nil {
				t.Fatal(err)
			}
			kv, err := server.ReadConfigFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg := server.DefaultConfig()
			unknown, err := server.ApplySettings(&cfg, kv)
			if err != nil {
				t.Fatalf("the broker rejects the operator's config: %v", err)
			}
			// Every key the operator renders must mean something to the
			// broker: a key it ignores is a setting that silently does
			// nothing.
			for _, k := range unknown {
				t.Errorf("the broker ignores the operator's %s", k)
			}
			if cfg.Cluster.Name != WALClusterName(kc) {
				t.Errorf("the broker runs as cluster %q, the operator (and its WAL sweeper) calls it %q", cfg.Cluster.Name, WALClusterName(kc))
			}
			if cfg.Broker.NodeID != zi.IDBase+1 || cfg.Broker.Rack != zi.Zone.Name {
				t.Errorf("broker %d in rack %q, want %d in %q", cfg.Broker.NodeID, cfg.Broker.Rack, zi.IDBase+1, zi.Zone.Name)
			}
			if want := ZoneStatefulSetName(kc.Name, zi.Zone.Name) + "-1." + HeadlessServiceName(kc.Name) + ".kafka.svc"; cfg.Broker.Host != want {
				t.Errorf("advertised host %q, want %q", cfg.Broker.Host, want)
			}
			w := cfg.Cluster.WAL
			if !w.Enable {
				t.Fatal("WAL replication is off")
			}
			buckets, err := w.ResolveBuckets(cfg.Broker.Rack)
			if err != nil {
				t.Fatal(err)
			}
			if own := buckets.Own; own.Bucket != zi.Bucket.Spec.Bucket || own.Endpoint != zi.Bucket.Spec.Endpoint || own.Zone != zi.Zone.Name {
				t.Errorf("own bucket = %s at %s (zone %s), want %s at %s", own.Bucket, own.Endpoint, own.Zone, zi.Bucket.Spec.Bucket, zi.Bucket.Spec.Endpoint)
			}
			for zone, fb := range zi.ZoneBuckets {
				got, err := buckets.Download(fb.Spec.Bucket)
				if err != nil {
					t.Fatalf("zone %s: %v", zone, err)
				}
				// zone-c's keys are in another Secret than zone-a's and
				// zone-b's: each side reads the other's from its own variables.
				wantEnv := "STRATA_WAL"
				if (zone == "zone-c") != (zi.Zone.Name == "zone-c") {
					wantEnv = WALZoneEnvPrefix(zone)
				}
				if got.Zone != zone || got.Endpoint != fb.Spec.Endpoint || got.Region != fb.Spec.Region ||
					got.Type != string(fb.Spec.Type) || got.ForcePathStyle != fb.Spec.ForcePathStyle || got.EnvPrefix != wantEnv {
					t.Errorf("bucket %s resolves to %+v, want zone %s at %s in %s with %s_* keys", fb.Spec.Bucket, got, zone, fb.Spec.Endpoint, fb.Spec.Region, wantEnv)
				}
			}
			// The slow tier: on, its bucket, credentials from STRATA_TIER_*
			// (the operator's env from the Secret), topics tiered by default
			// with the spec's local retention.
			ts := kc.Spec.TieredStorage
			if tc := cfg.Tier; !tc.Enable || tc.Bucket.Bucket != ts.Bucket || tc.Bucket.Region != ts.Region || tc.Bucket.Endpoint != ts.Endpoint {
				t.Errorf("slow tier %+v, want on with bucket %s in %s", tc, ts.Bucket, ts.Region)
			}
			if got, want := cfg.Broker.LogDefaults["log.local.retention.ms"], strconv.FormatInt(ts.LocalRetention.Milliseconds(), 10); got != want {
				t.Errorf("log.local.retention.ms = %q, want %q", got, want)
			}
			if cfg.Broker.LogDefaults["log.remote.storage.enable"] != "true" {
				t.Error("topics are not tiered by default")
			}
			if len(zi.ZoneBuckets) != 3 {
				t.Fatalf("%d zone buckets rendered", len(zi.ZoneBuckets))
			}
			if _, err := buckets.Download("not-a-zone-bucket"); err == nil {
				t.Error("a bucket outside the zone map resolved")
			}
		})
	}
}
