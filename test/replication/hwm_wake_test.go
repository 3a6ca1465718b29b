package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/traffic"
)

// TestFollowerReadsHWMWake (issue #29): a consumer with a rack reads from
// its zone's follower (KIP-392), which serves it up to the HWM it learns
// from the leader. With a producer that writes one record and falls
// silent, the follower's replica fetch that reports the record is parked
// on the leader when the HWM moves; before HWM wakes it was answered only
// at replica.fetch.wait.max.ms (5 s here), and the consumer got each
// record about 5 s after its acks=all produce returned. The follower now
// asks for HWM wakes of the partitions consumers read on it
// (replica.TagHWMWake): each record arrives well within half of that
// wait, and the leader counts the wakes. Classic replication and WAL
// (wal.policy=latency: every record through an object, pointers, GETs).
func TestFollowerReadsHWMWake(t *testing.T) {
	const fetchWait = 5 * time.Second
	wait := brokertest.WithSetting("replica.fetch.wait.max.ms", fmt.Sprint(fetchWait.Milliseconds()))
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *brokertest.Cluster
	}{
		{"classic", func(t *testing.T) *brokertest.Cluster { return brokertest.StartCluster(t, zones, wait) }},
		{"wal", func(t *testing.T) *brokertest.Cluster {
			return startWALCluster(t, wait, brokertest.WithSetting("wal.policy", "latency")).Cluster
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t)
			adm := kadm.NewClient(newClient(t, c.Addrs()))
			const topic = "hwm-wake-reads"
			createTopic(t, adm, topic, 1, nil)
			st := state(t, c, topic, 0)
			var follower int32 = -1
			for _, r := range st.Replicas {
				if r != st.Leader {
					follower = r
					break
				}
			}
			rack := zones[follower-1]
			leader, served := brokerByID(c, st.Leader), brokerByID(c, follower)
			waitFor(t, "a full ISR", 30*time.Second, func() bool { return len(state(t, c, topic, 0).ISR) == 3 })

			prod := newClient(t, c.Addrs(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
			cons := newClient(t, c.Addrs(), kgo.ConsumeTopics(topic), kgo.Rack(rack), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// next produces one record with acks=all and returns how long
			// after the produce was sent the consumer got it.
			next := func(v string) time.Duration {
				t.Helper()
				start := time.Now()
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				for {
					fs := cons.PollFetches(ctx)
					if err := ctx.Err(); err != nil {
						t.Fatalf("record %q not consumed: %v", v, err)
					}
					got := ""
					fs.EachRecord(func(r *kgo.Record) { got = string(r.Value) })
					if got == v {
						return time.Since(start)
					}
					if got != "" {
						t.Fatalf("consumed %q, want %q", got, v)
					}
				}
			}
			// The first record moves the consumer to its zone's follower
			// (the leader answers with PreferredReadReplica) and the
			// follower to ask for HWM wakes; its latency is not checked.
			next("warm-up")
			before := served.Server().Traffic().Bytes(rack, traffic.Consume, traffic.Out)
			wakes := counter(t, leader, "strata_replica_fetch_hwm_wakes_total")
			for i := range 3 {
				d := next(fmt.Sprintf("record-%d", i))
				t.Logf("record %d: produce to rack consumer %v", i, d.Round(time.Millisecond))
				if d > fetchWait/2 {
					t.Errorf("record %d reached the rack consumer %v after its produce, want well within replica.fetch.wait.max.ms (%v): the follower learned the HWM only with its next replica fetch answer", i, d.Round(time.Millisecond), fetchWait)
				}
			}
			if b := served.Server().Traffic().Bytes(rack, traffic.Consume, traffic.Out) - before; b == 0 {
				t.Fatalf("the zone-%s follower served no consume bytes: the consumer did not read from it", rack)
			}
			if got := counter(t, leader, "strata_replica_fetch_hwm_wakes_total") - wakes; got == 0 {
				t.Error("the leader counted no replica fetch answered for an HWM move")
			}
		})
	}
}
