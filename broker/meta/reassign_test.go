package meta

import (
	"errors"
	"slices"
	"testing"
)

func reassigning(s PartitionState, adding, removing []int32) PartitionState {
	s.AddingReplicas, s.RemovingReplicas = adding, removing
	return s
}

func TestStartReassignment(t *testing.T) {
	r := []int32{1, 2, 3}
	all := liveSet(1, 2, 3, 4, 5)
	inProgress := reassigning(ps([]int32{4, 2, 3, 1}, 1, 3, []int32{1, 2, 3}, 7), []int32{4}, []int32{1})
	tests := []struct {
		name    string
		cur     PartitionState
		target  []int32
		live    func(int32) bool
		want    PartitionState
		wantErr error
	}{
		{"replace 1 by 4", ps(r, 1, 3, r, 6), []int32{4, 2, 3}, all,
			reassigning(ps([]int32{4, 2, 3, 1}, 1, 3, r, 7), []int32{4}, []int32{1}), nil},
		{"grow rf", ps(r, 1, 3, r, 6), []int32{1, 2, 3, 4}, all,
			reassigning(ps([]int32{1, 2, 3, 4}, 1, 3, r, 7), []int32{4}, nil), nil},
		{"shrink rf completes at once", ps(r, 1, 3, r, 6), []int32{1, 2}, all,
			ps([]int32{1, 2}, 1, 3, []int32{1, 2}, 7), nil},
		{"reorder moves nothing but completes", ps(r, 1, 3, r, 6), []int32{3, 2, 1}, all,
			ps([]int32{3, 2, 1}, 1, 3, r, 7), nil},
		{"shrink away the leader elects a target replica", ps(r, 1, 3, r, 6), []int32{2, 3}, all,
			ps([]int32{2, 3}, 2, 4, []int32{2, 3}, 7), nil},
		{"replace in-progress target", inProgress, []int32{5, 2, 3}, all,
			reassigning(ps([]int32{5, 2, 3, 1}, 1, 3, []int32{1, 2, 3}, 8), []int32{5}, []int32{1}), nil},
		{"cancel", inProgress, nil, all,
			ps([]int32{2, 3, 1}, 1, 3, []int32{1, 2, 3}, 8), nil},
		{"cancel drops a caught-up adding replica from the ISR",
			reassigning(ps([]int32{4, 2, 3, 1}, 1, 3, []int32{1, 2, 3, 4}, 7), []int32{4}, []int32{1}), nil, all,
			ps([]int32{2, 3, 1}, 1, 3, []int32{1, 2, 3}, 8), nil},
		{"cancel with nothing in progress", ps(r, 1, 3, r, 6), nil, all, PartitionState{}, ErrNoReassignmentInProgress},
		{"target on unregistered broker", ps(r, 1, 3, r, 6), []int32{9, 2, 3}, all, PartitionState{}, ErrInvalidReplicaAssignment},
		{"duplicate target", ps(r, 1, 3, r, 6), []int32{2, 2, 3}, all, PartitionState{}, ErrInvalidReplicaAssignment},
		{"empty target", ps(r, 1, 3, r, 6), []int32{}, all, PartitionState{}, ErrInvalidReplicaAssignment},
		{"dead existing replica may stay", ps(r, 1, 3, []int32{1, 2}, 6), []int32{1, 2, 3}, liveSet(1, 2),
			ps(r, 1, 3, []int32{1, 2}, 7), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := startReassignment(tt.cur, tt.target, tt.live)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !got.Equal(tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestControllerWantsFinishesReassignment(t *testing.T) {
	all := liveSet(1, 2, 3, 4)
	moving := reassigning(ps([]int32{4, 2, 3, 1}, 1, 3, []int32{1, 2, 3}, 7), []int32{4}, []int32{1})
	caughtUp := moving.Clone()
	caughtUp.ISR = []int32{1, 2, 3, 4}
	caughtUp.PartitionEpoch = 8
	tests := []struct {
		name    string
		cur     PartitionState
		live    func(int32) bool
		want    PartitionState
		changed bool
	}{
		{"waits for the adding replica", moving, all, moving, false},
		{"completes, leader moves off the removed replica", caughtUp, all,
			ps([]int32{4, 2, 3}, 4, 4, []int32{2, 3, 4}, 9), true},
		{"leader dies while adding replica catches up: both in one write", caughtUp, liveSet(2, 3, 4),
			ps([]int32{4, 2, 3}, 4, 4, []int32{2, 3, 4}, 9), true},
		{"completes keeping a leader that stays", reassigning(ps([]int32{2, 4, 1}, 2, 3, []int32{1, 2, 4}, 7), []int32{4}, []int32{1}), all,
			ps([]int32{2, 4}, 2, 3, []int32{2, 4}, 8), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := controllerDecides(tt.cur, tt.live, false)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got  %+v changed=%v\nwant %+v changed=%v", got, changed, tt.want, tt.changed)
			}
		})
	}
}

// controllerWants stamps the new leader's registration epoch and treats a
// leader registered under a different epoch (restarted) as a new broker.
func TestControllerWantsBrokerEpochs(t *testing.T) {
	r := []int32{1, 2, 3}
	brokers := func(epochs ...int64) map[int32]BrokerInfo {
		m := map[int32]BrokerInfo{}
		for i, e := range epochs {
			if e != 0 {
				m[int32(i+1)] = BrokerInfo{ID: int32(i + 1), Epoch: e}
			}
		}
		return m
	}
	stamped := func(s PartitionState, e int64) PartitionState { s.LeaderBrokerEpoch = e; return s }
	tests := []struct {
		name    string
		cur     PartitionState
		brokers map[int32]BrokerInfo
		want    PartitionState
		changed bool
	}{
		{"same incarnation: nothing to do", stamped(ps(r, 1, 3, r, 5), 10), brokers(10, 20, 30), stamped(ps(r, 1, 3, r, 5), 10), false},
		{"unknown epoch (0) is not checked", ps(r, 1, 3, r, 5), brokers(11, 20, 30), ps(r, 1, 3, r, 5), false},
		// It may have lost unflushed writes, so it also leaves the ISR; as a
		// follower it is added back once caught up.
		{"leader restarted: next ISR member leads, stamped", stamped(ps(r, 1, 3, r, 5), 10), brokers(11, 20, 30),
			stamped(ps(r, 2, 4, []int32{2, 3}, 6), 20), true},
		{"restarted sole ISR member: offline first", stamped(ps(r, 1, 3, []int32{1}, 5), 10), brokers(11, 20, 30),
			ps(r, NoLeader, 4, []int32{1}, 6), true},
		{"then the restarted broker leads again under its new epoch", ps(r, NoLeader, 4, []int32{1}, 6), brokers(11, 20, 30),
			stamped(ps(r, 1, 5, []int32{1}, 7), 11), true},
		{"leader dies: successor stamped", stamped(ps(r, 1, 3, r, 5), 10), brokers(0, 20, 30),
			stamped(ps(r, 2, 4, []int32{2, 3}, 6), 20), true},
		{"ISR shrink keeps the stamp", stamped(ps(r, 1, 3, r, 5), 10), brokers(10, 20, 0),
			stamped(ps(r, 1, 3, []int32{1, 2}, 6), 10), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := controllerWants(tt.cur, tt.brokers, false)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got  %+v changed=%v\nwant %+v changed=%v", got, changed, tt.want, tt.changed)
			}
		})
	}
}

// TestControllerWantsISREpochs (KIP-903): an ISR member registered under
// another epoch than it joined the ISR with restarted since and may have
// lost an unflushed tail. The controller removes it from the ISR and does
// not elect it while a current member is alive, even when it never saw the
// broker deregistered (the two registrations arrived in one snapshot).
func TestControllerWantsISREpochs(t *testing.T) {
	r := []int32{1, 2, 3}
	brokers := func(epochs ...int64) map[int32]BrokerInfo {
		m := map[int32]BrokerInfo{}
		for i, e := range epochs {
			if e != 0 {
				m[int32(i+1)] = BrokerInfo{ID: int32(i + 1), Epoch: e}
			}
		}
		return m
	}
	with := func(s PartitionState, leaderEpoch int64, isr map[int32]int64) PartitionState {
		s.LeaderBrokerEpoch, s.ISREpochs = leaderEpoch, isr
		return s
	}
	all := map[int32]int64{1: 10, 2: 20, 3: 30}
	tests := []struct {
		name    string
		cur     PartitionState
		brokers map[int32]BrokerInfo
		want    PartitionState
		changed bool
	}{
		{"every member current: nothing to do", with(ps(r, 1, 3, r, 5), 10, all), brokers(10, 20, 30),
			with(ps(r, 1, 3, r, 5), 10, all), false},
		{"a follower restarted: it leaves the ISR", with(ps(r, 1, 3, r, 5), 10, all), brokers(10, 20, 31),
			with(ps(r, 1, 3, []int32{1, 2}, 6), 10, map[int32]int64{1: 10, 2: 20}), true},
		{"leader dead, a follower restarted: the current one leads", with(ps(r, 1, 3, r, 5), 10, all), brokers(0, 20, 31),
			with(ps(r, 2, 4, []int32{2}, 6), 20, map[int32]int64{2: 20}), true},
		{"leader dead, the preferred follower restarted: the current one leads", with(ps(r, 1, 3, r, 5), 10, all), brokers(0, 21, 30),
			with(ps(r, 3, 4, []int32{3}, 6), 30, map[int32]int64{3: 30}), true},
		{"no current member alive: offline first", with(ps(r, 1, 3, r, 5), 10, all), brokers(0, 21, 31),
			with(ps(r, NoLeader, 4, r, 6), 0, all), true},
		{"then a restarted member leads alone under its new epoch", with(ps(r, NoLeader, 4, r, 6), 0, all), brokers(0, 21, 31),
			with(ps(r, 2, 5, []int32{2}, 7), 21, map[int32]int64{2: 21}), true},
		{"members without an epoch are not checked", with(ps(r, 1, 3, r, 5), 10, map[int32]int64{1: 10}), brokers(10, 21, 31),
			with(ps(r, 1, 3, r, 5), 10, map[int32]int64{1: 10}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := controllerWants(tt.cur, tt.brokers, false)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got  %+v changed=%v\nwant %+v changed=%v", got, changed, tt.want, tt.changed)
			}
		})
	}
}

// A preferred replica registered under another epoch than it joined the
// ISR with restarted since; ElectLeaders (PREFERRED) must not pick it.
func TestPreferredLeaderSkipsRestartedReplica(t *testing.T) {
	r := []int32{1, 2, 3}
	cur := ps(r, 2, 5, r, 10)
	cur.LeaderBrokerEpoch, cur.ISREpochs = 20, map[int32]int64{1: 10, 2: 20, 3: 30}
	restarted := map[int32]BrokerInfo{1: {ID: 1, Epoch: 11}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: 30}}
	if _, err := electPreferred(cur, restarted); !errors.Is(err, ErrPreferredLeaderNotAvailable) {
		t.Fatalf("restarted preferred replica: %v, want ErrPreferredLeaderNotAvailable", err)
	}
	same := map[int32]BrokerInfo{1: {ID: 1, Epoch: 10}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: 30}}
	if next, err := electPreferred(cur, same); err != nil || next.Leader != 1 {
		t.Fatalf("current preferred replica: %+v, %v, want it elected", next, err)
	}
}

// TestControllerWantsControlledShutdown: a leader in controlled shutdown
// hands leadership to the first ISR member, in preferred order, that is
// current and not shutting down; without one it keeps leading. A broker
// shutting down is not elected when another candidate exists, and
// preferred-leader election does not move leadership back to it.
func TestControllerWantsControlledShutdown(t *testing.T) {
	r := []int32{1, 2, 3}
	brokers := func(down ...int32) map[int32]BrokerInfo {
		m := map[int32]BrokerInfo{}
		for _, id := range r {
			m[id] = BrokerInfo{ID: id, Epoch: int64(id) * 10, ShuttingDown: slices.Contains(down, id)}
		}
		return m
	}
	without := func(m map[int32]BrokerInfo, id int32) map[int32]BrokerInfo { delete(m, id); return m }
	stamped := func(s PartitionState, e int64) PartitionState { s.LeaderBrokerEpoch = e; return s }
	tests := []struct {
		name    string
		cur     PartitionState
		brokers map[int32]BrokerInfo
		want    PartitionState
		changed bool
	}{
		{"nobody shutting down: nothing to do", stamped(ps(r, 1, 3, r, 5), 10), brokers(),
			stamped(ps(r, 1, 3, r, 5), 10), false},
		{"leader shutting down: next ISR member leads, ISR kept", stamped(ps(r, 1, 3, r, 5), 10), brokers(1),
			stamped(ps(r, 2, 4, r, 6), 20), true},
		{"the next one is not in the ISR: the one after", stamped(ps(r, 1, 3, []int32{1, 3}, 5), 10), brokers(1),
			stamped(ps(r, 3, 4, []int32{1, 3}, 6), 30), true},
		{"the next one is shutting down too: the one after", stamped(ps(r, 1, 3, r, 5), 10), brokers(1, 2),
			stamped(ps(r, 3, 4, r, 6), 30), true},
		{"sole ISR member: keeps leading", stamped(ps(r, 1, 3, []int32{1}, 5), 10), brokers(1),
			stamped(ps(r, 1, 3, []int32{1}, 5), 10), false},
		{"every ISR member shutting down: keeps leading", stamped(ps(r, 1, 3, r, 5), 10), brokers(1, 2, 3),
			stamped(ps(r, 1, 3, r, 5), 10), false},
		{"a follower shutting down: nothing to do", stamped(ps(r, 1, 3, r, 5), 10), brokers(2),
			stamped(ps(r, 1, 3, r, 5), 10), false},
		{"leader dead, preferred successor shutting down: the other one leads", stamped(ps(r, 1, 3, r, 5), 10), without(brokers(2), 1),
			stamped(ps(r, 3, 4, []int32{2, 3}, 6), 30), true},
		{"leader shutting down and a follower dead: one write, one epoch step each", stamped(ps(r, 1, 3, r, 5), 10), without(brokers(1), 3),
			stamped(ps(r, 2, 4, []int32{1, 2}, 6), 20), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := controllerWants(tt.cur, tt.brokers, false)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got  %+v changed=%v\nwant %+v changed=%v", got, changed, tt.want, tt.changed)
			}
		})
	}
	t.Run("preferred election skips a broker shutting down", func(t *testing.T) {
		cur := stamped(ps(r, 2, 4, r, 6), 20)
		if _, err := electPreferred(cur, brokers(1)); !errors.Is(err, ErrPreferredLeaderNotAvailable) {
			t.Fatalf("preferred replica shutting down: %v, want ErrPreferredLeaderNotAvailable", err)
		}
		if next, err := electPreferred(cur, brokers()); err != nil || next.Leader != 1 {
			t.Fatalf("preferred replica back: %+v, %v, want it elected", next, err)
		}
	})
}
