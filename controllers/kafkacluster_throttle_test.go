package controllers

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-dev/strata/broker/placement"
	"github.com/strata-dev/strata/controllers/plan"
)

func TestDesiredThrottle(t *testing.T) {
	md := plan.Metadata{
		Brokers: []plan.Broker{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}},
		Partitions: []plan.Partition{
			// In flight: 3 joins [1 2].
			{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 3}, Adding: []int32{3}},
			// In flight: 4 replaces 2 (removing replicas may lead: listed as leaders).
			{Topic: "a", Partition: 1, Replicas: []int32{4, 1, 2}, Adding: []int32{4}, Removing: []int32{2}},
			// Settled.
			{Topic: "b", Partition: 0, Replicas: []int32{1, 2}},
			{Topic: "c", Partition: 0, Replicas: []int32{2, 3}},
		},
	}
	for _, tc := range []struct {
		name     string
		rate     int64
		md       plan.Metadata
		starting []placement.Move
		want     ThrottleTarget
	}{
		{name: "no rate", rate: 0, md: md, want: ThrottleTarget{}},
		{name: "nothing moving", rate: 100, md: plan.Metadata{Partitions: md.Partitions[2:]}, want: ThrottleTarget{}},
		{name: "moves in flight", rate: 100, md: md, want: ThrottleTarget{
			Rate: 100, Brokers: []int32{1, 2, 3, 4}, Partitions: 2,
			Topics: map[string]TopicThrottle{"a": {Leader: "0:1,0:2,1:1,1:2", Follower: "0:3,1:4"}},
		}},
		{name: "moves about to start", rate: 7, md: plan.Metadata{Partitions: md.Partitions[2:]},
			starting: []placement.Move{
				{Topic: "b", Partition: 0, From: []int32{1, 2}, To: []int32{1, 4}},
				{Topic: "c", Partition: 0, From: []int32{2, 3}, To: []int32{3, 2}}, // a reorder copies nothing
				{Topic: "gone", Partition: 0, To: []int32{1}},
			},
			want: ThrottleTarget{Rate: 7, Brokers: []int32{1, 2, 4}, Partitions: 1,
				Topics: map[string]TopicThrottle{"b": {Leader: "0:1,0:2", Follower: "0:4"}}}},
		{name: "a move already in flight is not counted twice", rate: 5, md: md,
			starting: []placement.Move{{Topic: "a", Partition: 0, To: []int32{1, 2, 3}}},
			want: ThrottleTarget{Rate: 5, Brokers: []int32{1, 2, 3, 4}, Partitions: 2,
				Topics: map[string]TopicThrottle{"a": {Leader: "0:1,0:2,1:1,1:2", Follower: "0:3,1:4"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DesiredThrottle(tc.rate, tc.md, tc.starting)
			if got.Empty() && tc.want.Empty() {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlanThrottleOps(t *testing.T) {
	set := func(name, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(v)}
	}
	del := func(name string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name} }
	target := ThrottleTarget{Rate: 100, Brokers: []int32{1, 2}, Partitions: 1, Topics: map[string]TopicThrottle{"a": {Leader: "0:1", Follower: "0:2"}}}
	for _, tc := range []struct {
		name   string
		target ThrottleTarget
		state  throttleState
		want   throttleOps
	}{
		{name: "apply from nothing", target: target, want: throttleOps{
			brokers: map[int32][]kadm.AlterConfig{
				1: {set(configLeaderRate, "100"), set(configFollowerRate, "100")},
				2: {set(configLeaderRate, "100"), set(configFollowerRate, "100")},
			},
			topics: map[string][]kadm.AlterConfig{"a": {set(configLeaderReplicas, "0:1"), set(configFollowerReplicas, "0:2")}},
		}},
		{name: "in place: nothing to do", target: target, state: throttleState{
			brokers: map[int32][2]string{1: {"100", "100"}, 2: {"100", "100"}},
			topics:  map[string]TopicThrottle{"a": {Leader: "0:1", Follower: "0:2"}},
		}, want: throttleOps{brokers: map[int32][]kadm.AlterConfig{}, topics: map[string][]kadm.AlterConfig{}}},
		{name: "moves ended: everything removed, unregistered brokers left alone", target: ThrottleTarget{}, state: throttleState{
			brokers: map[int32][2]string{1: {"100", "100"}, 3: {"", "50"}, 9: {"100", "100"}},
			topics:  map[string]TopicThrottle{"a": {Leader: "0:1"}},
		}, want: throttleOps{
			brokers: map[int32][]kadm.AlterConfig{1: {del(configLeaderRate), del(configFollowerRate)}, 3: {del(configFollowerRate)}},
			topics:  map[string][]kadm.AlterConfig{"a": {del(configLeaderReplicas)}},
		}},
		{name: "rate changed, a broker no longer involved", target: target, state: throttleState{
			brokers: map[int32][2]string{1: {"50", "50"}, 2: {"100", "100"}, 3: {"50", "50"}},
			topics:  map[string]TopicThrottle{"a": {Leader: "0:1", Follower: "0:2"}, "b": {Follower: "1:3"}},
		}, want: throttleOps{
			brokers: map[int32][]kadm.AlterConfig{1: {set(configLeaderRate, "100"), set(configFollowerRate, "100")}, 3: {del(configLeaderRate), del(configFollowerRate)}},
			topics:  map[string][]kadm.AlterConfig{"b": {del(configFollowerReplicas)}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planThrottleOps(tc.target, tc.state, []int32{1, 2, 3})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
