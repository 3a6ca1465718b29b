package replication

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

var kills = flag.Int("failover.kills", 3, "leader SIGKILLs in TestFailoverNoAcknowledgedLoss")

func TestMain(m *testing.M) {
	flag.Parse()
	brokertest.Main(m)
}

// TestFailoverNoAcknowledgedLoss produces with acks=all (idempotence off)
// while the partition leader's process is killed with SIGKILL several
// times. Afterwards every acknowledged record is read back at the offset
// its acknowledgement gave, and the replicas' logs are byte-identical up to
// the high watermark (a returning old leader truncated its unacknowledged
// tail).
func TestFailoverNoAcknowledgedLoss(t *testing.T) { runFailover(t, false, *kills) }

// TestFailoverIdempotent is the same with an idempotent producer (the
// client default) and two kills: retries that reach a new leader are
// recognised by the producer state it rebuilt as a follower, so every
// record is in the log exactly once.
func TestFailoverIdempotent(t *testing.T) { runFailover(t, true, 2) }

func runFailover(t *testing.T, idempotent bool, kills int) {
	c := brokertest.StartProcessCluster(t, zones,
		brokertest.WithSetting("replica.lag.time.max.ms", "3000"),
		brokertest.WithSetting("unclean.leader.election.enable", "false"))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two := "2"
	createTopic(t, adm, "durable", 1, map[string]*string{"min.insync.replicas": &two})

	popts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(3 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}
	if !idempotent {
		popts = append(popts, kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(5*time.Second))
	}
	prod := newClient(t, c.Addrs(), popts...)
	producer := startAckProducer(prod, "durable", "rec", true)
	for k := range kills {
		producer.waitMore(t, "progress before the next kill", 200)
		old, _ := leaderOf(adm, "durable")
		if old < 1 {
			t.Fatalf("kill %d: no leader", k)
		}
		c.Processes[old-1].Kill()
		waitFor(t, "a new leader", 60*time.Second, func() bool { l, _ := leaderOf(adm, "durable"); return l >= 1 && l != old })
		c.Processes[old-1].Start()
		waitFor(t, "the killed broker back in the ISR", 60*time.Second, func() bool {
			_, isr := leaderOf(adm, "durable")
			return slices.Contains(isr, old) && len(isr) == 3
		})
		t.Logf("kill %d: leader %d killed, %d records acknowledged so far", k+1, old, producer.count())
	}
	producer.waitMore(t, "progress after the last kill", 100)
	acked, fails := producer.finish()

	hwm := highWatermark(t, adm, "durable")
	byOffset := checkAcknowledged(t, c.Addrs(), "durable", hwm, acked)
	t.Logf("%d leader kills: %d records acknowledged (%d produce errors), high watermark %d, every acknowledged record read back at its offset",
		kills, len(acked), fails, hwm)

	if idempotent {
		seen := map[string]int64{}
		for off, v := range byOffset {
			if prev, dup := seen[v]; dup {
				t.Fatalf("%q is in the log twice (offsets %d and %d) despite idempotence", v, prev, off)
			}
			seen[v] = off
		}
	}
	truncations := 0
	for _, p := range c.Processes {
		truncations += strings.Count(p.Logs(), "truncated to the leader's divergence point")
	}
	t.Logf("returning replicas truncated to a divergence point %d times", truncations)

	// Stop every broker cleanly, then compare the replicas' logs.
	stopAndCompareLogs(t, c, "durable-0", hwm)
}
