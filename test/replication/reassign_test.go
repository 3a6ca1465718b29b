package replication

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestReassignment: kadm.AlterPartitionAssignments moves a replica of an
// RF=2 partition to the third broker (KIP-455): the new replica catches
// up, joins the ISR, the old one is dropped and deletes its copy, the
// reassignment disappears from ListPartitionReassignments, and the moved
// replica's log equals the leader's.
func TestReassignment(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 2, nil, "moving"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 100 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "moving", Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	st := state(t, c, "moving", 0)
	var spare int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(st.Replicas, id) {
			spare = id
		}
	}
	removed := st.Replicas[1]
	target := []int32{st.Replicas[0], spare}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, target)
	waitFor(t, "the controller to accept the reassignment", 30*time.Second, func() bool {
		res, err := adm.AlterPartitionAssignments(ctx, req)
		return err == nil && res.Error() == nil
	})
	waitFor(t, "the reassignment to complete", 30*time.Second, func() bool {
		s := state(t, c, "moving", 0)
		if !slices.Equal(s.Replicas, target) || s.Reassigning() || !slices.Contains(s.ISR, spare) {
			return false
		}
		res, err := adm.ListPartitionReassignments(ctx, nil)
		return err == nil && len(res) == 0
	})
	dir := filepath.Join(brokerByID(c, removed).Dir(), "moving-0")
	waitFor(t, "the removed replica to delete its copy", 30*time.Second, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	leader, moved := brokerByID(c, target[0]), brokerByID(c, spare)
	waitFor(t, "the moved replica to hold the leader's log", 30*time.Second, func() bool {
		return localLEO(t, moved, "moving", 0) == localLEO(t, leader, "moving", 0)
	})
	lp, _ := leader.Server().Broker().Partition("moving", 0)
	mp, _ := moved.Server().Broker().Partition("moving", 0)
	a, err := lp.Log.Read(0, 1<<20, lp.Log.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	b, err := mp.Log.Read(0, 1<<20, mp.Log.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Records, b.Records) || len(a.Records) == 0 {
		t.Fatalf("moved replica's log (%d bytes) differs from the leader's (%d bytes)", len(b.Records), len(a.Records))
	}
}
