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
	configs := kadm.ResourceConfigs{{Name: "t", Configs: []kadm.Config{{Key: "retention.ms"}, {Key: "min.insync.replicas", Value: &two}}}}
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
		MinISR: map[string]int{"t": 2},
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
