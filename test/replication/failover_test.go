package replication

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/log"
)

var kills = flag.Int("failover.kills", 3, "leader SIGKILLs in TestFailoverNoAcknowledgedLoss")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	brokertest.RemoveBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
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
	type ack struct {
		offset int64
		value  string
	}
	var (
		mu    sync.Mutex
		acked []ack
		fails int
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("rec-%06d", i)
			r := &kgo.Record{Topic: "durable", Value: []byte(v)}
			err := prod.ProduceSync(ctx, r).FirstErr()
			mu.Lock()
			if err == nil {
				acked = append(acked, ack{r.Offset, v})
			} else {
				fails++
			}
			mu.Unlock()
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	leaderOf := func() (int32, []int32) {
		mctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(mctx, "durable")
		if err != nil {
			return -1, nil
		}
		p := md.Topics["durable"].Partitions[0]
		return p.Leader, p.ISR
	}
	for k := range kills {
		n := ackedCount()
		waitFor(t, "progress before the next kill", 60*time.Second, func() bool { return ackedCount() >= n+200 })
		old, _ := leaderOf()
		if old < 1 {
			t.Fatalf("kill %d: no leader", k)
		}
		c.Processes[old-1].Kill()
		waitFor(t, "a new leader", 60*time.Second, func() bool { l, _ := leaderOf(); return l >= 1 && l != old })
		c.Processes[old-1].Start()
		waitFor(t, "the killed broker back in the ISR", 60*time.Second, func() bool {
			_, isr := leaderOf()
			return slices.Contains(isr, old) && len(isr) == 3
		})
		t.Logf("kill %d: leader %d killed, %d records acknowledged so far", k+1, old, ackedCount())
	}
	n := ackedCount()
	waitFor(t, "progress after the last kill", 60*time.Second, func() bool { return ackedCount() >= n+100 })
	stop()
	wg.Wait()

	ends, err := adm.ListEndOffsets(context.Background(), "durable")
	if err != nil {
		t.Fatal(err)
	}
	hwm := ends["durable"][0].Offset
	cons := newClient(t, c.Addrs(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"durable": {0: kgo.NewOffset().AtStart()}}))
	byOffset := map[int64]string{}
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for int64(len(byOffset)) < hwm {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(byOffset), hwm)
		}
		fs.EachRecord(func(r *kgo.Record) { byOffset[r.Offset] = string(r.Value) })
	}
	for _, a := range acked {
		if got, ok := byOffset[a.offset]; !ok || got != a.value {
			t.Fatalf("acknowledged %q at offset %d, read %q (present %v)", a.value, a.offset, got, ok)
		}
	}
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
	for _, p := range c.Processes {
		p.Stop()
	}
	var logs [][]byte
	for _, p := range c.Processes {
		logs = append(logs, readLog(t, filepath.Join(p.Dir(), "durable-0"), hwm))
	}
	for i := 1; i < len(logs); i++ {
		if !bytes.Equal(logs[0], logs[i]) {
			t.Fatalf("replica %d's log differs from replica 1's up to the high watermark %d (%d vs %d bytes)", i+1, hwm, len(logs[i]), len(logs[0]))
		}
	}
}

func readLog(t *testing.T, dir string, upTo int64) []byte {
	t.Helper()
	l, err := log.Open(dir, log.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []byte
	for off := l.StartOffset(); off < upTo; {
		rr, err := l.Read(off, 1<<20, upTo)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", dir, off, err)
		}
		if len(rr.Records) == 0 {
			t.Fatalf("%s: log ends at %d, below the high watermark %d", dir, off, upTo)
		}
		out = append(out, rr.Records...)
		off = rr.HighestOffset + 1
	}
	return out
}
