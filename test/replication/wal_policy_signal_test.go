package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/traffic"
)

// TestWALPolicyInlineFollowersFetchAsClassic: with wal.policy=auto at a
// low rate every leader replicates inline by policy, and after the first
// answer of each connection (which tells them so) the followers' replica
// fetches carry no pointer tags: idle long-poll rounds are counted as
// inline replication, as a classic follower's, and no longer as WAL
// metadata (a pointer-asking fetch answered without records). Only the
// first exchange of a connection asks (its answer carries the signal).
// Its brokers run auto's default latency bound (wal.auto.max.latency.ms
// unset: cost.DefaultMaxLatency), so their longest cut is half of it.
func TestWALPolicyInlineFollowersFetchAsClassic(t *testing.T) {
	wc := startWALCluster(t, brokertest.WithSetting("wal.policy", "auto"))
	for _, b := range wc.Brokers {
		if got, want := b.Server().Broker().Replicas().WALPlan().Interval, cost.DefaultMaxLatency/cost.LatencyPerInterval; got != want {
			t.Fatalf("broker %s: auto's cut interval %v with wal.auto.max.latency.ms unset, want %v (the default bound)", b.Addr(), got, want)
		}
	}
	createTopic(t, kadm.NewClient(newClient(t, wc.Addrs())), "inline-signal", 3, nil)
	cl := newClient(t, wc.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("inline-signal"))
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("r", i))).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	for _, b := range wc.Brokers {
		if !b.Server().Broker().Replicas().PolicyInline() {
			t.Fatalf("broker %s is not inline by policy at this rate: the test needs it", b.Addr())
		}
	}
	// Every follower has had its first answers (one tells it).
	waitFor(t, "every replica holds the records", 30*time.Second, func() bool {
		for p := range int32(3) {
			want := int64(-1)
			for _, b := range wc.Brokers {
				leo := localLEO(t, b, "inline-signal", p)
				if want >= 0 && leo != want {
					return false
				}
				want = leo
			}
		}
		return true
	})
	metaBytes := func() float64 {
		return sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.In) + sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.Out)
	}
	// idleRounds waits for replica fetch rounds (each follower's long poll
	// times out after replica.fetch.wait.max.ms and fetches again).
	idleRounds := func() {
		replication := func() float64 {
			return sumTraffic(wc.Cluster, traffic.ReplicationInline, traffic.In) + sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.In)
		}
		from := replication()
		waitFor(t, "idle replica fetch rounds", 60*time.Second, func() bool { return replication()-from >= 2000 })
	}
	idleRounds() // the first answer of each connection may be metadata
	meta0 := metaBytes()
	idleRounds()
	meta := metaBytes()
	if meta != meta0 {
		t.Fatalf("WAL metadata bytes grew by %v over idle rounds of leaders inline by policy: followers still ask for pointers", meta-meta0)
	}
}

// TestWALPolicySwitchFollowersAskAgain: followers told that their leader
// is inline by policy fetch without pointer tags; when the leader turns
// to WAL objects (auto, with a cross-zone price that makes objects
// cheaper at a few KB/s), its answers say so and the followers ask for
// pointers again: they download the objects. Without the signal they
// would fetch inline for ever. Its brokers set wal.auto.max.latency.ms=0,
// no latency bound, so their longest cut is wal.upload.max.interval.ms.
func TestWALPolicySwitchFollowersAskAgain(t *testing.T) {
	wc := startWALCluster(t, brokertest.WithSetting("wal.policy", "auto"), brokertest.WithSetting("wal.auto.max.latency.ms", "0"),
		brokertest.WithSetting("cost.price.cross.zone.out.per.gb", "1"), brokertest.WithSetting("cost.price.cross.zone.in.per.gb", "1"))
	for _, b := range wc.Brokers {
		if got := b.Server().Broker().Replicas().WALPlan().Interval; got != server.DefaultMaxUploadInterval {
			t.Fatalf("broker %s: auto's cut interval %v with wal.auto.max.latency.ms=0, want wal.upload.max.interval.ms's %v (no latency bound)", b.Addr(), got, server.DefaultMaxUploadInterval)
		}
	}
	createTopic(t, kadm.NewClient(newClient(t, wc.Addrs())), "switch-signal", 1, nil)
	cl := newClient(t, wc.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("switch-signal"))
	produce := func(ctx context.Context, v string) error {
		return cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if err := produce(ctx, fmt.Sprint("r", i)); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	metaBytes := func() float64 {
		return sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.In) + sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.Out)
	}
	idleRounds := func() {
		replication := func() float64 {
			return sumTraffic(wc.Cluster, traffic.ReplicationInline, traffic.In) + sumTraffic(wc.Cluster, traffic.ReplicationWALMetadata, traffic.In)
		}
		from := replication()
		waitFor(t, "idle replica fetch rounds", 60*time.Second, func() bool { return replication()-from >= 1000 })
	}
	idleRounds()
	meta0 := metaBytes()
	idleRounds()
	if meta := metaBytes(); meta != meta0 {
		t.Fatalf("WAL metadata bytes grew by %v over idle rounds: the followers were not told that their leader is inline", meta-meta0)
	}
	for _, b := range wc.Brokers {
		if !b.Server().Broker().Replicas().PolicyInline() {
			t.Fatalf("broker %s left inline at a few bytes per second: the test needs it inline first", b.Addr())
		}
	}
	gets := func() float64 {
		n := 0.0
		for _, b := range wc.Brokers {
			n += counter(t, b, "strata_wal_download_gets_total")
		}
		return n
	}
	if n := gets(); n != 0 {
		t.Fatalf("%v WAL GETs while every leader was inline", n)
	}

	// A steady 1 KiB load: the leader's auto turns to objects.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan error, 1)
	go func() {
		value := string(make([]byte, 1024))
		for loadCtx.Err() == nil {
			pctx, cancel := context.WithTimeout(loadCtx, 30*time.Second)
			err := produce(pctx, value)
			cancel()
			if err != nil && loadCtx.Err() == nil {
				loadDone <- err
				return
			}
		}
		loadDone <- nil
	}()
	defer func() {
		stopLoad()
		if err := <-loadDone; err != nil {
			t.Errorf("load: %v", err)
		}
	}()
	waitFor(t, "the leader turns to WAL objects", 90*time.Second, func() bool {
		for _, b := range wc.Brokers {
			if !b.Server().Broker().Replicas().PolicyInline() {
				return true
			}
		}
		return false
	})
	waitFor(t, "followers download WAL objects", 30*time.Second, func() bool { return gets() > 0 })
}
