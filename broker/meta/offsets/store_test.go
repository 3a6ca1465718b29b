package offsets

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The etcd store must behave exactly like group.MemoryStore, the reference
// model, through a sequence that covers every operation, escaping, chunked
// transactions and paged loads.
func TestStoreMatchesMemoryStore(t *testing.T) {
	ctx := context.Background()
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	s.pageSize = 7 // force paging
	other, err := meta.New(client, "c2")
	if err != nil {
		t.Fatal(err)
	}
	neighbour := New(other)
	ref := group.NewMemoryStore()

	commit := func(o int64, topic string, p int32) group.OffsetCommit {
		c := group.OffsetCommit{Topic: topic, Partition: p, Offset: o, LeaderEpoch: int32(o % 5), Metadata: fmt.Sprintf("m%d", o), CommitTimeMillis: 1000 + o}
		if o%2 == 1 {
			// The topic's ID when the coordinator knew it (kept, as
			// the memory store keeps it).
			c.TopicID = [16]byte{byte(o), byte(o >> 8), 0xab}
		}
		return c
	}
	var many []group.OffsetCommit
	for p := range int32(300) { // more than one transaction's worth
		many = append(many, commit(int64(p), "big", p))
	}
	steps := []struct {
		name string
		do   func(st group.OffsetStore) error
	}{
		{"commit", func(st group.OffsetStore) error {
			return st.Commit(ctx, "g1", []group.OffsetCommit{commit(5, "a", 0), commit(7, "a", 1), commit(9, "b", 0)})
		}},
		{"overwrite, duplicate in one call", func(st group.OffsetStore) error {
			return st.Commit(ctx, "g1", []group.OffsetCommit{commit(6, "a", 0), commit(8, "a", 0)})
		}},
		{"group with slash and spaces", func(st group.OffsetStore) error {
			return st.Commit(ctx, "team/app 1", []group.OffsetCommit{commit(1, "a", 0)})
		}},
		{"group that is a prefix of another", func(st group.OffsetStore) error {
			return st.Commit(ctx, "g", []group.OffsetCommit{commit(3, "a", 0)})
		}},
		{"many partitions", func(st group.OffsetStore) error { return st.Commit(ctx, "g2", many) }},
		{"save membership", func(st group.OffsetStore) error {
			ms := st.(group.MembershipStore)
			if err := ms.SaveGroup(ctx, "g1", member(3, "m-1")); err != nil {
				return err
			}
			if err := ms.SaveGroup(ctx, "team/app 1", member(1, "m-9")); err != nil {
				return err
			}
			return ms.SaveGroup(ctx, "g", member(2, "m-2"))
		}},
		{"replace membership", func(st group.OffsetStore) error {
			return st.(group.MembershipStore).SaveGroup(ctx, "g1", member(4, "m-3"))
		}},
		{"membership of a group without offsets", func(st group.OffsetStore) error {
			return st.(group.MembershipStore).SaveGroup(ctx, "only-members", group.GroupMetadata{Generation: 1})
		}},
		{"delete offsets", func(st group.OffsetStore) error {
			return st.DeleteOffsets(ctx, "g1", []group.TopicPartition{{Topic: "a", Partition: 1}, {Topic: "a", Partition: 1}, {Topic: "zz", Partition: 0}})
		}},
		{"delete group g (not g1, g2)", func(st group.OffsetStore) error { return st.DeleteGroup(ctx, "g") }},
		{"delete unknown group", func(st group.OffsetStore) error { return st.DeleteGroup(ctx, "nope") }},
	}
	if err := neighbour.Commit(ctx, "g1", []group.OffsetCommit{commit(99, "a", 0)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		if err := step.do(ref); err != nil {
			t.Fatalf("%s (reference): %v", step.name, err)
		}
		if err := step.do(s); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want, _ := ref.Load(ctx)
		got, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("%s: load: %v", step.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s:\n got %v\nwant %v", step.name, summary(got), summary(want))
		}
		wantGroups, _ := ref.LoadGroups(ctx)
		gotGroups, err := s.LoadGroups(ctx)
		if err != nil {
			t.Fatalf("%s: load groups: %v", step.name, err)
		}
		if !reflect.DeepEqual(gotGroups, wantGroups) {
			t.Fatalf("after %s: membership\n got %+v\nwant %+v", step.name, gotGroups, wantGroups)
		}
	}
	groups, err := s.LoadGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups["g"]; ok || len(groups) != 3 || groups["g1"].Generation != 4 || groups["team/app 1"].Members[0].ID != "m-9" {
		t.Errorf("membership after the sequence: %+v; want g deleted with its offsets, g1 at generation 4", groups)
	}
	// The other cluster's offsets are untouched.
	n, err := neighbour.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(n) != 1 || len(n["g1"]) != 1 || n["g1"][0].Offset != 99 {
		t.Errorf("neighbour cluster offsets: %v", n)
	}
	// A bad topic name is refused without writing.
	if err := s.Commit(ctx, "g3", []group.OffsetCommit{commit(1, "a/b", 0)}); err == nil {
		t.Error("topic with '/' accepted")
	}
}

func summary(m map[string][]group.OffsetCommit) string {
	out := ""
	for g, cs := range m {
		out += fmt.Sprintf("%q:%d ", g, len(cs))
		if len(cs) < 5 {
			out += fmt.Sprint(cs) + " "
		}
	}
	return out
}

func member(generation int32, id string) group.GroupMetadata {
	return group.GroupMetadata{
		Generation: generation, ProtocolType: "consumer", Protocol: "range", Leader: id,
		Members: []group.MemberMetadata{{
			ID: id, InstanceID: "static-" + id, ClientID: "c", ClientHost: "/127.0.0.1",
			SessionTimeoutMillis: 45000, RebalanceTimeoutMillis: 60000,
			Protocols:  []group.ProtocolMetadata{{Name: "range", Metadata: []byte{0, 1, 2}}},
			Assignment: []byte{9, 8, 7},
		}},
	}
}
