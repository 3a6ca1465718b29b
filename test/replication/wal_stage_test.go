package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/replica"
)

// stageCounts sums strata_wal_stage_seconds's observation counts by stage
// over the brokers.
func stageCounts(t *testing.T, bs []*brokertest.Broker) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, b := range bs {
		mfs, err := b.Server().Metrics().Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "strata_wal_stage_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "stage" {
						out[l.GetValue()] += m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
	}
	return out
}

// TestWALStageBreakdown (issue #18 item 2): an acks=all load with a
// consumer parked at the log end goes through every stage of the WAL
// path, and each broker's strata_wal_stage_seconds has observations for
// every stage, leader side (cut_wait, put, notify, hwm_to_produce,
// hwm_to_consumer_fetch) and follower side (get, follower_append,
// next_fetch).
func TestWALStageBreakdown(t *testing.T) {
	wc := startWALCluster(t)
	c := wc.Cluster
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	const topic, partitions = "wal-stages", 3
	createTopic(t, adm, topic, partitions, nil)
	waitFor(t, "full ISRs", 30*time.Second, func() bool {
		for p := range int32(partitions) {
			if len(state(t, c, topic, p).ISR) != 3 {
				return false
			}
		}
		return true
	})
	if got := stageCounts(t, c.Brokers); len(got) != len(replica.Stages()) {
		t.Fatalf("strata_wal_stage_seconds exports stages %v, want all of %v", got, replica.Stages())
	}

	// A consumer parked at the end of the empty topic: its fetches wake
	// on the HWM moves of the produce below.
	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumed := make(chan int, 1)
	go func() {
		n := 0
		for n < 300 && ctx.Err() == nil {
			n += cons.PollFetches(ctx).NumRecords()
		}
		consumed <- n
	}()
	cl := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	produceAll(t, cl, topic, "stages", 300)
	if n := <-consumed; n < 300 {
		t.Fatalf("consumed %d of 300 records", n)
	}
	got := stageCounts(t, c.Brokers)
	for _, st := range replica.Stages() {
		if got[st] == 0 {
			t.Errorf("stage %s: no observation (all: %v)", st, got)
		}
	}
}
