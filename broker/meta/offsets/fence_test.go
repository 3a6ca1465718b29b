package offsets

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

// TestDeposedCoordinatorIsFenced: a coordinator whose view of the live
// brokers is stale (it was cut off from etcd while the group moved to
// another broker) still takes itself for the group's coordinator and its
// in-memory generation for the current one. Its writes must not reach the
// store once the new coordinator claimed the group. Regression (chaos seed
// 43, zone-local producers): broker 2, isolated with its zone, kept
// generation 5 of chaos-group in memory; broker 1 took the group over and
// ran generation 6; after the isolation healed broker 2 acknowledged
// generation-5 commits and stored them over generation 6's, so the group's
// committed offsets went backwards.
func TestDeposedCoordinatorIsFenced(t *testing.T) {
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	// One Store per broker, as in a cluster: each holds its coordinator's
	// claims.
	stale := &placement{owner: 1, epoch: 1} // broker 1's view never changes
	view := &placement{owner: 1, epoch: 1}  // broker 2's view follows etcd
	a := stale.coordinator(t, New(ms), 1)
	b := view.coordinator(t, New(ms), 2)
	const g = "chaos-group"

	member, gen := joinAlone(t, a, g, "")
	if code := commitMember(a, g, member, gen, 100); code != 0 {
		t.Fatalf("commit at the coordinator: %v", kerr.ErrorForCode(code))
	}

	view.move(2) // broker 1 lost its etcd session; broker 2 coordinates g
	if off, _ := fetchOffset(t, b, g, false); off != 100 {
		t.Fatalf("new coordinator serves offset %d, want 100", off)
	}
	// The member finds broker 2 and goes through a rebalance there.
	member2, gen2 := joinAlone(t, b, g, member)
	if gen2 <= gen {
		t.Fatalf("generation at the new coordinator %d, want above %d", gen2, gen)
	}
	if code := commitMember(b, g, member2, gen2, 200); code != 0 {
		t.Fatalf("commit at the new coordinator: %v", kerr.ErrorForCode(code))
	}

	// Broker 1 still has generation gen in memory and a client of the
	// old generation still talking to it.
	if code := commitMember(a, g, member, gen, 150); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit of generation %d at the deposed coordinator: %v, want NOT_COORDINATOR", gen, kerr.ErrorForCode(code))
	}
	if off := storedOffset(t, ms, g); off != 200 {
		t.Fatalf("stored offset %d after the deposed coordinator's commit, want 200 (generation %d's)", off, gen2)
	}

	// The client retries at broker 1, which (still thinking it owns the
	// group) reads it again from the store: the old generation is gone.
	if code := commitMember(a, g, member, gen, 150); code != kerr.IllegalGeneration.Code && code != kerr.UnknownMemberID.Code {
		t.Fatalf("retried commit of generation %d: %v, want ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID", gen, kerr.ErrorForCode(code))
	}
	if off := storedOffset(t, ms, g); off != 200 {
		t.Fatalf("stored offset %d, want 200", off)
	}
}

// joinAlone has one member (re)join group g at c, where it is or becomes
// the only member, and sync: it returns the member id and generation.
func joinAlone(t *testing.T, c *group.Coordinator, g, memberID string) (string, int32) {
	t.Helper()
	ctx := context.Background()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.MemberID, j.ProtocolType = 3, g, memberID, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	jr, err := c.JoinGroup(ctx, group.Client{ID: "member"}, j)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation = 3, g, jr.MemberID, jr.Generation
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{1}}}
	sr, err := c.SyncGroup(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	return jr.MemberID, jr.Generation
}

// commitMember commits offset for partition t/0 as a member of generation
// gen and returns the partition's error code.
func commitMember(c *group.Coordinator, g, member string, gen int32, offset int64) int16 {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 8, g, member, gen
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, offset
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	return c.OffsetCommit(context.Background(), r).Topics[0].Partitions[0].ErrorCode
}

// storedOffset reads t/0's committed offset of group g from etcd.
func storedOffset(t *testing.T, ms *meta.Store, g string) int64 {
	t.Helper()
	all, err := New(ms).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, oc := range all[g] {
		if oc.Topic == "t" && oc.Partition == 0 {
			return oc.Offset
		}
	}
	return -1
}

// TestCoordinatorTakingGroupBackDropsStaleMembers: a broker that gets a
// group back after another broker coordinated it meanwhile must serve the
// generation the other one stored, not the one it still holds in memory.
// Regression: the reload on an ownership change kept the members in
// memory whenever there were any, so the broker that got the group back
// accepted commits of its old generation.
func TestCoordinatorTakingGroupBackDropsStaleMembers(t *testing.T) {
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	p := &placement{owner: 1, epoch: 1}
	a := p.coordinator(t, New(ms), 1)
	b := p.coordinator(t, New(ms), 2)
	const g = "g"

	member, gen := joinAlone(t, a, g, "")
	if code := commitMember(a, g, member, gen, 100); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	p.move(2)
	member2, gen2 := joinAlone(t, b, g, member)
	if code := commitMember(b, g, member2, gen2, 200); code != 0 {
		t.Fatalf("commit at the second coordinator: %v", kerr.ErrorForCode(code))
	}
	p.move(1) // the group comes back to a
	if code := commitMember(a, g, member, gen, 150); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit of generation %d after generation %d: %v, want ILLEGAL_GENERATION", gen, gen2, kerr.ErrorForCode(code))
	}
	if code := commitMember(a, g, member2, gen2, 300); code != 0 {
		t.Fatalf("commit of the current generation %d: %v", gen2, kerr.ErrorForCode(code))
	}
	if off := storedOffset(t, ms, g); off != 300 {
		t.Fatalf("stored offset %d, want 300", off)
	}
}
