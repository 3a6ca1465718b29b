package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
)

// TestWALPolicyAutoSwitch drives a leader of RF 3 in three zones with
// wal.policy=auto on a manual clock: at 10 KB/s even a 100 ms object
// costs more than sending its bytes to the two other zones, so after the
// warmup (5 s of traffic) the broker replicates inline — by policy, not degraded — and at
// 500 KB/s it returns to WAL objects. Every switch is counted with its
// reason, and the cost meter counts the bytes and their two cross-zone
// copies.
func TestWALPolicyAutoSwitch(t *testing.T) {
	clk := &walTestClock{t: time.Unix(1_750_000_000, 0)}
	meter := cost.NewMeter(cost.Default())
	m := NewManager(Config{NodeID: 1, Log: logr.Discard(), Now: clk.Now, Cost: meter})
	defer m.Close()
	if err := m.EnableWAL(WALConfig{Store: objstore.NewMem("wal-a"), Cluster: "c", Zone: "a", Incarnation: 1,
		UploadInterval: 10 * time.Millisecond, MaxUploadInterval: 100 * time.Millisecond, Policy: cost.PolicyAuto, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	m.SetBrokers(map[int32]meta.BrokerInfo{1: {ID: 1, Zone: "a"}, 2: {ID: 2, Zone: "b"}, 3: {ID: 3, Zone: "c"}})
	leader := NewPartition(tp, openLog(t), 1, clk.Now)
	m.Apply(leader, meta.BecomeLeader, meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}, PartitionEpoch: 1})

	var produced int64
	// run appends rate bytes (in 10 KB records) per simulated second.
	run := func(secs int, rate int) {
		t.Helper()
		val := strings.Repeat("x", 10_000)
		for range secs {
			vals := make([]string, rate/10_000)
			for i := range vals {
				vals[i] = val
			}
			b := batch(t, vals...)
			if _, _, err := leader.AppendAsLeader(b); err != nil {
				t.Fatal(err)
			}
			for _, x := range b {
				produced += int64(len(x))
			}
			clk.add(time.Second)
			m.costTick()
		}
	}
	switches := func(to cost.Path, reason string) float64 {
		return testutil.ToFloat64(m.wal.policy.switches.WithLabelValues(string(to), reason))
	}

	run(5, 10_000)
	if m.PolicyInline() {
		t.Fatal("switched to inline within the warmup (5 s)")
	}
	run(2, 10_000)
	if !m.PolicyInline() {
		t.Fatalf("10 KB/s for 7 s: still WAL objects, plan %+v", m.WALPlan())
	}
	if got := switches(cost.PathInline, cost.ReasonBelowBreakEven); got != 1 {
		t.Fatalf("switches to inline (below_break_even) = %v, want 1", got)
	}
	// Inline by policy is not a degradation, and fetches say why.
	if m.WALDegraded() {
		t.Fatal("inline by policy reported as WAL degraded")
	}
	if plan := m.PlanWALFetch(leader, 0, 1<<20); plan.Reason != InlinePolicy || len(plan.Pointers) > 0 || plan.InlineUpTo != leader.Log.EndOffset() {
		t.Fatalf("replica fetch plan while inline by policy: %+v, want inline to %d with reason %q", plan, leader.Log.EndOffset(), InlinePolicy)
	}
	if st := m.wal.up.Stats(); st.BufferedBytes != 0 || st.PendingBytes != 0 {
		// Nothing of the inline period goes to the bucket.
		end := leader.Log.EndOffset()
		run(1, 10_000)
		if st2 := m.wal.up.Stats(); st2.PendingBytes > st.PendingBytes {
			t.Fatalf("appends after the switch (from %d) still go to the uploader: %+v", end, st2)
		}
	}

	run(40, 500_000)
	if m.PolicyInline() {
		t.Fatalf("500 KB/s for 40 s: still inline, plan %+v", m.WALPlan())
	}
	if got := switches(cost.PathWAL, cost.ReasonAboveBreakEven); got != 1 {
		t.Fatalf("switches to wal (above_break_even) = %v, want 1", got)
	}
	if p := m.WALPlan(); p.Interval != 100*time.Millisecond {
		t.Fatalf("interval at 500 KB/s: %v, want the max (100 ms: a 50 KB object, 60 %% of classic)", p.Interval)
	}
	if st := m.wal.up.Stats(); st.PendingBytes == 0 && st.Objects == 0 && st.BufferedBytes == 0 {
		t.Fatalf("back on WAL but nothing reached the uploader: %+v", st)
	}

	// The meter: every leader byte, two cross-zone copies of each.
	if got := testutil.ToFloat64(meter.Collectors()[0]); got != float64(produced) {
		t.Fatalf("strata_replication_produced_bytes_total = %v, want %d", got, produced)
	}
	if got := testutil.ToFloat64(meter.Collectors()[1]); got != float64(2*produced) {
		t.Fatalf("strata_replication_classic_bytes_total = %v, want %d", got, 2*produced)
	}
}

// TestWALPolicyAutoGrowsObjects (issue #15 at 10 MB/s): at 10 MB/s of
// leader appends, auto's plan cuts objects at the 8 %-of-classic size
// (371,875 bytes), above wal.object.max.bytes (256 KiB), and the uploader
// follows it: 300 KB of appends stay in one pending object. Before, the
// size cut stayed at 256 KiB whatever the rate (11 % of classic).
func TestWALPolicyAutoGrowsObjects(t *testing.T) {
	clk := &walTestClock{t: time.Unix(1_750_000_000, 0)}
	m := NewManager(Config{NodeID: 1, Log: logr.Discard(), Now: clk.Now})
	defer m.Close()
	if err := m.EnableWAL(WALConfig{Store: objstore.NewMem("wal-a"), Cluster: "c", Zone: "a", Incarnation: 1,
		UploadInterval: 10 * time.Millisecond, MaxUploadInterval: 100 * time.Millisecond, MaxObjectBytes: 256 << 10,
		Policy: cost.PolicyAuto, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	m.SetBrokers(map[int32]meta.BrokerInfo{1: {ID: 1, Zone: "a"}, 2: {ID: 2, Zone: "b"}, 3: {ID: 3, Zone: "c"}})
	leader := NewPartition(tp, openLog(t), 1, clk.Now)
	m.Apply(leader, meta.BecomeLeader, meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}, PartitionEpoch: 1})
	for range 3 {
		leader.leaderBytes.Add(10_000_000) // what the cost loop counts
		clk.add(time.Second)
		m.costTick()
	}
	if p := m.WALPlan(); p.Path != cost.PathWAL || p.CutBytes != 371875 || p.Interval != 37*time.Millisecond {
		t.Fatalf("plan at 10 MB/s: %+v, want WAL objects cut at 371875 bytes or 37 ms", p)
	}
	val := strings.Repeat("x", 10_000)
	for range 30 {
		if _, _, err := leader.AppendAsLeader(batch(t, val)); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.wal.up.Stats(); st.PendingBytes < 300_000 || st.Objects != 0 || st.InFlight != 0 {
		t.Fatalf("uploader after 300 KB of appends: %+v, want them all pending in one object (no cut below 371875 bytes)", st)
	}
}
