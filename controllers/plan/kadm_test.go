package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestFromKadm(t *testing.T) {
	rack := func(s string) *string { return &s }
	md := kadm.Metadata{
		Controller: 100,
		Brokers:    kadm.BrokerDetails{{NodeID: 0, Rack: rack("a")}, {NodeID: 100, Rack: rack("b")}, {NodeID: 200}},
		Topics: kadm.TopicDetails{
			"t": {Topic: "t", Partitions: kadm.PartitionDetails{
				1: {Topic: "t", Partition: 1, Leader: -1, Replicas: []int32{200}, ISR: []int32{200}, Err: kerr.LeaderNotAvailable},
				0: {Topic: "t", Partition: 0, Leader: 0, Replicas: []int32{0, 100, 1}, ISR: []int32{0, 100}},
			}},
		},
	}
	reassigning := kadm.ListPartitionReassignmentsResponses{"t": {0: {Topic: "t", Partition: 0, Replicas: []int32{0, 100, 1}, AddingReplicas: []int32{1}, RemovingReplicas: []int32{200}}}}
	two := "2"
	compact, off, del := "compact,delete", "false", "delete"
	configs := kadm.ResourceConfigs{{Name: "t", Configs: []kadm.Config{{Key: "retention.ms"}, {Key: "min.insync.replicas", Value: &two}, {Key: "cleanup.policy", Value: &del}}},
		{Name: "c", Configs: []kadm.Config{{Key: "cleanup.policy", Value: &compact}}},
		{Name: "off", Configs: []kadm.Config{{Key: "remote.storage.enable", Value: &off}}}}
	got, err := FromKadm(md, reassigning, configs)
	if err != nil {
		t.Fatal(err)
	}
	want := Metadata{
		Controller: 100,
		Brokers:    []Broker{{0, "a"}, {100, "b"}, {200, ""}},
		Partitions: []Partition{
			{Topic: "t", Partition: 0, Replicas: []int32{0, 100, 1}, ISR: []int32{0, 100}, Leader: 0, Adding: []int32{1}, Removing: []int32{200}},
			{Topic: "t", Partition: 1, Replicas: []int32{200}, ISR: []int32{200}, Leader: NoLeader},
		},
		MinISR:   map[string]int{"t": 2},
		Untiered: map[string]bool{"c": true, "off": true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromKadm =\n%+v\nwant\n%+v", got, want)
	}

	md.Topics["u"] = kadm.TopicDetail{Topic: "u", Err: kerr.UnknownTopicOrPartition}
	if _, err := FromKadm(md, nil, nil); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("a topic answered with an error: %v, want it returned", err)
	}
	delete(md.Topics, "u")
	bad := "zero"
	if _, err := FromKadm(md, nil, kadm.ResourceConfigs{{Name: "t", Configs: []kadm.Config{{Key: "min.insync.replicas", Value: &bad}}}}); err == nil || !strings.Contains(err.Error(), `min.insync.replicas="zero"`) {
		t.Errorf("bad min.insync.replicas: %v", err)
	}
}

func TestWithSizes(t *testing.T) {
	md := Metadata{Partitions: []Partition{part("t", 0, 0, 100), part("t", 1, 100, 200), part("u", 0, 0)}}
	dirs := kadm.DescribedAllLogDirs{
		0: {"/data": {Broker: 0, Dir: "/data", Topics: kadm.DescribedLogDirTopics{
			"t": {0: {Broker: 0, Dir: "/data", Topic: "t", Partition: 0, Size: 500}},
		}}},
		100: {"/data": {Broker: 100, Dir: "/data", Topics: kadm.DescribedLogDirTopics{
			"t": {0: {Broker: 100, Dir: "/data", Topic: "t", Partition: 0, Size: 300}, 1: {Broker: 100, Dir: "/data", Topic: "t", Partition: 1, Size: 70}},
		}}},
		200: {"/data": {Broker: 200, Dir: "/data", Err: kerr.KafkaStorageError, Topics: kadm.DescribedLogDirTopics{
			"t": {1: {Broker: 200, Dir: "/data", Topic: "t", Partition: 1, Size: 1 << 40}},
		}}},
	}
	got := WithSizes(md, dirs)
	want := []map[int32]int64{{0: 500, 100: 300}, {100: 70}, nil}
	for i, p := range got.Partitions {
		if !reflect.DeepEqual(p.Sizes, want[i]) {
			t.Errorf("%s: sizes %v, want %v", p, p.Sizes, want[i])
		}
	}
	if s := got.Partitions[0].Size(); s != 500 {
		t.Errorf("t-0 size %d, want the largest replica's 500", s)
	}
	if md.Partitions[0].Sizes != nil {
		t.Error("WithSizes changed its input")
	}
}
