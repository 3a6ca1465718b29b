package meta

import (
	"errors"
	"slices"
	"testing"
)

func liveSet(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

func ps(replicas []int32, leader, leaderEpoch int32, isr []int32, partitionEpoch int32) PartitionState {
	return PartitionState{Replicas: replicas, Leader: leader, LeaderEpoch: leaderEpoch, ISR: isr, PartitionEpoch: partitionEpoch}
}

func TestReconcilePartition(t *testing.T) {
	r := []int32{1, 2, 3}
	tests := []struct {
		name    string
		cur     PartitionState
		live    func(int32) bool
		unclean bool
		want    PartitionState
		changed bool
	}{
		{"all alive", ps(r, 1, 4, r, 9), liveSet(1, 2, 3), false, ps(r, 1, 4, r, 9), false},
		{"follower dies: ISR shrinks, leader epoch kept", ps(r, 1, 4, r, 9), liveSet(1, 3), false, ps(r, 1, 4, []int32{1, 3}, 10), true},
		{"leader dies: next replica in ISR leads", ps(r, 1, 4, r, 9), liveSet(2, 3), false, ps(r, 2, 5, []int32{2, 3}, 10), true},
		{"leader dies: replica order, not ISR order, decides", ps(r, 1, 4, []int32{1, 3, 2}, 9), liveSet(2, 3), false, ps(r, 2, 5, []int32{3, 2}, 10), true},
		{"leader dies: out-of-sync replica skipped", ps(r, 1, 4, []int32{1, 3}, 9), liveSet(2, 3), false, ps(r, 3, 5, []int32{3}, 10), true},
		{"last ISR member dies: offline, ISR kept", ps(r, 1, 4, []int32{1}, 9), liveSet(2, 3), false, ps(r, NoLeader, 5, []int32{1}, 10), true},
		{"offline stays offline", ps(r, NoLeader, 5, []int32{1}, 10), liveSet(2, 3), false, ps(r, NoLeader, 5, []int32{1}, 10), false},
		{"offline: ISR member returns and leads", ps(r, NoLeader, 5, []int32{1}, 10), liveSet(1, 2), false, ps(r, 1, 6, []int32{1}, 11), true},
		{"offline with dead ISR members: live one leads", ps(r, NoLeader, 5, []int32{1, 3}, 10), liveSet(3), false, ps(r, 3, 6, []int32{3}, 11), true},
		{"unclean: live out-of-sync replica leads", ps(r, 1, 4, []int32{1}, 9), liveSet(3), true, ps(r, 3, 5, []int32{3}, 10), true},
		{"unclean but nobody alive", ps(r, 1, 4, []int32{1}, 9), liveSet(), true, ps(r, NoLeader, 5, []int32{1}, 10), true},
		{"everyone dead", ps(r, 2, 4, r, 9), liveSet(), false, ps(r, NoLeader, 5, r, 10), true},
		{"leader alive but not in ISR: re-elected from ISR", ps(r, 1, 4, []int32{2, 3}, 9), liveSet(1, 2, 3), false, ps(r, 2, 5, []int32{2, 3}, 10), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.cur.Clone()
			got, changed := reconcilePartition(tt.cur, tt.live, tt.unclean)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got %+v changed=%v, want %+v changed=%v", got, changed, tt.want, tt.changed)
			}
			if !tt.cur.Equal(before) {
				t.Fatalf("input mutated: %+v -> %+v", before, tt.cur)
			}
		})
	}
}

func TestPreferredLeader(t *testing.T) {
	r := []int32{1, 2, 3}
	tests := []struct {
		name    string
		cur     PartitionState
		live    func(int32) bool
		want    PartitionState
		wantErr error
	}{
		{"moves back", ps(r, 2, 5, r, 10), liveSet(1, 2, 3), ps(r, 1, 6, r, 11), nil},
		{"already preferred", ps(r, 1, 5, r, 10), liveSet(1, 2, 3), PartitionState{}, ErrElectionNotNeeded},
		{"preferred dead", ps(r, 2, 5, r, 10), liveSet(2, 3), PartitionState{}, ErrPreferredLeaderNotAvailable},
		{"preferred out of ISR", ps(r, 2, 5, []int32{2, 3}, 10), liveSet(1, 2, 3), PartitionState{}, ErrPreferredLeaderNotAvailable},
		{"no replicas", ps(nil, 2, 5, nil, 10), liveSet(1, 2, 3), PartitionState{}, ErrPreferredLeaderNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := preferredLeader(tt.cur, tt.live)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !got.Equal(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckAlterPartition(t *testing.T) {
	r := []int32{1, 2, 3}
	cur := ps(r, 1, 4, []int32{1, 2}, 9)
	tests := []struct {
		name      string
		cur       PartitionState
		proposed  PartitionState
		want      PartitionState
		wantAdded []int32
		wantErr   error
	}{
		{"shrink", cur, ps(r, 1, 4, []int32{1}, 9), ps(r, 1, 4, []int32{1}, 10), nil, nil},
		{"expand", cur, ps(r, 1, 4, []int32{1, 2, 3}, 9), ps(r, 1, 4, []int32{1, 2, 3}, 10), []int32{3}, nil},
		{"swap", cur, ps(r, 1, 4, []int32{1, 3}, 9), ps(r, 1, 4, []int32{1, 3}, 10), []int32{3}, nil},
		{"leader change", cur, ps(r, 2, 4, []int32{1, 2}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		{"replicas change", cur, ps([]int32{1, 2}, 1, 4, []int32{1, 2}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		{"ISR without leader", cur, ps(r, 1, 4, []int32{2}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		{"ISR member not a replica", cur, ps(r, 1, 4, []int32{1, 7}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		{"duplicate ISR member", cur, ps(r, 1, 4, []int32{1, 2, 2}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		{"offline partition", ps(r, NoLeader, 4, []int32{1}, 9), ps(r, NoLeader, 4, []int32{1}, 9), PartitionState{}, nil, ErrInvalidAlterPartition},
		// KIP-903: a joining member brings the broker epoch of its fetches,
		// members that stay keep theirs, members that leave drop theirs.
		{"epochs", epochs(ps(r, 1, 4, []int32{1, 2}, 9), map[int32]int64{1: 10, 2: 20}),
			epochs(ps(r, 1, 4, []int32{1, 3}, 9), map[int32]int64{1: 99, 3: 30}),
			epochs(ps(r, 1, 4, []int32{1, 3}, 10), map[int32]int64{1: 10, 3: 30}), []int32{3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, added, err := checkAlterPartition(tt.cur, tt.proposed)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !got.Equal(tt.want) || !slices.Equal(added, tt.wantAdded) {
				t.Fatalf("got %+v added %v, want %+v added %v", got, added, tt.want, tt.wantAdded)
			}
		})
	}
}

func epochs(s PartitionState, isr map[int32]int64) PartitionState {
	s.ISREpochs = isr
	return s
}

func TestKeysParse(t *testing.T) {
	k, err := newKeys("c1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key    string
		kind   keyKind
		broker int32
		topic  string
		tp     TopicPartition
	}{
		{k.version(), kindVersion, 0, "", TopicPartition{}},
		{k.clusterID(), kindClusterID, 0, "", TopicPartition{}},
		{k.broker(7), kindBroker, 7, "", TopicPartition{}},
		{k.topic("a.b-c_d"), kindTopic, 0, "a.b-c_d", TopicPartition{}},
		{k.partition(TopicPartition{"t", 12}), kindPartition, 0, "", TopicPartition{"t", 12}},
		{k.controller() + "/694d7a0b1c2d3e4f", kindController, 0, "", TopicPartition{}},
		{k.root + "brokers/x", kindUnknown, 0, "", TopicPartition{}},
		{k.root + "partitions/t", kindUnknown, 0, "", TopicPartition{}},
		{k.root + "partitions/t/p", kindUnknown, 0, "", TopicPartition{}},
		{"/strata/c2/meta/version", kindUnknown, 0, "", TopicPartition{}},
		{k.root + "future/thing", kindUnknown, 0, "", TopicPartition{}},
	}
	for _, tt := range tests {
		kind, broker, topic, tp := k.parse(tt.key)
		if kind != tt.kind || broker != tt.broker || topic != tt.topic || tp != tt.tp {
			t.Errorf("parse(%q) = %v %v %q %v, want %v %v %q %v", tt.key, kind, broker, topic, tp, tt.kind, tt.broker, tt.topic, tt.tp)
		}
	}
	for _, bad := range []string{"", "a b", "/a", "a/", "a//b", "a/meta", "offsets"} {
		if _, err := newKeys(bad); err == nil {
			t.Errorf("newKeys(%q) accepted", bad)
		}
	}
	ns, err := newKeys("ns/name")
	if err != nil {
		t.Fatalf("newKeys(ns/name): %v", err)
	}
	if ns.root != "/strata/ns/name/meta/" {
		t.Errorf("root of ns/name = %q", ns.root)
	}
}

func TestValidTopicName(t *testing.T) {
	for _, ok := range []string{"a", "orders.v1", "A_b-9", string(make([]byte, 0)) + "x"} {
		if err := validTopicName(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	long := make([]byte, 250)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "ü", string(long)} {
		if err := validTopicName(bad); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q: err = %v, want ErrInvalidTopic", bad, err)
		}
	}
}

func TestUncleanLeader(t *testing.T) {
	r := []int32{1, 2, 3}
	tests := []struct {
		name    string
		cur     PartitionState
		live    func(int32) bool
		want    PartitionState
		wantErr error
	}{
		{"healthy", ps(r, 1, 4, r, 9), liveSet(1, 2, 3), PartitionState{}, ErrElectionNotNeeded},
		{"offline, out-of-sync replica alive", ps(r, NoLeader, 5, []int32{1}, 10), liveSet(3), ps(r, 3, 6, []int32{3}, 11), nil},
		{"offline, ISR member alive: clean choice", ps(r, NoLeader, 5, []int32{1, 2}, 10), liveSet(2, 3), ps(r, 2, 6, []int32{2}, 11), nil},
		{"nobody alive", ps(r, NoLeader, 5, []int32{1}, 10), liveSet(), PartitionState{}, ErrEligibleLeadersNotAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := uncleanLeader(tt.cur, tt.live)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !got.Equal(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
