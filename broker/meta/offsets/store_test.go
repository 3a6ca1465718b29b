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
		return group.OffsetCommit{Topic: topic, Partition: p, Offset: o, LeaderEpoch: int32(o % 5), Metadata: fmt.Sprintf("m%d", o), CommitTimeMillis: 1000 + o}
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
