package meta

import (
	"errors"
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
			got, changed := controllerWants(tt.cur, tt.live, false)
			if changed != tt.changed || !got.Equal(tt.want) {
				t.Fatalf("got  %+v changed=%v\nwant %+v changed=%v", got, changed, tt.want, tt.changed)
			}
		})
	}
}
