package replication

import (
	"context"
	"crypto/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestMeasureThrottledMove is a measurement, not a check (it asserts
// nothing about speed): with STRATA_MEASURE_THROTTLE=<bytes/s>[,...] set
// (0 = no throttle) it moves every replica of a broker holding
// STRATA_MEASURE_MB (default 200) MB to a new broker — a drain — once per
// rate, and logs how long each took. Run:
//
//	STRATA_MEASURE_THROTTLE=0,52428800,20971520 go test ./test/replication -run TestMeasureThrottledMove -v
func TestMeasureThrottledMove(t *testing.T) {
	rates := os.Getenv("STRATA_MEASURE_THROTTLE")
	if rates == "" {
		t.Skip("a measurement: set STRATA_MEASURE_THROTTLE=<bytes/s>[,...] to run it")
	}
	mb := 200
	if v, err := strconv.Atoi(os.Getenv("STRATA_MEASURE_MB")); err == nil && v > 0 {
		mb = v
	}
	for _, r := range strings.Split(rates, ",") {
		rate, err := strconv.ParseInt(r, 10, 64)
		if err != nil {
			t.Fatalf("rate %q: %v", r, err)
		}
		t.Run(r, func(t *testing.T) { measureMove(t, rate, mb) })
	}
}

// createAssigned creates a topic with a manual replica assignment.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, assign [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

func measureMove(t *testing.T, rate int64, mb int) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const partitions = 4
	// Every partition on brokers 1 (leader) and 2: broker 2 is drained
	// to broker 3.
	assign := make([][]int32, partitions)
	for i := range assign {
		assign[i] = []int32{1, 2}
	}
	createAssigned(ctx, t, newClient(t, c.Addrs()), "drain", assign)
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(900<<10), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	value := make([]byte, 64<<10)
	for range mb << 20 / len(value) {
		_, _ = rand.Read(value)
		prod.Produce(ctx, &kgo.Record{Topic: "drain", Value: slices.Clone(value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rate > 0 {
		s := func(v string) *string { return &v }
		// STRATA_MEASURE_SIDES=leader or follower throttles one side only.
		var set []kadm.AlterConfig
		for _, side := range []string{"leader", "follower"} {
			if v := os.Getenv("STRATA_MEASURE_SIDES"); v == "" || v == side {
				set = append(set, kadm.AlterConfig{Op: kadm.SetConfig, Name: side + ".replication.throttled.rate", Value: s(strconv.FormatInt(rate, 10))})
			}
		}
		mustAlter(t)(adm.AlterBrokerConfigs(ctx, set))
		throttleAllReplicas(ctx, t, adm, "drain")
		waitFor(t, "the rate on broker 3", 10*time.Second, func() bool {
			b := brokerByID(c, 3)
			return sideMetric(t, b, "strata_replication_throttle_rate_bytes", "follower") == float64(rate) ||
				sideMetric(t, b, "strata_replication_throttle_rate_bytes", "leader") == float64(rate)
		})
	}
	var move kadm.AlterPartitionAssignmentsReq
	for p := range int32(partitions) {
		move.Assign("drain", p, []int32{1, 3})
	}
	start := time.Now()
	waitFor(t, "the controller to accept the moves", 30*time.Second, func() bool {
		res, err := adm.AlterPartitionAssignments(ctx, move)
		return err == nil && res.Error() == nil
	})
	waitFor(t, "broker 2 to be drained", 20*time.Minute, func() bool {
		for p := range int32(partitions) {
			s := state(t, c, "drain", p)
			if s.Reassigning() || slices.Contains(s.Replicas, 2) {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	t.Logf("leader: %.0f bytes, held %.0f; follower: %.0f bytes, held %.0f",
		sideMetric(t, brokerByID(c, 1), "strata_replication_throttled_bytes_total", "leader"),
		sideMetric(t, brokerByID(c, 1), "strata_replication_throttled_partitions_total", "leader"),
		sideMetric(t, brokerByID(c, 3), "strata_replication_throttled_bytes_total", "follower"),
		sideMetric(t, brokerByID(c, 3), "strata_replication_throttled_partitions_total", "follower"))
	t.Logf("drained %d MB (%d partitions) from broker 2 to broker 3 with throttle %d B/s in %s (%.1f MB/s)", mb, partitions, rate, took.Round(100*time.Millisecond), float64(mb)/took.Seconds())
}
