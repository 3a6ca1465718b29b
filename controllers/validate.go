package controllers

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// MaxBrokerMillis is the largest value the broker accepts for its
// wal.*.ms settings: it parses them as a positive int32.
const MaxBrokerMillis = 1<<31 - 1

// ownedConfigKeys are broker settings the operator renders from a
// KafkaCluster field (or the broker's aliases of them), by the field that
// owns them. spec.config must not set them: the CRD's CEL rules on
// spec.config refuse exactly these keys, and TestOwnedConfigKeysCoverRender
// checks that every key RenderBrokerConfig writes is among them.
var ownedConfigKeys = map[string]string{
	"broker.id":                      "spec.zones (broker ID blocks)",
	"node.id":                        "spec.zones (broker ID blocks)",
	"broker.id.base":                 "spec.zones (broker ID blocks)",
	"broker.id.source":               "spec.zones (broker ID blocks)",
	"broker.rack":                    "spec.zones[].name",
	"zone":                           "spec.zones[].name",
	"cluster.name":                   "metadata.name",
	"cluster.namespace":              "metadata.namespace",
	"log.dirs":                       "spec.storage",
	"log.dir":                        "spec.storage",
	"data.dir":                       "spec.storage",
	"listeners":                      "spec.listeners",
	"advertised.listeners":           "spec.listeners",
	"listen":                         "spec.listeners",
	"advertised.address":             "spec.listeners",
	"security.inter.broker.protocol": "the operator (inter-broker listener REPLICATION, mTLS)",
	"wal.enable":                     "spec.wal.enabled",
	"wal.enabled":                    "spec.wal.enabled",
	"wal.upload.interval.ms":         "spec.wal.uploadInterval",
	"wal.object.max.bytes":           "spec.wal.maxObjectBytes",
	"wal.retention.ms":               "spec.wal.retention",
	"log.local.retention.ms":         "spec.tieredStorage",
	"log.remote.storage.enable":      "spec.tieredStorage",
	"metrics.listen":                 "the operator (readiness probe on /readyz, port 9644)",
	// pprof on the metrics port: any pod reaching port 9644 would read
	// the brokers' profiles and command lines.
	"metrics.pprof.enable": "the operator (port 9644 answers without authentication)",
	// cost (kafkacluster_cost.go)
	"wal.policy":                 "spec.wal.policy",
	"wal.upload.max.interval.ms": "spec.wal.maxUploadInterval",
	"wal.auto.max.latency.ms":    "spec.wal.maxLatency",
	"wal.auto.max.cost.ratio":    "spec.wal.maxCostPercent",
	// zone-local produce (brokerconfig.go renderZoneLocalProduce)
	"wal.zonelocal.produce.enable":    "spec.wal.zoneLocalProduce.enabled",
	"wal.zonelocal.produce.inline.ms": "spec.wal.zoneLocalProduce.inlineFallback",
	"wal.zonelocal.produce.policy":    "spec.wal.zoneLocalProduce.policy",
	// authorization (security_defaults.go)
	"authorizer.class.name":          "spec.security.authorization",
	"super.users":                    "spec.security.authorization",
	"allow.everyone.if.no.acl.found": "spec.security.authorization",
}

// grandfatheredConfigKeys are owned keys that operator releases before
// spec.security.authorization told users to set in spec.config. The API
// server refuses them in new and changed configs; a stored config that
// has them keeps working (they override the rendered keys, as before)
// instead of stalling the cluster in UnsupportedSpec.
//
// The zone-local produce keys were the only way to turn it on before
// spec.wal.zoneLocalProduce; a cluster may not use both
// (zoneLocalConfigProblems).
var grandfatheredConfigKeys = []string{
	"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
	"wal.zonelocal.produce.enable", "wal.zonelocal.produce.inline.ms",
}

// ownedConfigPrefixes are key prefixes the operator owns, by owner.
var ownedConfigPrefixes = []struct{ prefix, owner string }{
	{"metadata.etcd.", "spec.metadata"},
	{"wal.bucket.", "spec.zones[].fastBucketRef"},
	{"wal.zone.", "spec.zones[].fastBucketRef"},
	{"tier.", "spec.tieredStorage"},
	{"remote.log.", "spec.tieredStorage"},
	{"leader.placement.", "spec.leaderPlacement"},
	{"cost.price.", "spec.cost.prices"},
	{"listener.", "spec.listeners"},
	{"inter.broker.", "the operator (inter-broker listener REPLICATION, mTLS)"},
	{"ssl.", "spec.listeners[].tls and spec.security"},
	// The metrics listener's access control (metrics.auth.*,
	// metrics.ssl.*): a token file or certificate the pod does not
	// mount would stop every broker at start.
	{"metrics.", "the operator (the metrics listener on port 9644)"},
	{"sasl.", "the KafkaUser resource (SASL listeners accept SCRAM-SHA-256 and -512)"},
}

// ConfigKeyPattern is the character set of spec.config keys, the CRD's
// first CEL rule on spec.config: lower case words of letters, digits, '_'
// and '-' joined by dots, as Kafka's keys are. A key outside it can be
// read by a properties parser as another key (the broker trimmed a form
// feed off "node.id\f"); the broker now refuses such keys, and the CRD and
// the operator refuse them before they reach it.
const ConfigKeyPattern = `^[a-z0-9][a-z0-9._-]*$`

var configKeyRE = regexp.MustCompile(ConfigKeyPattern)

// ConfigKeyProblem says why spec.config must not set key, or returns ""
// when it may. A key outside ConfigKeyPattern is refused, naming the
// field that owns the key it spells once its other characters are gone.
// Grandfathered keys pass (see grandfatheredConfigKeys).
func ConfigKeyProblem(key string) string {
	if !configKeyRE.MatchString(key) {
		msg := fmt.Sprintf("spec.config key %q: keys must be lower case letters, digits, '.', '_' and '-' (%s)", key, ConfigKeyPattern)
		core := strings.TrimFunc(key, func(r rune) bool { return !isConfigKeyRune(r) })
		if owner, ok := ConfigKeyOwner(core); ok {
			msg += fmt.Sprintf("; the brokers could read it as %s, which is owned by %s", core, owner)
		}
		return msg
	}
	if owner, ok := ConfigKeyOwner(key); ok && !slices.Contains(grandfatheredConfigKeys, key) {
		return fmt.Sprintf("spec.config must not set %s: it is owned by %s", key, owner)
	}
	return ""
}

func isConfigKeyRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// ConfigKeyOwner returns the KafkaCluster field that owns a broker
// setting, or ok=false when spec.config may set it.
func ConfigKeyOwner(key string) (owner string, ok bool) {
	if o, ok := ownedConfigKeys[key]; ok {
		return o, true
	}
	for _, p := range ownedConfigPrefixes {
		if strings.HasPrefix(key, p.prefix) {
			return p.owner, true
		}
	}
	return "", false
}

// UnsupportedSpec lists what in a KafkaCluster the CRD's validation
// refuses today and the operator cannot honour: keys of spec.config the
// operator owns (TLS and SASL keys included) or outside ConfigKeyPattern, listeners
// that take the inter-broker listener's name or port or set tls on a
// protocol without TLS, a leader placement the brokers would refuse to
// start with (policy Zone without a zone of spec.zones, a zone without
// policy Zone) and WAL durations the broker cannot parse. The API server refuses these on
// create and update; an object stored before those rules existed (or kept
// by validation ratcheting) still reaches the reconciler, which then
// reports the problems instead of rendering a config the brokers would
// ignore or crash on.
func UnsupportedSpec(kc *strata.KafkaCluster) []string {
	var problems []string
	keys := make([]string, 0, len(kc.Spec.Config))
	for k := range kc.Spec.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if p := ConfigKeyProblem(k); p != "" {
			problems = append(problems, p)
		}
	}
	problems = append(problems, zoneLocalConfigProblems(kc, keys)...)
	problems = append(problems, listenerProblems(kc)...)
	problems = append(problems, leaderPlacementProblems(kc)...)
	if r := kc.Spec.WAL.Retention; r != nil && (r.Duration < time.Millisecond || r.Duration > MaxBrokerMillis*time.Millisecond) {
		problems = append(problems, fmt.Sprintf("wal.retention %s is outside 1ms..%dms, what the broker parses", r.Duration, int64(MaxBrokerMillis)))
	}
	if zl := kc.Spec.WAL.ZoneLocalProduce; zl != nil {
		if f := zl.InlineFallback; f != nil && f.Duration != 0 && (f.Duration < time.Millisecond || f.Duration > time.Hour) {
			problems = append(problems, fmt.Sprintf("wal.zoneLocalProduce.inlineFallback %s is neither 0s nor within 1ms..1h, what the broker parses", f.Duration))
		}
		if zl.Enabled && !kc.Spec.WAL.IsEnabled() {
			problems = append(problems, "wal.zoneLocalProduce.enabled needs wal.enabled: zone-local produce forwards records through the zones' fast buckets")
		}
	}
	return problems
}

// zoneLocalConfigProblems mirrors the CEL rule that keeps the zone-local
// keys grandfathered in spec.config away from spec.wal.zoneLocalProduce:
// with both, one of them would silently lose. keys are spec.config's keys,
// sorted.
func zoneLocalConfigProblems(kc *strata.KafkaCluster, keys []string) []string {
	if kc.Spec.WAL.ZoneLocalProduce == nil {
		return nil
	}
	var problems []string
	for _, k := range keys {
		if owner, _ := ConfigKeyOwner(strings.TrimSpace(k)); strings.HasPrefix(owner, "spec.wal.zoneLocalProduce") {
			problems = append(problems, fmt.Sprintf("spec.config sets %s and spec.wal.zoneLocalProduce is set: remove the key from spec.config", k))
		}
	}
	return problems
}

// leaderPlacementProblems mirrors the CEL rules of spec.leaderPlacement:
// the brokers refuse to start with policy Zone and no zone, or a zone and
// policy Balanced, and a zone outside spec.zones would pin leaders nowhere.
func leaderPlacementProblems(kc *strata.KafkaCluster) []string {
	lp := kc.Spec.LeaderPlacement
	zone := lp.Policy == strata.LeaderPlacementZone
	switch {
	case zone && lp.Zone == "":
		return []string{"leaderPlacement.policy Zone needs leaderPlacement.zone"}
	case !zone && lp.Zone != "":
		return []string{"leaderPlacement.zone needs leaderPlacement.policy Zone (Balanced spreads leaders over all zones)"}
	case zone && !slices.ContainsFunc(kc.Spec.Zones, func(z strata.ZoneSpec) bool { return z.Name == lp.Zone }):
		return []string{"leaderPlacement.zone must name a zone listed in spec.zones"}
	}
	return nil
}

// listenerProblems mirrors the CEL rules on spec.listeners and
// spec.security.listenerCertificate.
func listenerProblems(kc *strata.KafkaCluster) []string {
	var problems []string
	// No listeners: the default one is SASL_SSL (a cluster that keeps the
	// legacy PLAINTEXT default is checked in securityDefaults).
	tlsListener := len(kc.Spec.Listeners) == 0
	for _, l := range kc.Spec.Listeners {
		if l.Name == ReplicationListener || l.Port == ReplicationPort || l.Port == brokerMetricsPort {
			problems = append(problems, fmt.Sprintf("listener %s: the name %s and the ports %d and %d are the operator's (the brokers' mTLS inter-broker listener and their metrics and readiness port)", l.Name, ReplicationListener, ReplicationPort, brokerMetricsPort))
		}
		isTLS := l.Protocol == "SSL" || l.Protocol == "SASL_SSL"
		tlsListener = tlsListener || isTLS
		if l.TLS != nil && !isTLS {
			problems = append(problems, fmt.Sprintf("listener %s: tls applies to protocol SSL or SASL_SSL only", l.Name))
		}
	}
	if kc.Spec.Security.ListenerCertificate != nil && !tlsListener {
		problems = append(problems, "security.listenerCertificate needs a listener of protocol SSL or SASL_SSL to serve it (the default listener is SASL_SSL)")
	}
	return problems
}
