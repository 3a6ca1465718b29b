package offsets

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

// followModel applies what Follow reports.
type followModel struct {
	mu      sync.Mutex
	offsets map[string]map[group.TopicPartition]int64
	groups  map[string]int32 // generation
	snaps   int
}

func (m *followModel) snapshot(s group.StoreSnapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps++
	m.offsets, m.groups = map[string]map[group.TopicPartition]int64{}, map[string]int32{}
	for g, cs := range s.Offsets {
		for _, c := range cs {
			m.set(g, group.TopicPartition{Topic: c.Topic, Partition: c.Partition}, c.Offset)
		}
	}
	for g, md := range s.Groups {
		m.groups[g] = md.Generation
	}
}

func (m *followModel) set(g string, tp group.TopicPartition, o int64) {
	if m.offsets[g] == nil {
		m.offsets[g] = map[group.TopicPartition]int64{}
	}
	m.offsets[g][tp] = o
}

func (m *followModel) changes(cs []group.StoreChange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		switch {
		case c.Offset != nil:
			m.set(c.Group, group.TopicPartition{Topic: c.Offset.Topic, Partition: c.Offset.Partition}, c.Offset.Offset)
		case c.OffsetDeleted != nil:
			delete(m.offsets[c.Group], *c.OffsetDeleted)
			if len(m.offsets[c.Group]) == 0 {
				delete(m.offsets, c.Group)
			}
		case c.Membership != nil:
			m.groups[c.Group] = c.Membership.Generation
		case c.MembershipDeleted:
			delete(m.groups, c.Group)
		}
	}
}

func (m *followModel) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprint(m.offsets, m.groups)
}

// TestFollow: a follower that applies Follow's snapshot and changes ends
// with what Load and LoadGroups read, through commits, overwrites,
// deleted offsets, membership and group deletion, and sees nothing of
// another cluster under the same etcd.
func TestFollow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	s.pageSize = 3
	other, err := meta.New(client, "c2")
	if err != nil {
		t.Fatal(err)
	}
	neighbour := New(other)
	c := func(topic string, p int32, o int64) group.OffsetCommit {
		return group.OffsetCommit{Topic: topic, Partition: p, Offset: o, LeaderEpoch: -1, CommitTimeMillis: 1}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Before following: in the snapshot.
	must(s.Commit(ctx, "g1", []group.OffsetCommit{c("a", 0, 1), c("a", 1, 2), c("b", 0, 3), c("b", 1, 4)}))
	must(s.SaveGroup(ctx, "g1", member(1, "m-1")))

	m := &followModel{}
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, m.snapshot, m.changes) }()
	must(s.Commit(ctx, "g1", []group.OffsetCommit{c("a", 0, 10)}))
	must(s.Commit(ctx, "team/app 1", []group.OffsetCommit{c("a", 0, 5)}))
	must(neighbour.Commit(ctx, "g1", []group.OffsetCommit{c("a", 0, 99)}))
	must(s.DeleteOffsets(ctx, "g1", []group.TopicPartition{{Topic: "b", Partition: 1}}))
	must(s.SaveGroup(ctx, "g1", member(2, "m-2")))
	must(s.SaveGroup(ctx, "g2", member(7, "m-7")))
	must(s.Commit(ctx, "g2", []group.OffsetCommit{c("a", 0, 1)}))
	must(s.DeleteGroup(ctx, "g2"))

	offsets, err := s.Load(ctx)
	must(err)
	groups, err := s.LoadGroups(ctx)
	must(err)
	want := &followModel{}
	want.snapshot(group.StoreSnapshot{Offsets: offsets, Groups: groups})
	deadline := time.Now().Add(10 * time.Second)
	for m.summary() != want.summary() {
		if time.Now().After(deadline) {
			t.Fatalf("follower has %s, store %s", m.summary(), want.summary())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !reflect.DeepEqual(m.offsets["g1"], map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 10, {Topic: "a", Partition: 1}: 2, {Topic: "b", Partition: 0}: 3}) {
		t.Fatalf("g1: %v", m.offsets["g1"])
	}
	if m.snaps != 1 {
		t.Fatalf("%d snapshots, want 1", m.snaps)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Follow after cancel: %v", err)
	}
}
