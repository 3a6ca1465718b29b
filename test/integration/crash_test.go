package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

// TestCrashDuringProduce kills the broker with SIGKILL in the middle of an
// acks=1 produce stream and restarts it on the same data directory.
//
// The broker runs with log.flush.interval.ms=0: every append is fsynced
// before it is acknowledged. The claim checked: every record acknowledged
// (acks=1) before the kill is readable after the restart at the offset the
// acknowledgement gave; the log is exactly seq 0..N-1 at offsets 0..N-1 (no
// gap, no duplicate, nothing reordered), N >= the number acknowledged; and
// a torn batch that the test appends to the active segment after the kill
// (a write cut short by a crash) is truncated on recovery, leaving the
// segment at its pre-tear size and the log writable at the right offset.
//
// SIGKILL keeps the page cache, so this test proves the acknowledgement
// ordering and recovery, not fsync itself (that needs power loss; the log
// package tests its fsync policy with a fault-injecting file system).
func TestCrashDuringProduce(t *testing.T) {
	const topic = "crash"
	p := brokertest.StartProcess(t, brokertest.WithSetting("log.flush.interval.ms", "0"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	adminCl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adminCl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	adminCl.Close()

	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.RecordRetries(0), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[int]int64{} // seq -> offset
	)
	const killAfter = 3000
	killed := make(chan struct{})
	var killOnce sync.Once
	produced := 0
	var wg sync.WaitGroup
	// Keep producing until the kill is observed; the kill happens from the
	// promise of the killAfter-th acknowledgement, mid-stream.
	for seq := 0; ; seq++ {
		select {
		case <-killed:
		default:
			wg.Add(1)
			produced++
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("seq-%08d", seq))}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					return
				}
				mu.Lock()
				acked[seq] = r.Offset
				n := len(acked)
				mu.Unlock()
				if n == killAfter {
					killOnce.Do(func() {
						p.Kill()
						close(killed)
					})
				}
			})
			continue
		}
		break
	}
	// Unacknowledged records fail once their connection is gone.
	prod.Close()
	wg.Wait()
	t.Logf("produced %d records, %d acknowledged before the kill", produced, len(acked))
	if len(acked) < killAfter {
		t.Fatalf("only %d acknowledged", len(acked))
	}

	// Tear the tail: append the first half of a real batch to the active
	// segment, as a crash in the middle of a write would leave it.
	segs, _ := filepath.Glob(filepath.Join(p.Dir(), topic+"-0", "*.log"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatalf("no segment files in %s", filepath.Join(p.Dir(), topic+"-0"))
	}
	active := segs[len(segs)-1]
	st, err := os.Stat(active)
	if err != nil {
		t.Fatal(err)
	}
	sizeBeforeTear := st.Size()
	torn := tornBatch(t)
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	p.Start()

	st, err = os.Stat(active)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != sizeBeforeTear {
		t.Fatalf("active segment is %d bytes after recovery, want %d (torn tail of %d bytes not truncated)", st.Size(), sizeBeforeTear, len(torn))
	}
	// The subprocess's output reaches Logs through a copying goroutine,
	// possibly after Start saw the port answer: wait for the line.
	for deadline := time.Now().Add(10 * time.Second); !bytes.Contains([]byte(p.Logs()), []byte("torn")); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("recovery did not log the torn tail truncation")
			break
		}
	}

	// Read everything back.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Offset < int64(len(acked)) {
		t.Fatalf("end offset %d after restart, but %d records were acknowledged", end.Offset, len(acked))
	}
	var got []*kgo.Record
	for int64(len(got)) < end.Offset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(got), end.Offset, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if want := fmt.Sprintf("seq-%08d", i); r.Offset != int64(i) || string(r.Value) != want {
			t.Fatalf("offset %d holds %q at offset %d, want %q: gap, duplicate or reorder", i, r.Value, r.Offset, want)
		}
	}
	for seq, off := range acked {
		if off != int64(seq) {
			t.Fatalf("seq %d was acknowledged at offset %d", seq, off)
		}
	}
	t.Logf("after restart: %d records in the log (%d acknowledged, %d appended but unacknowledged)", end.Offset, len(acked), end.Offset-int64(len(acked)))

	// The recovered log continues at the right offset.
	prod2, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod2.Close()
	res := prod2.ProduceSync(ctx, &kgo.Record{Value: []byte("after-restart")})
	if r, err := res.First(); err != nil || r.Offset != end.Offset {
		t.Fatalf("produce after restart: offset %v, err %v; want offset %d", r, err, end.Offset)
	}
}

// tornBatch returns the first half of a valid record batch.
func tornBatch(t *testing.T) []byte {
	t.Helper()
	recs := make([]record.Record, 20)
	for i := range recs {
		recs[i] = record.Record{Value: []byte(fmt.Sprintf("torn-%02d", i))}
	}
	full, err := record.Build(record.DefaultSpec(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return full[:len(full)/2]
}
