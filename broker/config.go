package broker

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
)

// Config source values of DescribeConfigs (Kafka's ConfigSource).
const (
	SourceDynamicTopic         = 1
	SourceDynamicBroker        = 2
	SourceDynamicDefaultBroker = 3
	SourceStaticBroker         = 4
	SourceDefault              = 5
)

// Config types of DescribeConfigs v3+ (Kafka's ConfigType).
const (
	typeBoolean = 1
	typeString  = 2
	typeInt     = 3
	typeLong    = 5
	typeDouble  = 6
	typeList    = 7
)

// topicConfig describes one topic-level config: its Kafka default, the
// broker config key that overrides the default ("" for topic-only configs,
// which have no broker-level default), and its validation.
type topicConfig struct {
	name      string
	brokerKey string
	def       string
	typ       int8
	doc       string
	check     func(string) error
}

func longAtLeast(lo int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a long: %q", v)
		}
		if n < lo {
			return fmt.Errorf("%d is below the minimum %d", n, lo)
		}
		return nil
	}
}

func intAtLeast(lo int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("not an int: %q", v)
		}
		if n < lo {
			return fmt.Errorf("%d is below the minimum %d", n, lo)
		}
		return nil
	}
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		for _, ok := range values {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %q", v, values)
	}
}

// zoneName accepts "" (no zone) or a rack name: no blanks, commas or
// control characters, at most 255 bytes. Whether brokers run in the zone is
// checked where the topic is created or changed.
func zoneName(v string) error {
	if len(v) > 255 {
		return fmt.Errorf("zone name longer than 255 bytes")
	}
	for _, r := range v {
		if r <= ' ' || r == ',' || r == 0x7f {
			return fmt.Errorf("%q is not a zone name (no blanks, commas or control characters)", v)
		}
	}
	return nil
}

const maxLong = "9223372036854775807"

// cleanupPolicy accepts Kafka's cleanup.policy lists: compact, delete or
// both, each once.
func cleanupPolicy(v string) error {
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "compact" && p != "delete" {
			return fmt.Errorf("%q is not a list of compact and delete", v)
		}
		if seen[p] {
			return fmt.Errorf("%q names %s twice", v, p)
		}
		seen[p] = true
	}
	return nil
}

func ratio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return fmt.Errorf("not a double: %q", v)
	}
	if f < 0 || f > 1 {
		return fmt.Errorf("%v is outside [0, 1]", f)
	}
	return nil
}

// policyHas reports whether a validated cleanup.policy value names p.
func policyHas(v, p string) bool {
	for _, q := range strings.Split(v, ",") {
		if strings.TrimSpace(q) == p {
			return true
		}
	}
	return false
}

// topicConfigs are the topic configs Strata accepts. Any other name is
// rejected with INVALID_CONFIG.
var topicConfigs = []topicConfig{
	{name: "cleanup.policy", brokerKey: "log.cleanup.policy", def: "delete", typ: typeList, check: cleanupPolicy,
		doc: "delete: retention.ms and retention.bytes delete old segments. compact: the log cleaner keeps the latest record of each key " +
			"(records without a key are refused). compact,delete: both."},
	{name: "min.cleanable.dirty.ratio", brokerKey: "log.cleaner.min.cleanable.ratio", def: "0.5", typ: typeDouble, check: ratio,
		doc: "Clean a compacted log once the uncleaned part is at least this share of its cleanable bytes."},
	{name: "min.compaction.lag.ms", brokerKey: "log.cleaner.min.compaction.lag.ms", def: "0", typ: typeLong, check: longAtLeast(0),
		doc: "A record stays uncompacted at least this long."},
	{name: "max.compaction.lag.ms", brokerKey: "log.cleaner.max.compaction.lag.ms", def: maxLong, typ: typeLong, check: longAtLeast(1),
		doc: "A closed segment with a record older than this is cleaned whatever the dirty ratio (the active segment is closed by segment.ms and segment.bytes)."},
	{name: "delete.retention.ms", brokerKey: "log.cleaner.delete.retention.ms", def: "86400000", typ: typeLong, check: longAtLeast(0),
		doc: "A tombstone (null value) of a compacted topic stays this long after the cleaner first reached it, then it is removed."},
	{name: "compression.type", brokerKey: "compression.type", def: "producer", typ: typeString, check: oneOf("producer"),
		doc: "Only \"producer\" is supported: batches are stored as the producer compressed them."},
	{name: "retention.ms", brokerKey: "log.retention.ms", def: "604800000", typ: typeLong, check: longAtLeast(-1),
		doc: "Delete segments whose newest record is older than this; -1 keeps them forever."},
	{name: "retention.bytes", brokerKey: "log.retention.bytes", def: "-1", typ: typeLong, check: longAtLeast(-1),
		doc: "Delete the oldest segments while a partition is larger than this; -1 means no limit."},
	{name: "local.retention.ms", brokerKey: "log.local.retention.ms", def: "-2", typ: typeLong, check: longAtLeast(-2),
		doc: "A tiered topic (remote.storage.enable) keeps segments on the broker's disk this long, and only once they are in the slow tier. -2 means retention.ms; never above retention.ms."},
	{name: "local.retention.bytes", brokerKey: "log.local.retention.bytes", def: "-2", typ: typeLong, check: longAtLeast(-2),
		doc: "A tiered topic keeps at most this many bytes per partition on the broker's disk (of segments already in the slow tier). -2 means retention.bytes; never above retention.bytes."},
	{name: ConfigRemoteStorage, brokerKey: "log.remote.storage.enable", def: "false", typ: typeBoolean, check: oneOf("true", "false"),
		doc: "Copy closed segments to the slow tier (regional bucket) and serve reads below the local log from it. Needs remote.log.storage.system.enable and cleanup.policy=delete; cannot be turned off again. " +
			"The broker default log.remote.storage.enable is Strata's (the operator sets it with spec.tieredStorage)."},
	{name: "segment.bytes", brokerKey: "log.segment.bytes", def: "1073741824", typ: typeInt, check: intAtLeast(14),
		doc: "Roll a new segment when the active one reaches this size."},
	{name: "segment.ms", brokerKey: "log.roll.ms", def: "604800000", typ: typeLong, check: longAtLeast(1),
		doc: "Roll a new segment when the active one is older than this."},
	{name: "max.message.bytes", brokerKey: "message.max.bytes", def: "1048588", typ: typeInt, check: intAtLeast(1),
		doc: "Largest record batch accepted; its records may decompress to 32 times this, at most 256 MiB. " +
			"At least 1: 0 is not \"no limit\" (a topic stored with 0 before this rule gets the default)."},
	{name: "min.insync.replicas", brokerKey: "min.insync.replicas", def: "1", typ: typeInt, check: intAtLeast(1),
		doc: "Minimum in-sync replicas for acks=all (a single broker always has 1)."},
	{name: "unclean.leader.election.enable", brokerKey: "unclean.leader.election.enable", def: "false", typ: typeBoolean, check: oneOf("true", "false"),
		doc: "Let the controller elect an out-of-sync replica when no in-sync replica is alive (availability over durability; cluster mode)."},
	{name: "message.timestamp.type", brokerKey: "log.message.timestamp.type", def: "CreateTime", typ: typeString, check: oneOf("CreateTime", "LogAppendTime"),
		doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's clock."},
	{name: "flush.ms", brokerKey: "log.flush.interval.ms", def: "1000", typ: typeLong, check: longAtLeast(0),
		doc: "fsync a partition's unflushed data at least this often (Strata's default is 1 s; Kafka never fsyncs on a timer). " +
			"0 fsyncs every append before it is acknowledged; " + maxLong + " disables the timer."},
	{name: "flush.messages", brokerKey: "log.flush.interval.messages", def: maxLong, typ: typeLong, check: longAtLeast(1),
		doc: "fsync a partition once this many records are unflushed; " + maxLong + " disables it."},
	{name: "leader.placement.zone", brokerKey: "leader.placement.zone", def: "", typ: typeString, check: zoneName,
		doc: "Zone (broker.rack) that holds the preferred leaders of the topic's partitions; the controller moves them there and elects them. " +
			"Empty: preferred leaders are balanced over zones. The broker default is set with leader.placement.policy=Zone."},
	{name: "index.interval.bytes", brokerKey: "log.index.interval.bytes", def: "4096", typ: typeInt, check: intAtLeast(0),
		doc: "Bytes between offset index entries."},
	{name: ConfigLeaderThrottledReplicas, def: "", typ: typeList, check: throttledReplicaList,
		doc: "Replicas (partition:broker,... or *) whose replication to followers outside the ISR counts against that broker's leader.replication.throttled.rate while it leads them."},
	{name: ConfigFollowerThrottledReplicas, def: "", typ: typeList, check: throttledReplicaList,
		doc: "Replicas (partition:broker,... or *) that, while outside the ISR, fetch within that broker's follower.replication.throttled.rate."},
}

var topicConfigByName = func() map[string]*topicConfig {
	m := make(map[string]*topicConfig, len(topicConfigs))
	for i := range topicConfigs {
		m[topicConfigs[i].name] = &topicConfigs[i]
	}
	return m
}()

// ValidateTopicConfig checks one topic config name and value.
func ValidateTopicConfig(name, value string) error {
	tc, ok := topicConfigByName[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, name)
	}
	if err := tc.check(value); err != nil {
		return fmt.Errorf("%w: %s: %v", kerr.InvalidConfig, name, err)
	}
	return nil
}

// ConfigEntry is one config as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     string
	Source    int8
	ReadOnly  bool
	Sensitive bool
	Type      int8
	Doc       string
	// Synonyms lists, most specific first, where the value could come from.
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one source of a config value.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source int8
}

// effectiveTopicConfig returns the value and source of a topic config.
func (b *Broker) effectiveTopicConfig(tc *topicConfig, overrides map[string]string) ConfigEntry {
	e := ConfigEntry{Name: tc.name, Type: tc.typ, Doc: tc.doc}
	if v, ok := overrides[tc.name]; ok {
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: tc.name, Value: v, Source: SourceDynamicTopic})
	}
	if tc.brokerKey == "" {
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: tc.name, Value: tc.def, Source: SourceDefault})
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		return e
	}
	if d := b.dynTopicDefaults.Load(); d != nil {
		e.Synonyms = append(e.Synonyms, (*d)[tc.brokerKey]...)
	}
	if v, ok := b.cfg.LogDefaults[tc.brokerKey]; ok {
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: tc.brokerKey, Value: v, Source: SourceStaticBroker})
	}
	e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: tc.brokerKey, Value: tc.def, Source: SourceDefault})
	e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
	return e
}

// topicConfigEntries returns every topic config of a topic, sorted by name.
func (b *Broker) topicConfigEntries(overrides map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(topicConfigs))
	for i := range topicConfigs {
		out = append(out, b.effectiveTopicConfig(&topicConfigs[i], overrides))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// logConfig builds the partition log configuration from a topic's effective
// configs.
func (b *Broker) logConfig(overrides map[string]string) log.Config {
	get := func(name string) string {
		return b.effectiveTopicConfig(topicConfigByName[name], overrides).Value
	}
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(get(name), 10, 64) // validated before it was stored
		return n
	}
	ms := func(name string) time.Duration {
		n := num(name)
		if n < 0 {
			return time.Duration(n) // -1 infinite, -2 "same as"
		}
		if n > math.MaxInt64/int64(time.Millisecond) {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(n) * time.Millisecond
	}
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = num("segment.bytes")
	cfg.SegmentMs = ms("segment.ms")
	cfg.RetentionMs = ms("retention.ms")
	cfg.RetentionBytes = num("retention.bytes")
	cfg.IndexIntervalBytes = int(num("index.interval.bytes"))
	cfg.FlushInterval = ms("flush.ms")
	if get("flush.ms") == maxLong {
		cfg.FlushInterval = -1 // never on a timer
	}
	cfg.FlushMessages = num("flush.messages")
	if get("flush.messages") == maxLong {
		cfg.FlushMessages = 0 // disabled
	}
	cfg.MessageTimestampType = get("message.timestamp.type")
	cfg.MaxMessageBytes = int(num("max.message.bytes"))
	if b.cfg.ProducerIDExpiration > 0 {
		cfg.ProducerIDExpiration = b.cfg.ProducerIDExpiration
	}
	policy := get("cleanup.policy")
	cfg.Compact, cfg.Delete = policyHas(policy, "compact"), policyHas(policy, "delete")
	cfg.MinCleanableDirtyRatio, _ = strconv.ParseFloat(get("min.cleanable.dirty.ratio"), 64)
	cfg.MinCompactionLag = ms("min.compaction.lag.ms")
	cfg.MaxCompactionLag = ms("max.compaction.lag.ms")
	cfg.DeleteRetention = ms("delete.retention.ms")
	cfg.LocalRetentionMs = ms("local.retention.ms")
	cfg.LocalRetentionBytes = num("local.retention.bytes")
	cfg.RemoteStorage = b.tieredByConfig(overrides)
	return cfg
}

// checkTopicConfigs checks what single values cannot: the effective
// configs of a topic (overrides over broker defaults) together, as the log
// will take them (Kafka refuses min.compaction.lag.ms above
// max.compaction.lag.ms, for one).
func (b *Broker) checkTopicConfigs(overrides map[string]string) error {
	if err := log.ValidateConfig(b.logConfig(overrides)); err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	return b.checkRemoteStorage(overrides)
}
