package compat

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/brokertest"
)

// runCompaction: the client produces three rounds over the same 500 keys
// to a compacted topic (one partition, small segments), the broker's log
// cleaner compacts it, and a group member of the client reading from the
// start gets every key, each last seen in the last round, and far fewer
// records than were produced (offsets with gaps, increasing).
func runCompaction(t *testing.T, c client) {
	t.Logf("client: %s", c.version(t))
	const keys, rounds = 500, 3
	b := brokertest.Start(t, brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"),
		brokertest.WithSetting("log.cleaner.backoff.ms", "50"))
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	compact, seg, ratio := "compact", "1048576", "0.01" // segments hold one default-sized batch
	if resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact, "segment.bytes": &seg, "min.cleanable.dirty.ratio": &ratio}, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}
	var part *broker.Partition
	waitUntil(t, "the broker to host the topic's partition", time.Minute, func() (bool, string) {
		p, err := b.Server().Broker().Partition(topic, 0)
		part = p
		return err == nil, fmt.Sprint(err)
	})
	var lastRound int64 // the offset the last round starts at
	for r := range rounds {
		recs := make([]record, perRound)
		for i := range recs {
			recs[i] = record{fmt.Sprintf("key-%03d", i%keys), fmt.Sprintf("round-%d-%05d-%s", r, i, noise(r*perRound+i))}
		}
		lastRound = part.Log.EndOffset()
		c.produce(t, b.Addr(), recs)
	}
	// The client produced with acks=all: once produce returned, every
	// record is in the log (retries may have added duplicates). The end
	// offset is read here, not after the cleaner ran: with a client that
	// returned before the broker appended (kafka-go's default acks=0),
	// the test read it while the log still grew and missed the last round.
	end := part.Log.EndOffset()
	if end < rounds*perRound {
		t.Fatalf("log end offset %d once the acks=all produce of %d records returned", end, rounds*perRound)
	}
	waitUntil(t, "the log cleaner to compact the topic", 2*time.Minute, func() (bool, string) {
		ratio, due := part.Log.DirtyRatio(math.MaxInt64)
		runs := cleanerRuns(t, b)
		return !due && runs > 0, fmt.Sprintf("dirty ratio %.2f, %v cleaner runs", ratio, runs)
	})

	ch := make(chan consumed, 1024)
	last := map[string]int64{}
	n, prev := 0, int64(-1)
	m := c.startMember(t, b.Addr(), "member-a", ch)
	for prev < end-1 {
		select {
		case got := <-ch:
			if got.offset <= prev {
				t.Fatalf("offset %d after %d", got.offset, prev)
			}
			prev, n = got.offset, n+1
			last[got.key] = got.offset
		case <-ctx.Done():
			t.Fatalf("consumed up to offset %d of %d", prev, end)
		}
	}
	m.stop(t)
	if len(last) != keys {
		t.Fatalf("%d keys consumed, want %d", len(last), keys)
	}
	for k, off := range last {
		if off < lastRound {
			t.Fatalf("key %s last seen at offset %d, before the last round", k, off)
		}
	}
	if n >= rounds*perRound/2 {
		t.Fatalf("consumed %d records of %d produced: not compacted", n, rounds*perRound)
	}
	t.Logf("consumed %d of %d records", n, rounds*perRound)
}

// noise is 300 characters that compress poorly, so that the rounds fill
// several 1 MiB segments whatever codec the client picks.
func noise(seed int) string {
	rnd := rand.New(rand.NewPCG(uint64(seed), 17))
	buf := make([]byte, 225)
	for i := range buf {
		buf[i] = byte(rnd.Uint32())
	}
	return base64.StdEncoding.EncodeToString(buf)
}

func cleanerRuns(t *testing.T, b *brokertest.Broker) float64 {
	mfs, err := b.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "strata_log_cleaner_runs_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

func TestFranzGoCompaction(t *testing.T)              { runCompaction(t, franzGo{}) }
func TestKcatCompaction(t *testing.T)                 { runCompaction(t, kcat{}) }
func TestConfluentKafkaPythonCompaction(t *testing.T) { runCompaction(t, python{"confluent"}) }
func TestKafkaPythonCompaction(t *testing.T)          { runCompaction(t, python{"kafkapython"}) }
func TestSaramaCompaction(t *testing.T)               { runCompaction(t, saramaClient{}) }
func TestKafkaGoCompaction(t *testing.T)              { runCompaction(t, kafkaGo{}) }
