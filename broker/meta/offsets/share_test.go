package offsets

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

// TestShareStateMatchesMemoryStore: the etcd store keeps (and deletes)
// share-partition state as group.MemoryStore does, per cluster, with group
// names escaped.
func TestShareStateMatchesMemoryStore(t *testing.T) {
	ctx := context.Background()
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	other, err := meta.New(client, "c2")
	if err != nil {
		t.Fatal(err)
	}
	neighbour := New(other)
	ref := group.NewMemoryStore()
	state := func(start int64) group.ShareState {
		return group.ShareState{StartOffset: start, Batches: []group.ShareStateBatch{
			{First: start, Last: start + 2, State: group.ShareStateArchived, DeliveryCount: 5},
			{First: start + 3, Last: start + 3, State: group.ShareStateAvailable, DeliveryCount: 1},
		}}
	}
	saves := []struct {
		group, topic string
		partition    int32
		start        int64
	}{
		{"g", "t", 0, 1}, {"g", "t", 0, 4}, {"g", "t", 1, 9}, {"team/app 1", "t", 0, 2}, {"g2", "u", 3, 0},
	}
	for _, st := range []group.ShareStateStore{s, ref} {
		for _, sv := range saves {
			if err := st.SaveShareState(ctx, sv.group, sv.topic, sv.partition, state(sv.start)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := neighbour.SaveShareState(ctx, "g", "t", 0, state(100)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		group, topic string
		partition    int32
	}{{"g", "t", 0}, {"g", "t", 1}, {"team/app 1", "t", 0}, {"g2", "u", 3}, {"g", "t", 2}, {"team", "t", 0}} {
		got, ok, err := s.LoadShareState(ctx, k.group, k.topic, k.partition)
		want, wantOK, _ := ref.LoadShareState(ctx, k.group, k.topic, k.partition)
		if err != nil || ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s/%s/%d: %+v %v %v, want %+v %v", k.group, k.topic, k.partition, got, ok, err, want, wantOK)
		}
	}
	for _, g := range []string{"g", "team/app 1", "team", "g2"} {
		got, err := s.ListShareState(ctx, g)
		want, _ := ref.ListShareState(ctx, g)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %q: %v %v, want %v", g, got, err, want)
		}
	}
	// Deleting a group's state leaves other groups' and other clusters'.
	if err := s.SaveShareState(ctx, "team", "t", 0, state(7)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []group.ShareStateStore{s, ref} {
		for _, g := range []string{"g", "team/app 1"} {
			if err := st.DeleteShareState(ctx, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, g := range []string{"g", "team/app 1", "g2"} {
		got, err := s.ListShareState(ctx, g)
		want, _ := ref.ListShareState(ctx, g)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %q after delete: %v %v, want %v", g, got, err, want)
		}
	}
	if _, ok, _ := s.LoadShareState(ctx, "team", "t", 0); !ok {
		t.Error(`deleting "team/app 1" deleted "team"`)
	}
	if _, ok, _ := neighbour.LoadShareState(ctx, "g", "t", 0); !ok {
		t.Error("deleting a group deleted another cluster's group of that name")
	}
	if err := s.SaveShareState(ctx, "g", "a/b", 0, state(1)); err == nil {
		t.Error("a topic name with a slash was accepted")
	}
}
