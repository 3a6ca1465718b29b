package meta

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// A controller that lost its role without noticing (paused while its lease
// expired and another broker was elected) cannot write: its transactions
// carry its election key's revision.
func TestDeposedControllerIsFenced(t *testing.T) {
	c := newTestCluster(t)
	var regs []*Registration
	for id := int32(1); id <= 2; id++ {
		reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: id, Zone: "a"}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close(c.ctx)
		regs = append(regs, reg)
	}
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2})
	term := func(reg *Registration) *leadership {
		e := concurrency.NewElection(reg.session, c.store.keys.controller())
		if err := e.Campaign(c.ctx, "x"); err != nil {
			t.Fatal(err)
		}
		return newLeadership(e.Key(), e.Rev())
	}
	old := term(regs[0])
	tp := TopicPartition{"t", 0}
	st, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, rev, _ := st.partition(tp)
	next := cur.Clone()
	next.ISR = []int32{cur.Leader}
	next.PartitionEpoch++

	// The old controller's lease goes; broker 2 is elected.
	if _, err := c.client.Revoke(c.ctx, regs[0].Lease()); err != nil {
		t.Fatal(err)
	}
	successor := term(regs[1])

	ok, err := c.store.casPartition(c.ctx, old, tp, rev, next, "deposed")
	if ok || !errors.Is(err, ErrNotController) {
		t.Fatalf("deposed controller's write: ok=%v err=%v, want ErrNotController", ok, err)
	}
	if now, _ := c.store.PartitionState(c.ctx, tp); !now.Equal(cur) {
		t.Fatalf("partition changed by a deposed controller: %+v", now)
	}
	// The successor's write with a stale revision loses the CAS, not the fence.
	if ok, err := c.store.casPartition(c.ctx, successor, tp, rev-1, next, "stale"); ok || err != nil {
		t.Fatalf("stale CAS: ok=%v err=%v, want false, nil", ok, err)
	}
	if ok, err := c.store.casPartition(c.ctx, successor, tp, rev, next, "successor"); !ok || err != nil {
		t.Fatalf("successor's write: ok=%v err=%v", ok, err)
	}
}

// A controller whose election key disappears while its session lives (an
// operator deleted it) notices from the watch, steps down and campaigns
// again.
func TestControllerStepsDownWhenElectionKeyVanishes(t *testing.T) {
	c := newTestCluster(t)
	b := c.start(1, "a")
	c.waitFor("broker 1 controller", func(st *ClusterState) bool { return st.ControllerID == 1 })
	eventually(t, "IsController", b.ctrl.IsController)
	st, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	del, err := c.client.Delete(c.ctx, st.controllerKey)
	if err != nil || del.Deleted != 1 {
		t.Fatalf("delete election key: %v (%d deleted)", err, del.Deleted)
	}
	c.waitFor("no controller", func(st *ClusterState) bool { return st.Revision >= del.Header.Revision && st.ControllerID < 0 })
	c.waitFor("broker 1 controller again", func(st *ClusterState) bool {
		return st.Revision > del.Header.Revision && st.ControllerID == 1
	})
	eventually(t, "IsController again", b.ctrl.IsController)
	// And it acts: a broker loss is handled.
	c.start(2, "b")
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2})
	c.kill(2)
	c.waitFor("broker 2 out of the ISR", func(st *ClusterState) bool {
		p, ok := st.Partition(TopicPartition{"t", 0})
		return ok && !st.Live(2) && len(p.ISR) == 1 && p.ISR[0] == 1
	})
}

// eventually polls cond until it holds or 30s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A batch with one partition that changed meanwhile still applies the
// others; a deposed controller's batch applies nothing.
func TestWritePartitionStatesBatchFallback(t *testing.T) {
	c := newTestCluster(t)
	reg, err := c.store.RegisterBroker(c.ctx, BrokerInfo{ID: 1, Zone: "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(c.ctx)
	c.createTopic(TopicSpec{Name: "t", Partitions: 4, ReplicationFactor: 1})
	e := concurrency.NewElection(reg.session, c.store.keys.controller())
	if err := e.Campaign(c.ctx, "1"); err != nil {
		t.Fatal(err)
	}
	term := newLeadership(e.Key(), e.Rev())
	st, err := c.store.Snapshot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var writes []partitionWrite
	for tp, cur := range st.Partitions() {
		_, rev, _ := st.partition(tp)
		next := cur.Clone()
		next.PartitionEpoch += 10
		writes = append(writes, partitionWrite{tp: tp, rev: rev, cur: cur, next: next})
	}
	writes[2].rev-- // this one "changed meanwhile"
	applied, err := c.store.writePartitionStates(c.ctx, term, writes)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 || applied[writes[2].tp] {
		t.Errorf("applied %v, want all but %s", applied, writes[2].tp)
	}
	after, _ := c.store.Snapshot(c.ctx)
	for i, w := range writes {
		got, _ := after.Partition(w.tp)
		if applied := got.PartitionEpoch == w.next.PartitionEpoch; applied != (i != 2) {
			t.Errorf("%s: applied=%v, want %v", w.tp, applied, i != 2)
		}
	}
	// Deposed: the election key is gone.
	if err := e.Resign(c.ctx); err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		_, writes[i].rev, _ = after.partition(writes[i].tp)
		writes[i].next.PartitionEpoch += 10
	}
	if _, err := c.store.writePartitionStates(c.ctx, term, writes); !errors.Is(err, ErrNotController) {
		t.Fatalf("deposed batch: %v, want ErrNotController", err)
	}
	final, _ := c.store.Snapshot(c.ctx)
	if final.Version != after.Version {
		t.Errorf("deposed batch wrote: version %d -> %d", after.Version, final.Version)
	}
}
