package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// ZoneInput is everything the builders need to know about one zone beyond
// the KafkaCluster itself.
type ZoneInput struct {
	Zone strata.ZoneSpec
	// IDBase is the zone's broker ID block base.
	IDBase int32
	// Bucket is the zone's FastBucket, nil when the zone has no reference.
	Bucket *strata.FastBucket
	// LegacyInterBroker keeps replica fetches on the first client
	// listener while a cluster configured by an operator release without
	// the REPLICATION listener rolls onto it (UpgradingInterBroker).
	LegacyInterBroker bool
	// ZoneBuckets is every zone's FastBucket by zone name, this zone's
	// included (zones without a reference are absent): the zone→bucket
	// map brokers resolve a leader's WAL bucket with.
	ZoneBuckets map[string]*strata.FastBucket
}

// WALZoneEnvPrefix is the prefix of the variables that carry another
// zone's bucket keys when that bucket uses a different Secret than the
// broker's own: STRATA_WAL_ZONE_<ZONE>_ACCESS_KEY_ID etc., the zone name
// upper-cased with '-' as '_' (zone names are [a-z0-9-], so no two zones
// share a prefix).
func WALZoneEnvPrefix(zone string) string {
	return "STRATA_WAL_ZONE_" + strings.ToUpper(strings.ReplaceAll(zone, "-", "_"))
}

// walEnvPrefix is the variable prefix of the keys of zone's bucket in the
// pods of zi's zone: the own STRATA_WAL when it is the own bucket or uses
// the same Secret and keys, a per-zone prefix otherwise, and "" for
// ambient credentials.
func walEnvPrefix(zi ZoneInput, zone string, b *strata.FastBucket) string {
	c := b.Spec.Credentials
	if c.EffectiveSource() != strata.CredentialsFromSecret || c.SecretRef == nil {
		return ""
	}
	if zone == zi.Zone.Name {
		return walEnvOwnPrefix
	}
	if own := zi.Bucket; own != nil && own.Spec.Credentials.EffectiveSource() == strata.CredentialsFromSecret &&
		own.Spec.Credentials.SecretRef != nil && sameSecretKeys(*own.Spec.Credentials.SecretRef, *c.SecretRef) {
		return walEnvOwnPrefix
	}
	return WALZoneEnvPrefix(zone)
}

// walEnvOwnPrefix is the prefix of EnvWALAccessKeyID and friends (the
// broker's server.DefaultWALEnvPrefix).
const walEnvOwnPrefix = "STRATA_WAL"

func sameSecretKeys(a, b strata.S3SecretReference) bool {
	return a.Name == b.Name &&
		orDefault(a.AccessKeyIDKey, "accessKeyID") == orDefault(b.AccessKeyIDKey, "accessKeyID") &&
		orDefault(a.SecretAccessKeyKey, "secretAccessKey") == orDefault(b.SecretAccessKeyKey, "secretAccessKey") &&
		a.SessionTokenKey == b.SessionTokenKey
}

// sortedZones returns the zone names of a bucket map in order.
func sortedZones(m map[string]*strata.FastBucket) []string {
	out := make([]string, 0, len(m))
	for z, b := range m {
		if b != nil {
			out = append(out, z)
		}
	}
	sort.Strings(out)
	return out
}

// Environment variables the broker pods get. The broker reads bucket keys
// from them rather than from its config file, so that keys stay in Secrets.
const (
	EnvPodName          = "POD_NAME"
	EnvPodNamespace     = "POD_NAMESPACE"
	EnvWALAccessKeyID   = "STRATA_WAL_ACCESS_KEY_ID"
	EnvWALSecretKey     = "STRATA_WAL_SECRET_ACCESS_KEY"
	EnvWALSessionToken  = "STRATA_WAL_SESSION_TOKEN"
	EnvTierAccessKeyID  = "STRATA_TIER_ACCESS_KEY_ID"
	EnvTierSecretKey    = "STRATA_TIER_SECRET_ACCESS_KEY"
	EnvTierSessionToken = "STRATA_TIER_SESSION_TOKEN"
)

// defaultListeners apply when spec.listeners is empty: SASL_SSL (SCRAM,
// the users of KafkaUser resources) with a certificate of the cluster CA.
var defaultListeners = []strata.ListenerSpec{{Name: "SASL_SSL", Port: 9092, Protocol: "SASL_SSL"}}

// legacyDefaultListeners were the default of operator releases before
// secure defaults; a cluster whose brokers run them keeps them while
// spec.listeners stays empty (LegacySecurityDefaults).
var legacyDefaultListeners = []strata.ListenerSpec{{Name: "PLAINTEXT", Port: 9092, Protocol: "PLAINTEXT"}}

// Listeners returns the cluster's listeners, defaulted.
func Listeners(kc *strata.KafkaCluster) []strata.ListenerSpec {
	if len(kc.Spec.Listeners) == 0 {
		return defaultListeners
	}
	out := make([]strata.ListenerSpec, len(kc.Spec.Listeners))
	copy(out, kc.Spec.Listeners)
	for i := range out {
		if out[i].Protocol == "" {
			out[i].Protocol = "PLAINTEXT"
		}
	}
	return out
}

// The operator's inter-broker listener: every broker serves it beside the
// client listeners, TLS with client certificates of the cluster CA
// required. Replica fetches go there (inter.broker.listener.name), and so
// does the operator's admin client when no client listener is PLAINTEXT.
const (
	ReplicationListener = "REPLICATION"
	ReplicationPort     = 9091
)

// Where the broker pods mount their certificates, and the Secret keys
// (cert-manager's layout).
const (
	// ClusterTLSDir holds <cluster>-broker-certs: the broker certificate
	// of the cluster CA and the CA trust bundle.
	ClusterTLSDir = "/etc/strata-tls/cluster"
	// ListenerTLSDir holds spec.security.listenerCertificate.
	ListenerTLSDir = "/etc/strata-tls/listener"
	// ClientsCADir holds the ca.crt of <cluster>-clients-ca (never its
	// key): the CAs client listeners with tls.clientAuth trust.
	ClientsCADir = "/etc/strata-tls/clients"
	TLSCertKey   = "tls.crt"
	TLSKeyKey    = "tls.key"
	CACertKey    = "ca.crt"
	// MetricsTokenDir holds the metrics listener's bearer token
	// (MetricsTokenKey of the cluster's metrics token Secret), the
	// broker's metrics.auth.token.file.
	MetricsTokenDir = "/etc/strata-metrics"
	MetricsTokenKey = "token"
)

// DefaultConnectionsMaxReauth is the connections.max.reauth.ms the
// operator sets on clusters with a SASL listener (KIP-368): a SASL
// session ends after it unless the client re-authenticates, so a
// password rotated or a KafkaUser deleted locks its sessions out within
// an hour instead of never. spec.config may set another value (0: no
// expiry, Kafka's default).
const DefaultConnectionsMaxReauth = time.Hour

// OverridableDefaultKeys are the keys the operator renders as a default
// of its own that spec.config may override (every other rendered key is
// owned by a field or by the operator: ConfigKeyOwner).
var OverridableDefaultKeys = map[string]bool{"connections.max.reauth.ms": true}

// renderReauth writes connections.max.reauth.ms when a client listener
// is SASL_PLAINTEXT or SASL_SSL (the key means nothing to the others).
func renderReauth(kc *strata.KafkaCluster, kv map[string]string) {
	if slices.ContainsFunc(Listeners(kc), func(l strata.ListenerSpec) bool { return strings.HasPrefix(string(l.Protocol), "SASL_") }) {
		kv["connections.max.reauth.ms"] = millis(DefaultConnectionsMaxReauth)
	}
}

// renderListeners writes listeners, advertised.listeners, the protocol
// map, the inter-broker listener and the TLS files of every TLS listener.
// Client TLS listeners serve spec.security.listenerCertificate when set,
// else the broker certificate of the cluster CA; client certificates must
// chain to that Secret's ca.crt, else to the clients CA (KafkaUsers of
// type tls). The REPLICATION listener trusts the cluster CA only, so no
// user certificate reaches it.
//
// legacy renders the first client listener as inter.broker.listener.name
// (what brokers of earlier releases replicated over) with REPLICATION
// already served: see UpgradingInterBroker.
func renderListeners(kc *strata.KafkaCluster, kv map[string]string, legacy bool) {
	listeners := append(Listeners(kc), strata.ListenerSpec{
		Name: ReplicationListener, Port: ReplicationPort, Protocol: "SSL",
		TLS: &strata.ListenerTLS{ClientAuth: strata.ClientAuthRequired},
	})
	var ls, adv, protos []string
	domain := fmt.Sprintf("%s.%s.svc", HeadlessServiceName(kc.Name), kc.Namespace)
	for _, l := range listeners {
		ls = append(ls, fmt.Sprintf("%s://0.0.0.0:%d", l.Name, l.Port))
		adv = append(adv, fmt.Sprintf("%s://${%s}.%s:%d", l.Name, EnvPodName, domain, l.Port))
		protos = append(protos, fmt.Sprintf("%s:%s", l.Name, l.Protocol))
		if l.Protocol != "SSL" && l.Protocol != "SASL_SSL" {
			continue
		}
		dir := ClusterTLSDir
		if l.Name != ReplicationListener && kc.Spec.Security.ListenerCertificate != nil {
			dir = ListenerTLSDir
		}
		auth := strata.ClientAuthNone
		if l.TLS != nil && l.TLS.ClientAuth != "" {
			auth = l.TLS.ClientAuth
		}
		p := "listener.name." + strings.ToLower(l.Name) + ".ssl."
		kv[p+"certificate.location"] = dir + "/" + TLSCertKey
		kv[p+"key.location"] = dir + "/" + TLSKeyKey
		kv[p+"client.auth"] = string(auth)
		if auth != strata.ClientAuthNone {
			kv[p+"ca.location"] = dir + "/" + CACertKey
			if dir == ClusterTLSDir && l.Name != ReplicationListener {
				kv[p+"ca.location"] = ClientsCADir + "/" + CACertKey
			}
		}
	}
	kv["listeners"] = strings.Join(ls, ",")
	kv["advertised.listeners"] = strings.Join(adv, ",")
	kv["listener.security.protocol.map"] = strings.Join(protos, ",")
	kv["inter.broker.listener.name"] = ReplicationListener
	if legacy {
		kv["inter.broker.listener.name"] = listeners[0].Name
	}
}

// UpgradingInterBroker decides whether a cluster's brokers must go on
// replicating over their first client listener for now. Brokers of
// operator releases before the REPLICATION listener neither serve nor
// register it, and a follower dialling a leader's REPLICATION address
// with TLS cannot replicate from them; a roll straight to the new
// config would stall on the first restarted broker's catch-up. So the
// change goes in two rolls: first every broker serves REPLICATION while
// still fetching over the old listener, then, once every pod runs that
// config, inter.broker.listener.name moves to REPLICATION (a follower of
// either config then reaches every leader). configs are the zones'
// current broker.properties (none for a new cluster: REPLICATION at
// once), podsCurrent says every broker pod runs its StatefulSet's
// template. Once a zone replicates over REPLICATION the cluster never
// goes back.
func UpgradingInterBroker(configs []string, podsCurrent bool) bool {
	served := true
	for _, c := range configs {
		if strings.Contains(c, "\ninter.broker.listener.name="+ReplicationListener+"\n") {
			return false
		}
		if !strings.Contains(c, ReplicationListener+"://") {
			served = false
		}
	}
	return len(configs) > 0 && !(served && podsCurrent)
}

// ManagedEtcd reports whether the operator runs etcd for this cluster, and
// with which settings (defaults filled in).
func ManagedEtcd(kc *strata.KafkaCluster) (strata.ManagedEtcdSpec, bool) {
	if len(kc.Spec.Metadata.ExternalEndpoints) > 0 {
		return strata.ManagedEtcdSpec{}, false
	}
	m := strata.ManagedEtcdSpec{}
	if kc.Spec.Metadata.Managed != nil {
		m = *kc.Spec.Metadata.Managed
	}
	if m.Replicas == 0 {
		m.Replicas = 3
	}
	if m.Image == "" {
		m.Image = strata.DefaultEtcdImage
	}
	if m.StorageSize == nil || m.StorageSize.IsZero() {
		q := mustQuantity("10Gi")
		m.StorageSize = &q
	}
	return m, true
}

// MetadataEndpoints are the etcd client URLs the brokers use: the managed
// members' stable DNS names, or the external endpoints.
func MetadataEndpoints(kc *strata.KafkaCluster) []string {
	m, managed := ManagedEtcd(kc)
	if !managed {
		return append([]string(nil), kc.Spec.Metadata.ExternalEndpoints...)
	}
	out := make([]string, 0, m.Replicas)
	for i := int32(0); i < m.Replicas; i++ {
		out = append(out, fmt.Sprintf("https://%s.%s:%d", etcdMemberName(kc, i), etcdServiceDomain(kc), etcdClientPort))
	}
	return out
}

// WALClusterName is the cluster name a broker configured by the operator
// runs under: the broker derives it from metadata.etcd.prefix
// (/strata/<namespace>/<name>/), keys its etcd metadata with it and puts
// it in the <cluster> part of its WAL object keys
// (wal/<namespace>/<name>/<zone>/...). Clusters of the same name in
// different namespaces therefore never share keys, and the sweeper
// matches keys against exactly this name.
func WALClusterName(kc *strata.KafkaCluster) string {
	return kc.Namespace + "/" + kc.Name
}

// RenderBrokerConfig renders a zone's broker configuration as a
// properties file: the operator's keys merged with spec.config (spec.config
// wins, except for the identity keys CEL forbids there), sorted by key so
// that equal input gives byte-equal output.
//
// WAL: wal.enable, the zone's own FastBucket as wal.bucket.* (uploads) and
// every zone's FastBucket as wal.zone.<zone>.bucket.* (the zone→bucket map
// followers resolve a leader's bucket with; docs/wal.md "Bucket per
// zone"). Only FastBucket specs go in, never their status, so a probe
// does not roll the brokers.
//
// The broker ID is not in the file: a broker computes it at start as
// broker.id.base + the ordinal at the end of its pod name ($POD_NAME), so
// every pod of a StatefulSet can share one ConfigMap. advertised.listeners
// contains ${POD_NAME}, which the broker expands from its environment.
func RenderBrokerConfig(kc *strata.KafkaCluster, zi ZoneInput) string {
	kv := map[string]string{
		"cluster.name":            kc.Name,
		"zone":                    zi.Zone.Name,
		"broker.rack":             zi.Zone.Name,
		"broker.id.base":          strconv.Itoa(int(zi.IDBase)),
		"log.dirs":                BrokerDataDir + "/data",
		"metadata.etcd.endpoints": strings.Join(MetadataEndpoints(kc), ","),
		"metadata.etcd.prefix":    "/strata/" + WALClusterName(kc) + "/",
		"leader.placement.policy": string(orDefault(string(kc.Spec.LeaderPlacement.Policy), string(strata.LeaderPlacementBalanced))),
		// The readiness probe and the metrics port use this address.
		"metrics.listen": fmt.Sprintf("0.0.0.0:%d", brokerMetricsPort),
		// Everything on it but /healthz and /readyz (the probes) needs
		// the cluster's bearer token: /metrics shows topic names and
		// offsets that ACLs hide from clients.
		"metrics.auth.token.file": MetricsTokenDir + "/" + MetricsTokenKey,
	}
	if z := kc.Spec.LeaderPlacement.Zone; z != "" {
		// The broker default of the leader.placement.zone topic config;
		// the brokers refuse a zone without policy Zone and the reverse.
		kv["leader.placement.zone"] = z
	}

	renderListeners(kc, kv, zi.LegacyInterBroker)
	renderReauth(kc, kv)
	renderAuthorization(kc, kv)
	if _, managed := ManagedEtcd(kc); managed {
		// The managed etcd requires client certificates of the cluster
		// CA; the broker presents its own (it has the clientAuth usage).
		kv["metadata.etcd.ssl.ca.location"] = ClusterTLSDir + "/" + CACertKey
		kv["metadata.etcd.ssl.certificate.location"] = ClusterTLSDir + "/" + TLSCertKey
		kv["metadata.etcd.ssl.key.location"] = ClusterTLSDir + "/" + TLSKeyKey
	} else if kc.Spec.Metadata.ExternalTLS != nil {
		// The external etcd's CA and the client certificate of the
		// user's Secret (mounted at EtcdTLSDir).
		kv["metadata.etcd.ssl.ca.location"] = EtcdTLSDir + "/" + CACertKey
		kv["metadata.etcd.ssl.certificate.location"] = EtcdTLSDir + "/" + TLSCertKey
		kv["metadata.etcd.ssl.key.location"] = EtcdTLSDir + "/" + TLSKeyKey
	}

	wal := kc.Spec.WAL
	kv["wal.enable"] = strconv.FormatBool(wal.IsEnabled())
	kv["wal.upload.interval.ms"] = millis(durationOr(wal.UploadInterval, 10*time.Millisecond))
	kv["wal.object.max.bytes"] = strconv.FormatInt(orDefaultInt(wal.MaxObjectBytes, 256<<10), 10)
	kv["wal.retention.ms"] = millis(durationOr(wal.Retention, time.Hour))
	renderCostConfig(kc, kv) // wal.policy and the price table (kafkacluster_cost.go)
	renderZoneLocalProduce(kc, kv)
	if b := zi.Bucket; b != nil {
		kv["wal.bucket.resource"] = b.Name
		kv["wal.bucket.name"] = b.Spec.Bucket
		kv["wal.bucket.region"] = b.Spec.Region
		kv["wal.bucket.endpoint"] = b.Spec.Endpoint
		kv["wal.bucket.type"] = string(orDefault(string(b.Spec.Type), string(strata.BucketTypeS3)))
		kv["wal.bucket.force.path.style"] = strconv.FormatBool(b.Spec.ForcePathStyle)
		kv["wal.bucket.credentials.source"] = string(b.Spec.Credentials.EffectiveSource())
		if ref := b.Spec.Credentials.SecretRef; ref != nil && b.Spec.Credentials.EffectiveSource() == strata.CredentialsFromSecret {
			kv["wal.bucket.credentials.secret"] = ref.Name
		}
	}

	// The zone→bucket map: a follower downloads a leader's WAL objects
	// with the settings of the leader's zone bucket.
	for _, z := range sortedZones(zi.ZoneBuckets) {
		b := zi.ZoneBuckets[z]
		p := "wal.zone." + z + ".bucket."
		kv[p+"resource"] = b.Name
		kv[p+"name"] = b.Spec.Bucket
		kv[p+"region"] = b.Spec.Region
		kv[p+"endpoint"] = b.Spec.Endpoint
		kv[p+"type"] = string(orDefault(string(b.Spec.Type), string(strata.BucketTypeS3)))
		kv[p+"force.path.style"] = strconv.FormatBool(b.Spec.ForcePathStyle)
		kv[p+"credentials.source"] = string(b.Spec.Credentials.EffectiveSource())
		if env := walEnvPrefix(zi, z, b); env != "" {
			kv[p+"credentials.secret"] = b.Spec.Credentials.SecretRef.Name
			kv[p+"credentials.env"] = env
		}
	}

	if ts := kc.Spec.TieredStorage; ts != nil {
		// Kafka's switch of the slow tier; topics tiered unless they say
		// otherwise (remote.storage.enable), as the spec asks for the
		// cluster (compacted topics cannot be: the broker skips them).
		kv["remote.log.storage.system.enable"] = "true"
		kv["log.remote.storage.enable"] = "true"
		kv["tier.bucket.name"] = ts.Bucket
		kv["tier.bucket.region"] = ts.Region
		kv["tier.bucket.endpoint"] = ts.Endpoint
		kv["tier.bucket.force.path.style"] = strconv.FormatBool(ts.ForcePathStyle)
		kv["tier.bucket.credentials.source"] = string(ts.Credentials.EffectiveSource())
		if ref := ts.Credentials.SecretRef; ref != nil && ts.Credentials.EffectiveSource() == strata.CredentialsFromSecret {
			kv["tier.bucket.credentials.secret"] = ref.Name
		}
		kv["log.local.retention.ms"] = millis(durationOr(ts.LocalRetention, 24*time.Hour))
	}

	for k, v := range kc.Spec.Config {
		// Dynamic keys too: a broker starts with them (no window before
		// the operator applies them cluster-wide); RolloutConfigHash
		// leaves their values out, so a change of one restarts nobody.
		kv[k] = v
	}

	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Strata broker configuration for cluster %s/%s, zone %s.\n", kc.Namespace, kc.Name, zi.Zone.Name)
	sb.WriteString("# Written by the Strata operator from the KafkaCluster and FastBucket; edits are overwritten.\n")
	sb.WriteString("# broker.id = broker.id.base + the ordinal of the pod name.\n")
	for _, k := range keys {
		sb.WriteString(escapeProperty(k, true))
		sb.WriteByte('=')
		sb.WriteString(escapeProperty(kv[k], false))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// RolloutConfigHash is the config hash that goes into zi's pod template:
// ConfigHash of the zone's ConfigMap rendered with the values of the
// dynamic spec.config keys masked. A new value of a dynamic key is applied
// through the admin API without a restart (kafkacluster_dynconfig.go) and
// reaches the file for the next start; adding or removing such a key
// changes the hash and rolls the brokers, since a running broker keeps
// the value its file had at start as the key's static value.
func RolloutConfigHash(kc *strata.KafkaCluster, zi ZoneInput) string {
	if len(dynamicSpecConfig(kc)) == 0 {
		return ConfigHash(BuildZoneConfigMap(kc, zi).Data)
	}
	masked := kc.DeepCopy()
	for k := range masked.Spec.Config {
		if IsDynamicConfigKey(k) {
			masked.Spec.Config[k] = "(dynamic)"
		}
	}
	return ConfigHash(BuildZoneConfigMap(masked, zi).Data)
}

// ConfigHash is the SHA-256 of a ConfigMap's data, over sorted keys.
func ConfigHash(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(data[k]), data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// escapeProperty escapes a key or value for a Java-style properties file,
// as the broker's parser (and java.util.Properties) decodes it: backslash,
// line breaks, tabs and form feeds, every other whitespace, control or
// non-printable character as \uXXXX, in keys the separators '=', ':' and
// space and the comment marks, in values a leading or final space and a
// leading comment mark.
// Nothing but a printable character reaches the file as itself, so no
// parser can trim or split a key differently from what spec.config says.
func escapeProperty(s string, key bool) string {
	var sb strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\f':
			sb.WriteString(`\f`)
		case '=', ':', '#', '!':
			if key || (i == 0 && (r == '#' || r == '!')) {
				sb.WriteByte('\\')
			}
			sb.WriteRune(r)
		case ' ':
			if key || i == 0 || i == len(s)-1 {
				sb.WriteByte('\\')
			}
			sb.WriteRune(r)
		default:
			if unicode.IsSpace(r) || !unicode.IsPrint(r) {
				for _, u := range utf16.Encode([]rune{r}) {
					fmt.Fprintf(&sb, `\u%04x`, u)
				}
				continue
			}
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration == 0 {
		return def
	}
	return d.Duration
}

func millis(d time.Duration) string {
	ms := d.Milliseconds()
	if ms == 0 && d > 0 {
		ms = 1
	}
	return strconv.FormatInt(ms, 10)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefaultInt(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// DefaultZoneLocalInlineFallback is spec.wal.zoneLocalProduce.inlineFallback
// when unset, the brokers' default of wal.zonelocal.produce.inline.ms.
const DefaultZoneLocalInlineFallback = 10 * time.Second

// renderZoneLocalProduce adds the wal.zonelocal.produce.* keys when
// spec.wal.zoneLocalProduce is enabled (with WAL on), and nothing
// otherwise: a cluster that does not use it keeps its config, and its
// config hash, byte for byte. Enabling it changes the hash, which rolls
// the brokers as any static key does.
func renderZoneLocalProduce(kc *strata.KafkaCluster, kv map[string]string) {
	if !kc.Spec.WAL.ZoneLocalEnabled() {
		return
	}
	zl := kc.Spec.WAL.ZoneLocalProduce
	kv["wal.zonelocal.produce.enable"] = "true"
	kv["wal.zonelocal.produce.policy"] = strings.ToLower(orDefault(string(zl.Policy), string(strata.ZoneLocalProduceBucket)))
	fallback := DefaultZoneLocalInlineFallback
	if zl.InlineFallback != nil {
		fallback = zl.InlineFallback.Duration // 0s is "no fallback", not "unset"
	}
	kv["wal.zonelocal.produce.inline.ms"] = millis(fallback)
}
