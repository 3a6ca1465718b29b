package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta"
)

// sideMetric reads a metric's value for label side=side from a broker's
// registry (0 when absent).
func sideMetric(t *testing.T, b *brokertest.Broker, name, side string) float64 {
	t.Helper()
	mfs, err := b.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "side" && l.GetValue() == side {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// brokerConfig returns one config of a broker resource as DescribeConfigs
// reports it.
func brokerConfig(t *testing.T, adm *kadm.Client, name string, broker ...int32) kadm.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeBrokerConfigs(ctx, broker...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("describe broker %q: %v", rc.Name, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c
			}
		}
	}
	t.Fatalf("broker config %s not described", name)
	return kadm.Config{}
}

// alterErr is the first error of an alter configs answer.
func alterErr(res kadm.AlterConfigsResponses) error {
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("%q: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// mustAlter(t)(adm.AlterXConfigs(...)) fails t unless the call and every
// resource of its answer succeeded.
func mustAlter(t *testing.T) func(kadm.AlterConfigsResponses, error) {
	return func(res kadm.AlterConfigsResponses, err error) {
		t.Helper()
		if err == nil {
			err = alterErr(res)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// throttleAllReplicas marks every replica of topic throttled on both sides.
func throttleAllReplicas(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	all := "*"
	mustAlter(t)(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: &all},
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: &all},
	}, topic))
}

// TestDynamicBrokerConfigs: the replication throttle rates are dynamic
// broker configs, set cluster-wide (resource "") or per broker, stored in
// etcd and described with their source on every broker; static, unknown
// and malformed configs are refused with INVALID_CONFIG, as are malformed
// throttled-replica lists on topics.
func TestDynamicBrokerConfigs(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set := func(name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
	}
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("leader.replication.throttled.rate", "3000000")}))
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("follower.replication.throttled.rate", "4000000")}, 2))

	for id := int32(1); id <= 3; id++ {
		waitFor(t, fmt.Sprintf("broker %d to apply the rates", id), 10*time.Second, func() bool {
			b := brokerByID(c, id)
			// Broker 2 also applies its own follower rate (a later revision).
			return sideMetric(t, b, "strata_replication_throttle_rate_bytes", "leader") == 3000000 &&
				(id != 2 || sideMetric(t, b, "strata_replication_throttle_rate_bytes", "follower") == 4000000)
		})
		cfg := brokerConfig(t, adm, "leader.replication.throttled.rate", id)
		if cfg.MaybeValue() != "3000000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || cfg.Sensitive {
			t.Fatalf("broker %d leader.replication.throttled.rate = %q from %v, want 3000000 from the cluster-wide default", id, cfg.MaybeValue(), cfg.Source)
		}
		cfg = brokerConfig(t, adm, "follower.replication.throttled.rate", id)
		want, src := strconv.FormatInt(1<<63-1, 10), kmsg.ConfigSourceDefaultConfig
		if id == 2 {
			want, src = "4000000", kmsg.ConfigSourceDynamicBrokerConfig
		}
		if cfg.MaybeValue() != want || cfg.Source != src {
			t.Fatalf("broker %d follower.replication.throttled.rate = %q from %v, want %s from %v", id, cfg.MaybeValue(), cfg.Source, want, src)
		}
	}
	if got := sideMetric(t, brokerByID(c, 2), "strata_replication_throttle_rate_bytes", "follower"); got != 4000000 {
		t.Fatalf("broker 2 follower rate gauge = %v, want 4000000", got)
	}
	if got := sideMetric(t, brokerByID(c, 1), "strata_replication_throttle_rate_bytes", "follower"); got != -1 {
		t.Fatalf("broker 1 follower rate gauge = %v, want -1 (unthrottled)", got)
	}
	if cfg := brokerConfig(t, adm, "leader.replication.throttled.rate"); cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster-wide view: source %v", cfg.Source)
	}

	for _, tc := range []struct {
		name, value, msg string
	}{
		{"num.partitions", "3", "cannot be updated dynamically"},
		{"no.such.config", "1", "unknown dynamic broker config"},
		{"leader.replication.throttled.rate", "-5", "below the minimum"},
		{"follower.replication.throttled.rate", "fast", "not a long"},
	} {
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set(tc.name, tc.value)})
		if err == nil {
			err = alterErr(res)
		}
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(res[0].ErrMessage, tc.msg) {
			t.Errorf("setting %s=%s: %v (%q), want INVALID_CONFIG saying %q", tc.name, tc.value, err, res[0].ErrMessage, tc.msg)
		}
	}
	// Nothing of the refused requests was stored.
	if cfg := brokerConfig(t, adm, "leader.replication.throttled.rate", 1); cfg.MaybeValue() != "3000000" {
		t.Fatalf("after refused alters: %q", cfg.MaybeValue())
	}

	createTopic(t, adm, "lists", 2, nil)
	// CreateTopics answers once the topic is in etcd; the broker that takes
	// the next alter may not have applied it yet (UNKNOWN_TOPIC_OR_PARTITION).
	waitFor(t, "topic lists in every broker's applied metadata", 30*time.Second, func() bool {
		for _, b := range c.Brokers {
			srv := b.Server()
			if srv == nil {
				return false
			}
			st := srv.Broker().ClusterState()
			if st == nil {
				return false
			}
			if _, ok := st.Partition(meta.TopicPartition{Topic: "lists", Partition: 1}); !ok {
				return false
			}
		}
		return true
	})
	for _, v := range []string{"0:1,1:2", "*", " 0:1 , 1:3", ""} {
		mustAlter(t)(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("leader.replication.throttled.replicas", v)}, "lists"))
	}
	for _, v := range []string{"0-1", "0:x", "*,0:1", "0:-1"} {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("follower.replication.throttled.replicas", v)}, "lists")
		if err == nil {
			err = alterErr(res)
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("follower.replication.throttled.replicas=%q: %v, want INVALID_CONFIG", v, err)
		}
	}

	// DELETE of a config that is not set is a no-op, whatever its name
	// (kafka-reassign-partitions.sh --verify deletes
	// replica.alter.log.dirs.io.max.bytes.per.second with the rates).
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "replica.alter.log.dirs.io.max.bytes.per.second"}}, 1))
	// DELETE returns to the defaults everywhere.
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "leader.replication.throttled.rate"}}))
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.rate"}}, 2))
	for id := int32(1); id <= 3; id++ {
		waitFor(t, fmt.Sprintf("broker %d to drop the rates", id), 10*time.Second, func() bool {
			b := brokerByID(c, id)
			return sideMetric(t, b, "strata_replication_throttle_rate_bytes", "leader") == -1 &&
				sideMetric(t, b, "strata_replication_throttle_rate_bytes", "follower") == -1
		})
	}
}

// TestThrottledReassignmentCatchUp: a replica added by a reassignment
// catches up a 12 MiB backlog with one quota at 2 MiB/s (the leader's or
// the new follower's) and every replica of the topic marked throttled
// ("*"). Its catch-up bytes all go through that quota, within the
// limiter's bound (burst + rate·elapsed + one response: an upper bound,
// so a slow machine cannot fail it); the in-ISR follower, marked
// throttled too, is never throttled and keeps acknowledging acks=all
// writes during the catch-up.
func TestThrottledReassignmentCatchUp(t *testing.T) {
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) { throttledCatchUp(t, side) })
	}
}

func throttledCatchUp(t *testing.T, side string) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rate = 2 << 20
	if resp, err := adm.CreateTopic(ctx, 1, 2, nil, "moving"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(1<<20))
	const backlog = 12 << 20
	value := make([]byte, 64<<10)
	for range backlog / len(value) {
		_, _ = rand.Read(value) // incompressible
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "moving", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	st := state(t, c, "moving", 0)
	leaderID, inSync := st.Leader, st.Replicas[0]
	if inSync == leaderID {
		inSync = st.Replicas[1]
	}
	var spare int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(st.Replicas, id) {
			spare = id
		}
	}
	waitFor(t, "both replicas in the ISR", 30*time.Second, func() bool { return len(state(t, c, "moving", 0).ISR) == 2 })

	start := time.Now()
	s := func(v string) *string { return &v }
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: side + ".replication.throttled.rate", Value: s(strconv.Itoa(rate))},
	}))
	throttleAllReplicas(ctx, t, adm, "moving")
	for id := int32(1); id <= 3; id++ {
		waitFor(t, "every broker to apply the rate", 10*time.Second, func() bool {
			return sideMetric(t, brokerByID(c, id), "strata_replication_throttle_rate_bytes", side) == rate
		})
	}

	target := append(slices.Clone(st.Replicas), spare)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, target)
	waitFor(t, "the controller to accept the reassignment", 30*time.Second, func() bool {
		res, err := adm.AlterPartitionAssignments(ctx, req)
		return err == nil && res.Error() == nil
	})
	// acks=all writes keep completing through the in-sync follower while
	// the new replica catches up (it is not in the ISR, so it does not
	// hold the HWM back).
	inSyncLEO := localLEO(t, brokerByID(c, inSync), "moving", 0)
	for i := range 20 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "moving", Value: fmt.Appendf(nil, "during-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce during the throttled catch-up: %v", err)
		}
	}
	if got := localLEO(t, brokerByID(c, inSync), "moving", 0); got < inSyncLEO+20 {
		t.Fatalf("in-sync follower's log end %d, want at least %d after 20 acks=all writes", got, inSyncLEO+20)
	}
	waitFor(t, "the new replica to catch up and the reassignment to complete", 90*time.Second, func() bool {
		s := state(t, c, "moving", 0)
		return !s.Reassigning() && slices.Contains(s.ISR, spare)
	})
	elapsed := time.Since(start).Seconds()

	counted := brokerByID(c, spare)
	if side == "leader" {
		counted = brokerByID(c, leaderID)
	}
	bytes := sideMetric(t, counted, "strata_replication_throttled_bytes_total", side)
	// Every catch-up byte was accounted.
	if bytes < backlog {
		t.Fatalf("%s throttled bytes %.0f; want at least the %d-byte backlog", side, bytes, backlog)
	}
	// The limiter's bound: burst (1 s at the rate, at least 1 MiB) +
	// rate·elapsed + one response of the partition (at most
	// replica.fetch.max.bytes, 1 MiB, or one batch, smaller here).
	if bound := float64(max(rate, 1<<20)) + rate*elapsed + float64(1<<20); bytes > bound {
		t.Fatalf("in %.1fs at %d B/s: %s quota admitted %.0f bytes; it allows at most %.0f", elapsed, rate, side, bytes, bound)
	}
	// The in-sync follower, marked throttled too, never was; nor did the
	// leader throttle it.
	ib := brokerByID(c, inSync)
	if b, h := sideMetric(t, ib, "strata_replication_throttled_bytes_total", "follower"), sideMetric(t, ib, "strata_replication_throttled_partitions_total", "follower"); b != 0 || h != 0 {
		t.Fatalf("in-sync follower %d: %.0f throttled bytes, %.0f held back; want none", inSync, b, h)
	}
	if side == "leader" && bytes > float64(backlog)+float64(1<<20) {
		t.Fatalf("leader counted %.0f bytes: more than the new replica's backlog, so in-sync replication was counted", bytes)
	}
	t.Logf("caught up %d bytes in %.1fs with the %s quota at %d B/s; held back %.0f times", backlog, elapsed, side, rate,
		sideMetric(t, counted, "strata_replication_throttled_partitions_total", side))
}
