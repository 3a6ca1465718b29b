package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/meta"
)

// Dynamic broker configs (Kafka's DynamicBrokerConfig, the subset Strata
// has). They are stored in the cluster metadata (meta.Store.
// UpdateBrokerConfig, one key per broker ID plus one for the cluster-wide
// default, Kafka's broker resource with an empty name), every broker
// follows them through its metadata watch and applies them without a
// restart (ApplyClusterState). A broker's own value wins over the
// cluster-wide default, which wins over the built-in default. Every other
// broker config is static (the config file): altering one is refused with
// INVALID_CONFIG, never accepted and ignored.

// Replication throttle configs (Kafka's names and semantics, KIP-73;
// broker/replica/throttle.go).
const (
	// ConfigLeaderThrottledRate caps, per broker, the bytes/s it serves
	// to throttled replicas outside the ISR (dynamic broker config).
	ConfigLeaderThrottledRate = "leader.replication.throttled.rate"
	// ConfigFollowerThrottledRate caps, per broker, the bytes/s its
	// throttled replicas outside the ISR fetch (dynamic broker config).
	ConfigFollowerThrottledRate = "follower.replication.throttled.rate"
	// ConfigLeaderThrottledReplicas (topic config) lists the
	// partition:broker pairs, or "*", throttled on the leader side.
	ConfigLeaderThrottledReplicas = "leader.replication.throttled.replicas"
	// ConfigFollowerThrottledReplicas (topic config) lists the
	// partition:broker pairs, or "*", throttled on the follower side.
	ConfigFollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// dynamicConfig is one dynamic broker config.
type dynamicConfig struct {
	name, def, doc string
	typ            int8
	check          func(string) error
	// topic: the config is the broker default of this topic config
	// (log.retention.ms of retention.ms): a dynamic value applies to
	// every partition without its own, at once, and DescribeConfigs
	// lists the config file's value among its synonyms.
	topic string
}

// staticTopicDefaults are the broker defaults of topic configs that stay
// static: log.remote.storage.enable is the operator's
// (spec.tieredStorage, with the tier's bucket settings), and
// leader.placement.zone follows leader.placement.policy.
var staticTopicDefaults = map[string]bool{"log.remote.storage.enable": true, "leader.placement.zone": true}

// The broker defaults of the other topic configs are dynamic, as Kafka's
// log.* cluster-wide configs are: kafka-configs --alter --entity-type
// brokers --entity-default --add-config log.retention.ms=... changes every
// topic that does not set retention.ms, on every broker, without a restart.
func init() {
	for _, tc := range topicConfigs {
		if tc.brokerKey == "" || staticTopicDefaults[tc.brokerKey] {
			continue
		}
		dynamicBrokerConfigs = append(dynamicBrokerConfigs, dynamicConfig{name: tc.brokerKey, def: tc.def, typ: tc.typ, check: tc.check, topic: tc.name,
			doc: "Broker default of the topic config " + tc.name + " (dynamic: per broker or cluster-wide, applied without a restart). " + tc.doc})
	}
}

var dynamicBrokerConfigs = []dynamicConfig{
	{name: ConfigLeaderThrottledRate, def: strconv.FormatInt(math.MaxInt64, 10), typ: typeLong, check: longAtLeast(0),
		doc: "Bytes/s this broker serves, as leader, to the replicas leader.replication.throttled.replicas names while they are outside the ISR. " + maxLong + ": no throttle."},
	{name: ConfigFollowerThrottledRate, def: strconv.FormatInt(math.MaxInt64, 10), typ: typeLong, check: longAtLeast(0),
		doc: "Bytes/s this broker's replicas that follower.replication.throttled.replicas names fetch while they are outside the ISR. " + maxLong + ": no throttle."},
	{name: meta.ConfigCordonedLogDirs, def: "", typ: typeList, check: cordonedLogDirs,
		doc: "The log directories that take no new replica (KIP-1066). A Strata broker has one: \"*\" cordons it (new topics, new partitions and reassignments place no replica on the broker; its replicas stay), \"\" uncordons it. The operator cordons the brokers a scale-down removes."},
}

// cordonedLogDirs accepts "" (nothing cordoned) or "*" (every log
// directory; a Strata broker has one). Kafka also takes directory paths,
// which a broker answering for another broker's resource cannot check:
// refused rather than taken for "*".
func cordonedLogDirs(v string) error {
	if v == "" || v == "*" {
		return nil
	}
	return fmt.Errorf("%q: a Strata broker has one log directory: \"*\" cordons it, \"\" uncordons it", v)
}

func dynamicConfigByName(name string) (*dynamicConfig, bool) {
	for i := range dynamicBrokerConfigs {
		if dynamicBrokerConfigs[i].name == name {
			return &dynamicBrokerConfigs[i], true
		}
	}
	return nil, false
}

// ValidateDynamicBrokerConfig checks one dynamic broker config: a known
// dynamic name (a static one is refused as such) and a valid value.
func (b *Broker) ValidateDynamicBrokerConfig(name, value string) error {
	dc, ok := dynamicConfigByName(name)
	if !ok {
		dynamic := make([]string, 0, len(dynamicBrokerConfigs))
		for _, d := range dynamicBrokerConfigs {
			dynamic = append(dynamic, d.name)
		}
		for _, e := range b.DescribeBrokerConfigs("", nil) {
			if e.Name == name && e.ReadOnly {
				return fmt.Errorf("%w: broker config %q cannot be updated dynamically: it is read from the broker's config file (dynamic broker configs: %q)", kerr.InvalidConfig, name, dynamic)
			}
		}
		return fmt.Errorf("%w: unknown dynamic broker config %q (dynamic broker configs: %q)", kerr.InvalidConfig, name, dynamic)
	}
	if err := dc.check(value); err != nil {
		return fmt.Errorf("%w: %s: %v", kerr.InvalidConfig, name, err)
	}
	return nil
}

// brokerResource accepts "" (the cluster-wide default) or a broker ID,
// and returns it in the form the metadata keys use ("007" is "7").
func brokerResource(resource string) (string, error) {
	if resource == "" {
		return "", nil
	}
	id, err := strconv.ParseInt(resource, 10, 32)
	if err != nil || id < 0 {
		return "", fmt.Errorf("%w: broker resource %q is neither a broker ID nor \"\" (the cluster-wide default)", kerr.InvalidRequest, resource)
	}
	return strconv.Itoa(int(id)), nil
}

// AlterBrokerConfigs replaces the dynamic configs of broker resource (a
// broker ID or "" for the cluster-wide default): AlterConfigs semantics,
// configs not given return to their defaults.
func (b *Broker) AlterBrokerConfigs(ctx context.Context, resource string, configs map[string]*string, validateOnly bool) error {
	next := map[string]string{}
	for k, v := range configs {
		if v == nil {
			return fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, k)
		}
		if err := b.ValidateDynamicBrokerConfig(k, *v); err != nil {
			return err
		}
		next[k] = *v
	}
	return b.setBrokerConfigs(ctx, resource, func(map[string]string) (map[string]string, error) { return next, nil }, validateOnly)
}

// IncrementalAlterBrokerConfigs applies SET and DELETE operations to the
// dynamic configs of broker resource; APPEND and SUBTRACT are for list
// configs, which no dynamic broker config is. SET validates the name and
// value; DELETE of a config that is not set does nothing.
func (b *Broker) IncrementalAlterBrokerConfigs(ctx context.Context, resource string, ops []ConfigOp, validateOnly bool) error {
	return b.setBrokerConfigs(ctx, resource, func(cur map[string]string) (map[string]string, error) {
		next := cloneMap(cur)
		seen := map[string]bool{}
		for _, op := range ops {
			if seen[op.Name] {
				return nil, fmt.Errorf("%w: config %q appears twice", kerr.InvalidRequest, op.Name)
			}
			seen[op.Name] = true
			switch op.Op {
			case OpSet:
				if op.Value == nil {
					return nil, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, op.Name)
				}
				if err := b.ValidateDynamicBrokerConfig(op.Name, *op.Value); err != nil {
					return nil, err
				}
				next[op.Name] = *op.Value
			case OpDelete:
				// Deleting a config that is not set is a no-op whatever
				// its name: kafka-reassign-partitions.sh removes
				// replica.alter.log.dirs.io.max.bytes.per.second along
				// with the two rates, and the state it asks for (not
				// set) is the state there is.
				delete(next, op.Name)
			case OpAppend, OpSubtract:
				return nil, fmt.Errorf("%w: config %q is not a list", kerr.InvalidConfig, op.Name)
			default:
				return nil, fmt.Errorf("%w: unknown config operation %d", kerr.InvalidRequest, op.Op)
			}
		}
		return next, nil
	}, validateOnly)
}

func (b *Broker) setBrokerConfigs(ctx context.Context, resource string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	resource, err := brokerResource(resource)
	if err != nil {
		return err
	}
	if b.cluster == nil {
		return fmt.Errorf("%w: dynamic broker configs live in the cluster metadata (etcd); this broker runs standalone", kerr.InvalidRequest)
	}
	if validateOnly {
		cur := map[string]string{}
		if st := b.ClusterState(); st != nil {
			cur = cloneMap(st.BrokerConfigs[resource])
		}
		_, err := edit(cur)
		return err
	}
	next, err := b.cluster.store.UpdateBrokerConfig(ctx, resource, func(cfg map[string]string) error {
		n, err := edit(cloneMap(cfg))
		if err != nil {
			return err
		}
		clear(cfg)
		for k, v := range n {
			cfg[k] = v
		}
		return nil
	})
	if err != nil {
		if _, ok := errors.AsType[*kerr.Error](err); ok {
			return err
		}
		return metaError(err)
	}
	b.waitTopic(ctx, func(st *meta.ClusterState) bool { return mapsEqual(st.BrokerConfigs[resource], next) })
	b.log.Info("dynamic broker configs changed", "resource", resource, "configs", next)
	return nil
}

// dynamicBrokerEntries describes the dynamic configs as broker resource
// sees them: its own value (DYNAMIC_BROKER_CONFIG), the cluster-wide
// default (DYNAMIC_DEFAULT_BROKER_CONFIG), the built-in default.
func (b *Broker) dynamicBrokerEntries(resource string) []ConfigEntry {
	var own, cluster map[string]string
	if st := b.ClusterState(); st != nil {
		cluster = st.BrokerConfigs[""]
		if resource != "" {
			own = st.BrokerConfigs[resource]
		}
	}
	out := make([]ConfigEntry, 0, len(dynamicBrokerConfigs))
	for _, dc := range dynamicBrokerConfigs {
		e := ConfigEntry{Name: dc.name, Type: dc.typ, Doc: dc.doc}
		if v, ok := own[dc.name]; ok {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: dc.name, Value: v, Source: SourceDynamicBroker})
		}
		if v, ok := cluster[dc.name]; ok {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: dc.name, Value: v, Source: SourceDynamicDefaultBroker})
		}
		if v, ok := b.cfg.LogDefaults[dc.name]; ok && dc.topic != "" {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: dc.name, Value: v, Source: SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: dc.name, Value: dc.def, Source: SourceDefault})
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		out = append(out, e)
	}
	return out
}

// dynamicLong is a long dynamic config's effective value on this broker.
func (b *Broker) dynamicLong(st *meta.ClusterState, name string) int64 {
	dc, _ := dynamicConfigByName(name)
	v := dc.def
	if c, ok := st.BrokerConfigs[""][name]; ok {
		v = c
	}
	if c, ok := st.BrokerConfigs[strconv.Itoa(int(b.cfg.NodeID))][name]; ok {
		v = c
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		// Validated when written; a record written by hand is logged
		// and read as the default.
		b.log.Error(err, "ignoring a dynamic broker config that does not parse", "config", name, "value", v)
		n, _ = strconv.ParseInt(dc.def, 10, 64)
	}
	return n
}

// applyDynamicConfigs applies the dynamic broker configs of a snapshot:
// the throttle rates at once; the topic configs' dynamic broker defaults
// are kept for effectiveTopicConfig, and it reports whether they changed
// (syncTopics then applies every topic's configs again).
func (b *Broker) applyDynamicConfigs(st *meta.ClusterState) (topicDefaultsChanged bool) {
	topicDefaultsChanged = b.setDynamicTopicDefaults(st)
	leader, follower := b.dynamicLong(st, ConfigLeaderThrottledRate), b.dynamicLong(st, ConfigFollowerThrottledRate)
	oldL, oldF := b.cluster.replicas.ThrottleRates()
	if oldL == leader && oldF == follower {
		return topicDefaultsChanged
	}
	b.cluster.replicas.SetThrottleRates(leader, follower)
	b.log.Info("replication throttle rates changed", ConfigLeaderThrottledRate, leader, ConfigFollowerThrottledRate, follower)
	return topicDefaultsChanged
}

// setDynamicTopicDefaults keeps, for each topic config whose broker
// default has a dynamic value on this broker, its synonyms (this broker's
// own value first, then the cluster-wide one); it reports a change.
func (b *Broker) setDynamicTopicDefaults(st *meta.ClusterState) bool {
	own, cluster := st.BrokerConfigs[strconv.Itoa(int(b.cfg.NodeID))], st.BrokerConfigs[""]
	next := map[string][]ConfigSynonym{}
	for _, dc := range dynamicBrokerConfigs {
		if dc.topic == "" {
			continue
		}
		var syn []ConfigSynonym
		for _, src := range []struct {
			m      map[string]string
			source int8
		}{{own, SourceDynamicBroker}, {cluster, SourceDynamicDefaultBroker}} {
			v, ok := src.m[dc.name]
			if !ok {
				continue
			}
			if err := dc.check(v); err != nil {
				// Validated when written; a record written by hand is
				// logged and skipped.
				b.log.Error(err, "ignoring a dynamic broker config that is not valid", "config", dc.name, "value", v)
				continue
			}
			syn = append(syn, ConfigSynonym{Name: dc.name, Value: v, Source: src.source})
		}
		if len(syn) > 0 {
			next[dc.name] = syn
		}
	}
	prev := b.dynTopicDefaults.Load()
	if prev != nil && maps.EqualFunc(*prev, next, slices.Equal) || prev == nil && len(next) == 0 {
		return false
	}
	b.dynTopicDefaults.Store(&next)
	b.log.Info("dynamic broker defaults of topic configs changed", "configs", next)
	return true
}

// throttledReplicaList validates Kafka's throttled-replicas list:
// "partition:broker" pairs separated by commas (blanks around them
// allowed), "*" for every replica, or "" for none.
func throttledReplicaList(v string) error {
	if strings.TrimSpace(v) == "*" {
		return nil
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, bk, ok := strings.Cut(item, ":")
		if !ok {
			return fmt.Errorf("%q is not partition:broker (the list is partition:broker pairs separated by commas, or *)", item)
		}
		for _, n := range []string{p, bk} {
			if x, err := strconv.ParseInt(n, 10, 32); err != nil || x < 0 || strings.ContainsAny(n, "+-") {
				return fmt.Errorf("%q is not partition:broker with non-negative integers", item)
			}
		}
	}
	return nil
}

// throttledOn reports whether a throttled-replicas list names partition on
// broker (or is "*").
func throttledOn(list string, partition, broker int32) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	want := strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
	return slices.ContainsFunc(strings.Split(list, ","), func(s string) bool { return strings.TrimSpace(s) == want })
}

// markThrottled sets a hosted partition's throttled-replica marks from
// its topic's configs.
func (b *Broker) markThrottled(configs map[string]string, p *Partition) {
	if p == nil || p.Replica == nil {
		return
	}
	p.Replica.SetThrottled(
		throttledOn(configs[ConfigLeaderThrottledReplicas], p.Index, b.cfg.NodeID),
		throttledOn(configs[ConfigFollowerThrottledReplicas], p.Index, b.cfg.NodeID))
}

// DynamicTopicDefaults returns, sorted, the broker configs that are the
// dynamic broker defaults of topic configs (log.retention.ms, ...): the
// operator applies these keys of spec.config with IncrementalAlterConfigs
// on the cluster-wide broker resource instead of the config file, so
// that changing one restarts no broker.
func DynamicTopicDefaults() []string {
	var out []string
	for _, dc := range dynamicBrokerConfigs {
		if dc.topic != "" {
			out = append(out, dc.name)
		}
	}
	slices.Sort(out)
	return out
}
