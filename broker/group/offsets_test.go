package group

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commit commits one offset and returns its error code.
func (h *harness) commit(v int16, group, member, instance string, gen int32, topic string, partition int32, offset int64) int16 {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = v, group, member, gen
	if instance != "" {
		r.InstanceID = &instance
	}
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	resp := h.c.OffsetCommit(context.Background(), r)
	return resp.Topics[0].Partitions[0].ErrorCode
}

type fetched struct {
	offset int64
	epoch  int32
	meta   string
}

// fetch returns the committed offsets of the given partitions (v7 form).
func (h *harness) fetch(group, topic string, partitions ...int32) (int16, map[int32]fetched) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group = 7, group
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: partitions}}
	resp := h.c.OffsetFetch(context.Background(), r)
	out := map[int32]fetched{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = fetched{p.Offset, p.LeaderEpoch, *p.Metadata}
		}
	}
	return resp.ErrorCode, out
}

func TestOffsetCommitFetch(t *testing.T) {
	h := newHarness(t)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "simple", -1
	meta := "hello"
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	p0 := kmsg.NewOffsetCommitRequestTopicPartition()
	p0.Partition, p0.Offset, p0.LeaderEpoch, p0.Metadata = 0, 42, 3, &meta
	p1 := kmsg.NewOffsetCommitRequestTopicPartition()
	p1.Partition, p1.Offset = 1, 7
	tp.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p0, p1}
	req.Topics = []kmsg.OffsetCommitRequestTopic{tp}
	resp := h.c.OffsetCommit(context.Background(), req)
	for _, p := range resp.Topics[0].Partitions {
		wantCode(t, "commit", p.ErrorCode, nil)
	}
	code, got := h.fetch("simple", "t", 0, 1, 2)
	wantCode(t, "fetch", code, nil)
	want := map[int32]fetched{0: {42, 3, "hello"}, 1: {7, -1, ""}, 2: {-1, -1, ""}}
	for p, w := range want {
		if got[p] != w {
			t.Fatalf("partition %d: got %+v want %+v", p, got[p], w)
		}
	}
	code, got = h.fetch("no-such-group", "t", 0)
	if code != 0 || got[0].offset != -1 {
		t.Fatalf("unknown group fetch: %d %+v", code, got)
	}

	// v2+: null topics means every committed partition.
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group = 5, "simple"
	ar := h.c.OffsetFetch(context.Background(), all)
	if len(ar.Topics) != 1 || len(ar.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch all = %+v", ar.Topics)
	}

	// v8: several groups at once.
	multi := kmsg.NewPtrOffsetFetchRequest()
	multi.Version = 8
	multi.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "simple", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
		{Group: "simple"}, // all
		{Group: "other", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
	}
	mr := h.c.OffsetFetch(context.Background(), multi)
	if len(mr.Groups) != 3 || mr.Groups[0].Topics[0].Partitions[0].Offset != 42 ||
		len(mr.Groups[1].Topics[0].Partitions) != 2 || mr.Groups[2].Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("multi-group fetch = %+v", mr.Groups)
	}
}

func TestOffsetCommitRules(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.PartitionExists = func(topic string, p int32) bool { return topic == "t" && p < 3 }
		c.MaxMetadataBytes = 8
	})
	ms := h.stableGroup("g", 2, false)
	wantCode(t, "member commit", h.commit(8, "g", ms[0].id, "", 1, "t", 0, 10), nil)
	wantCode(t, "simple commit to active group", h.commit(8, "g", "", "", -1, "t", 0, 11), kerr.UnknownMemberID)
	wantCode(t, "v0 commit to active group", h.commit(0, "g", "", "", 0, "t", 0, 11), kerr.UnknownMemberID)
	wantCode(t, "unknown member", h.commit(8, "g", "ghost", "", 1, "t", 0, 11), kerr.UnknownMemberID)
	wantCode(t, "unknown partition", h.commit(8, "g", ms[0].id, "", 1, "t", 9, 11), kerr.UnknownTopicOrPartition)
	wantCode(t, "unknown topic", h.commit(8, "g", ms[0].id, "", 1, "nope", 0, 11), kerr.UnknownTopicOrPartition)
	if _, got := h.fetch("g", "t", 0); got[0].offset != 10 {
		t.Fatalf("offset %d after rejected commits, want 10", got[0].offset)
	}

	// Metadata over the limit is rejected per partition.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 8, "g", 1, ms[0].id
	long, short := "123456789", "ok"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 1, Offset: 1, Metadata: &long, LeaderEpoch: -1},
		{Partition: 2, Offset: 2, Metadata: &short, LeaderEpoch: -1},
	}}}
	resp := h.c.OffsetCommit(context.Background(), req)
	wantCode(t, "long metadata", resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantCode(t, "short metadata", resp.Topics[0].Partitions[1].ErrorCode, nil)

	// During CompletingRebalance commits get REBALANCE_IN_PROGRESS.
	c := h.joinAsync(context.Background(), joinReq(3, "g", "", ""))
	eventually(t, "rebalance", func() bool { return h.state("g") == statePreparingRebalance })
	wantCode(t, "commit while preparing", h.commit(8, "g", ms[0].id, "", 1, "t", 0, 12), nil)
	a := h.joinAsync(context.Background(), joinReq(3, "g", ms[0].id, ""))
	b := h.join(joinReq(3, "g", ms[1].id, ""))
	recv(t, a)
	recv(t, c)
	wantCode(t, "commit while completing", h.commit(8, "g", ms[1].id, "", b.Generation, "t", 0, 13), kerr.RebalanceInProgress)
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("active", 1, false)
	wantCode(t, "commit", h.commit(2, "active", ms[0].id, "", 1, "t", 0, 5), nil)
	wantCode(t, "simple commit", h.commit(2, "idle", "", "", -1, "t", 0, 5), nil)
	resp := h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"active", "idle", "missing", ""}})
	wantCode(t, "active", resp.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "idle", resp.Groups[1].ErrorCode, nil)
	wantCode(t, "missing", resp.Groups[2].ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "empty id", resp.Groups[3].ErrorCode, kerr.InvalidGroupID)
	if _, got := h.fetch("idle", "t", 0); got[0].offset != -1 {
		t.Fatalf("offsets survived DeleteGroups: %+v", got)
	}
	lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 4})
	if len(lg.Groups) != 1 || lg.Groups[0].Group != "active" || lg.Groups[0].GroupState != "Stable" || lg.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list = %+v", lg.Groups)
	}
	// After the last member leaves the group can be deleted.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "active", ms[0].id
	wantCode(t, "leave", h.c.LeaveGroup(context.Background(), leave).ErrorCode, nil)
	resp = h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Groups: []string{"active"}})
	wantCode(t, "delete after leave", resp.Groups[0].ErrorCode, nil)
	d := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"active"}})
	if d.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code || d.Groups[0].State != "Dead" {
		t.Fatalf("describe deleted = %+v", d.Groups[0])
	}
	d = h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"active"}})
	if d.Groups[0].ErrorCode != 0 || d.Groups[0].State != "Dead" {
		t.Fatalf("describe deleted v5 = %+v", d.Groups[0])
	}
}

func TestListGroupsFilters(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("stable", 1, false)
	wantCode(t, "simple commit", h.commit(2, "empty", "", "", -1, "t", 0, 5), nil)
	for _, tc := range []struct {
		name    string
		req     kmsg.ListGroupsRequest
		want    []string
		wantTyp string
	}{
		{"all v0", kmsg.ListGroupsRequest{Version: 0}, []string{"empty", "stable"}, ""},
		{"state filter", kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"stable"}}, []string{"stable"}, ""},
		{"state filter ignored before v4", kmsg.ListGroupsRequest{Version: 3, StatesFilter: []string{"Stable"}}, []string{"empty", "stable"}, ""},
		{"type classic", kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"Classic"}}, []string{"empty", "stable"}, "classic"},
		{"type consumer", kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.c.ListGroups(context.Background(), &tc.req)
			var got []string
			for _, g := range resp.Groups {
				got = append(got, g.Group)
				if g.GroupType != tc.wantTyp {
					t.Fatalf("group type %q", g.GroupType)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v want %v", got, tc.want)
				}
			}
		})
	}
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t)
	ms := h.stableGroup("g", 1, false) // subscribed to topic "t"
	wantCode(t, "commit t", h.commit(2, "g", ms[0].id, "", 1, "t", 0, 5), nil)
	wantCode(t, "commit u", h.commit(2, "g", ms[0].id, "", 1, "u", 0, 6), nil)
	del := func(group string, topics ...string) *kmsg.OffsetDeleteResponse {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		for _, tp := range topics {
			r.Topics = append(r.Topics, kmsg.OffsetDeleteRequestTopic{Topic: tp, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
		}
		return h.c.OffsetDelete(context.Background(), r)
	}
	resp := del("g", "t", "u")
	wantCode(t, "top", resp.ErrorCode, nil)
	wantCode(t, "subscribed topic", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "unsubscribed topic", resp.Topics[1].Partitions[0].ErrorCode, nil)
	if _, got := h.fetch("g", "u", 0); got[0].offset != -1 {
		t.Fatalf("u offset survived: %+v", got)
	}
	if _, got := h.fetch("g", "t", 0); got[0].offset != 5 {
		t.Fatalf("t offset lost: %+v", got)
	}
	wantCode(t, "missing group", del("nope", "t").ErrorCode, kerr.GroupIDNotFound)

	// A non-consumer group with members cannot have offsets deleted.
	cr := joinReq(3, "connect", "", "")
	cr.ProtocolType = "connect"
	h.joinAsync(context.Background(), cr)
	h.waitAwaiting("connect", 1)
	wantCode(t, "non-consumer group", del("connect", "t").ErrorCode, kerr.NonEmptyGroup)

	// Once empty, everything can go.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", ms[0].id
	h.c.LeaveGroup(context.Background(), leave)
	resp = del("g", "t")
	wantCode(t, "after leave", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if _, got := h.fetch("g", "t", 0); got[0].offset != -1 {
		t.Fatalf("t offset survived: %+v", got)
	}
}

// failingStore fails every write.
type failingStore struct{ MemoryStore }

func (f *failingStore) Commit(context.Context, string, []OffsetCommit) error {
	return errors.New("disk full")
}

func TestCommitNotAcknowledgedWhenStoreFails(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Store = &failingStore{MemoryStore: *NewMemoryStore()} })
	wantCode(t, "commit", h.commit(2, "g", "", "", -1, "t", 0, 5), kerr.CoordinatorNotAvailable)
	if _, got := h.fetch("g", "t", 0); got[0].offset != -1 {
		t.Fatalf("unpersisted commit visible: %+v", got)
	}
}

func TestDeleteTopicOffsets(t *testing.T) {
	dir := t.TempDir()
	store, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := newHarness(t, func(c *Config) { c.Store = store })
	for _, g := range []string{"a", "b"} {
		wantCode(t, "commit gone", h.commit(2, g, "", "", -1, "gone", 0, 5), nil)
		wantCode(t, "commit gone", h.commit(2, g, "", "", -1, "gone", 1, 6), nil)
		wantCode(t, "commit kept", h.commit(2, g, "", "", -1, "kept", 0, 7), nil)
	}
	n, err := h.c.DeleteTopicOffsets(context.Background(), "gone")
	if err != nil || n != 4 {
		t.Fatalf("DeleteTopicOffsets = %d, %v; want 4", n, err)
	}
	h.c.Close()
	h2 := newHarness(t, func(c *Config) { c.Store = store })
	for _, g := range []string{"a", "b"} {
		if _, got := h2.fetch(g, "gone", 0, 1); got[0].offset != -1 || got[1].offset != -1 {
			t.Fatalf("group %s: offsets of the deleted topic survived: %+v", g, got)
		}
		if _, got := h2.fetch(g, "kept", 0); got[0].offset != 7 {
			t.Fatalf("group %s: other topic's offset lost: %+v", g, got)
		}
	}
}

func TestStats(t *testing.T) {
	h := newHarness(t)
	h.stableGroup("s", 2, false)
	wantCode(t, "commit", h.commit(2, "e", "", "", -1, "t", 0, 1), nil)
	wantCode(t, "commit", h.commit(2, "e", "", "", -1, "t", 1, 1), nil)
	st := h.c.Stats()
	if st.GroupsByState["Stable"] != 1 || st.GroupsByState["Empty"] != 1 || st.Members != 2 || st.CommittedPartitions != 2 {
		t.Fatalf("stats = %+v", st)
	}
}
