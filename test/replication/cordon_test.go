package replication

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// replicasOn counts the partitions of topic with a replica on broker.
func replicasOn(t *testing.T, adm *kadm.Client, topic string, broker int32) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var md kadm.Metadata
	var err error
	// The broker answering may not have seen a topic just created.
	waitFor(t, "metadata of "+topic, 10*time.Second, func() bool {
		md, err = adm.Metadata(ctx, topic)
		return err == nil && md.Topics[topic].Err == nil
	})
	n := 0
	for _, p := range md.Topics[topic].Partitions {
		if slices.Contains(p.Replicas, broker) {
			n++
		}
	}
	return n
}

// TestCordonedBrokerTakesNoNewReplica: a broker whose cordoned.log.dirs
// is "*" (KIP-1066; the operator sets it on the brokers a scale-down
// removes) gets no replica of a topic created, of partitions added or of
// a reassignment started while it is cordoned, placed or named; a
// replication factor the other brokers cannot hold fails with
// INVALID_REPLICATION_FACTOR saying so. Its own replicas stay, and once
// uncordoned it takes replicas again.
func TestCordonedBrokerTakesNoNewReplica(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "a", "b", "c"}) // brokers 1, 2 in zone a
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, adm, "before", 12, nil)
	held := replicasOn(t, adm, "before", 2)
	if held == 0 {
		t.Fatal("broker 2 holds no replica of a topic created before the cordon: the test would prove nothing")
	}

	cordon := func(value *string) {
		t.Helper()
		op := kadm.AlterConfig{Op: kadm.SetConfig, Name: "cordoned.log.dirs", Value: value}
		if value == nil {
			op = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "cordoned.log.dirs"}
		}
		mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{op}, 2))
	}
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cordoned.log.dirs", Value: kadm.StringPtr("/data")}}, 2)
	if err == nil {
		err = alterErr(res)
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("cordoned.log.dirs=/data: %v, want INVALID_CONFIG (one log directory: \"*\")", err)
	}
	cordon(kadm.StringPtr("*"))
	if cfg := brokerConfig(t, adm, "cordoned.log.dirs", 2); cfg.MaybeValue() != "*" {
		t.Fatalf("broker 2 describes cordoned.log.dirs %q", cfg.MaybeValue())
	}

	createTopic(t, adm, "during", 12, nil)
	if n := replicasOn(t, adm, "during", 2); n != 0 {
		t.Errorf("cordoned broker 2 got %d replicas of a new topic", n)
	}
	if n := replicasOn(t, adm, "before", 2); n != held {
		t.Errorf("broker 2's replicas of before went from %d to %d: a cordon moves nothing", held, n)
	}
	// kadm reads the partition count from a broker's Metadata first;
	// the one it asks may not have applied the new topic yet.
	var cpErr error
	waitFor(t, "CreatePartitions on a topic every broker knows", 30*time.Second, func() bool {
		cp, err := adm.CreatePartitions(ctx, 12, "during")
		if cpErr = cmp.Or(err, cp["during"].Err); errors.Is(cpErr, kerr.UnknownTopicOrPartition) {
			return false
		}
		return true
	})
	if cpErr != nil {
		t.Fatalf("create partitions: %v", cpErr)
	}
	if n := replicasOn(t, adm, "during", 2); n != 0 {
		t.Errorf("cordoned broker 2 got %d replicas of new partitions", n)
	}

	// Four brokers, one cordoned: replication factor 4 cannot be placed.
	resp, err := adm.CreateTopic(ctx, 1, 4, nil, "wide")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) || !strings.Contains(resp.ErrMessage, "cordoned") {
		t.Errorf("rf 4 with broker 2 cordoned: %v (%q), want INVALID_REPLICATION_FACTOR naming the cordon", err, resp.ErrMessage)
	}
	// Named, not placed: a manual assignment or a reassignment onto it.
	manual := kmsg.NewPtrCreateTopicsRequest()
	mt := kmsg.NewCreateTopicsRequestTopic()
	mt.Topic, mt.NumPartitions, mt.ReplicationFactor = "manual", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{2, 3, 4}
	mt.ReplicaAssignment = append(mt.ReplicaAssignment, ra)
	manual.Topics = append(manual.Topics, mt)
	manual.TimeoutMillis = 10000
	mr, err := manual.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := mr.Topics[0].ErrorCode; code != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("manual assignment naming cordoned broker 2: code %d (%v), want INVALID_REPLICA_ASSIGNMENT", code, kerr.ErrorForCode(code))
	}
	var req kadm.AlterPartitionAssignmentsReq
	md, err := adm.Metadata(ctx, "during")
	if err != nil {
		t.Fatal(err)
	}
	p0 := md.Topics["during"].Partitions[0]
	target := slices.Clone(p0.Replicas)
	for i, id := range target {
		if id == 1 { // zone a's replica moves to broker 2, zone a too
			target[i] = 2
		}
	}
	if !slices.Contains(target, 2) {
		t.Fatalf("partition 0 of during has no replica in zone a: %v", p0.Replicas)
	}
	req.Assign("during", 0, target)
	ar, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := ar["during"][0]; !errors.Is(got.Err, kerr.InvalidReplicaAssignment) {
		t.Errorf("reassignment onto cordoned broker 2: %v (%s), want INVALID_REPLICA_ASSIGNMENT", got.Err, got.ErrMessage)
	}

	cordon(nil)
	createTopic(t, adm, "after", 12, nil)
	if n := replicasOn(t, adm, "after", 2); n == 0 {
		t.Errorf("uncordoned broker 2 got no replica of a new topic")
	}
}
