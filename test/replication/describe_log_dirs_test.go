package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestDescribeLogDirsReplicaSizes: the operator sizes its replica moves
// (byte-balanced rebalance, drain progress) with DescribeAllLogDirs, so
// every broker must report each replica it holds, follower or leader,
// with its real size, and nothing it does not hold; after a reassignment
// the new replica reports the leader's size and the old one is gone.
func TestDescribeLogDirsReplicaSizes(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 2, nil, "sized"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "empty"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 50 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "sized", Value: fmt.Appendf(nil, "%01000d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// sizes reads broker → size of sized-0 (absent: not reported).
	sizes := func() map[int32]int64 {
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		dirs.Each(func(d kadm.DescribedLogDir) {
			if d.Err != nil {
				t.Fatalf("broker %d dir %s: %v", d.Broker, d.Dir, d.Err)
			}
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == "sized" {
					out[d.Broker] = p.Size
				}
			})
		})
		return out
	}
	// checkOn: exactly the replicas report the partition, all with the
	// leader's size, which holds the 50 records.
	checkOn := func(what string, replicas []int32) {
		t.Helper()
		var last map[int32]int64
		waitFor(t, what, 30*time.Second, func() bool {
			last = sizes()
			if len(last) != len(replicas) {
				return false
			}
			for _, id := range replicas {
				if s, ok := last[id]; !ok || s != last[replicas[0]] || s < 50*1000 {
					return false
				}
			}
			return true
		})
		t.Logf("%s: %v", what, last)
	}
	st := state(t, c, "sized", 0)
	checkOn("both replicas to report sized-0 with the leader's size", st.Replicas)

	var spare int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(st.Replicas, id) {
			spare = id
		}
	}
	target := []int32{st.Replicas[0], spare}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("sized", 0, target)
	waitFor(t, "the controller to accept the reassignment", 30*time.Second, func() bool {
		res, err := adm.AlterPartitionAssignments(ctx, req)
		return err == nil && res.Error() == nil
	})
	checkOn("the moved replica to report sized-0 and the old one to drop it", target)
}
