package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

// Helpers shared by the process-level failover tests (failover_test.go,
// wal_failover_test.go).

// ackedRecord is one acknowledged record: the offset its acknowledgement
// gave and its value.
type ackedRecord struct {
	offset int64
	value  string
}

// ackProducer produces records "<prefix>-<n>" until stopped and records
// every acknowledged one with its offset. Sync: one record at a time, each
// waiting for its acknowledgement; otherwise as fast as the client's
// buffer allows (batches of many records per request).
type ackProducer struct {
	stop     func()
	wg       sync.WaitGroup
	inflight sync.WaitGroup

	mu       sync.Mutex
	acked    []ackedRecord
	fails    int
	firstErr error
}

func startAckProducer(cl *kgo.Client, topic, prefix string, sync bool) *ackProducer {
	ctx, stop := context.WithCancel(context.Background())
	p := &ackProducer{stop: stop}
	done := func(r *kgo.Record, err error) {
		p.mu.Lock()
		switch {
		case err == nil:
			p.acked = append(p.acked, ackedRecord{r.Offset, string(r.Value)})
		case !errors.Is(err, context.Canceled):
			p.fails++ // not the records cut off by the stop
			if p.firstErr == nil {
				p.firstErr = err
			}
		}
		p.mu.Unlock()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s-%06d", prefix, i))}
			if sync {
				done(r, cl.ProduceSync(ctx, r).FirstErr())
				continue
			}
			p.inflight.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer p.inflight.Done()
				done(r, err)
			})
		}
	}()
	return p
}

// count is the number of records acknowledged so far.
func (p *ackProducer) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.acked) }

// waitMore waits until n more records than now are acknowledged.
func (p *ackProducer) waitMore(t *testing.T, what string, n int) {
	t.Helper()
	base := p.count()
	waitFor(t, fmt.Sprintf("%d more acknowledged records (%s)", n, what), 60*time.Second, func() bool { return p.count() >= base+n })
}

// errors describes the produce errors.
func (p *ackProducer) errors() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fails == 0 {
		return "no produce errors"
	}
	return fmt.Sprintf("%d produce errors, the first: %v", p.fails, p.firstErr)
}

// finish stops producing and returns the acknowledged records and the
// number of produce errors.
func (p *ackProducer) finish() ([]ackedRecord, int) {
	p.stop()
	p.wg.Wait()
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ackedRecord(nil), p.acked...), p.fails
}

// partitionLeader asks the brokers (in order, each for at most 2 s) for
// partition 0 of topic and returns the first answer's leader and ISR;
// -1 when none answered with a leader. Asking named brokers keeps a
// paused broker from stalling the question.
func partitionLeader(cl *kgo.Client, topic string, brokers ...int32) (int32, []int32) {
	for _, b := range brokers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b)))
		cancel()
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
			continue
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Partition == 0 && p.ErrorCode == 0 && p.Leader >= 0 {
				return p.Leader, p.ISR
			}
		}
	}
	return -1, nil
}

// leaderOf is partitionLeader through any broker (kadm picks one).
func leaderOf(adm *kadm.Client, topic string) (int32, []int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, nil
	}
	p, ok := md.Topics[topic].Partitions[0]
	if !ok || p.Err != nil {
		return -1, nil
	}
	return p.Leader, p.ISR
}

// highWatermark is partition 0's high watermark.
func highWatermark(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-0: %v", topic, o.Err)
	}
	return o.Offset
}

// checkAcknowledged reads partition 0 of topic from the start up to hwm
// and checks that every offset below it holds a record (no gaps) and that
// every acknowledged record is at the offset its acknowledgement gave. It
// returns the values by offset.
func checkAcknowledged(t *testing.T, addrs []string, topic string, hwm int64, acked []ackedRecord) map[int64]string {
	t.Helper()
	cons := newClient(t, addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	byOffset := map[int64]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for int64(len(byOffset)) < hwm {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(byOffset), hwm)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < hwm {
				byOffset[r.Offset] = string(r.Value)
			}
		})
	}
	for off := range hwm {
		if _, ok := byOffset[off]; !ok {
			t.Fatalf("offset %d below the high watermark %d holds no record", off, hwm)
		}
	}
	for _, a := range acked {
		if got, ok := byOffset[a.offset]; !ok || got != a.value {
			t.Fatalf("acknowledged %q at offset %d, read %q (present %v)", a.value, a.offset, got, ok)
		}
	}
	return byOffset
}

// stopAndCompareLogs stops every broker process cleanly, then reads each
// replica's log of partition dir (e.g. "durable-0") up to hwm from its
// data directory and checks that they are byte-identical. It returns the
// common log bytes.
func stopAndCompareLogs(t *testing.T, c *brokertest.Cluster, dir string, hwm int64) []byte {
	t.Helper()
	for _, p := range c.Processes {
		p.Stop()
	}
	var logs [][]byte
	for _, p := range c.Processes {
		logs = append(logs, readLog(t, filepath.Join(p.Dir(), dir), hwm))
	}
	for i := 1; i < len(logs); i++ {
		if !bytes.Equal(logs[0], logs[i]) {
			t.Fatalf("replica %d's log differs from replica 1's up to the high watermark %d (%d vs %d bytes)", i+1, hwm, len(logs[i]), len(logs[0]))
		}
	}
	return logs[0]
}

// readLog reads a stopped replica's log in dir from its start up to upTo.
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

// batchesByOffset splits log bytes into batches keyed by base offset.
func batchesByOffset(t *testing.T, b []byte) map[int64]record.Batch {
	t.Helper()
	batches, _, err := record.Split(b)
	if err != nil {
		t.Fatalf("split log: %v", err)
	}
	out := map[int64]record.Batch{}
	for _, x := range batches {
		out[x.BaseOffset()] = x
	}
	return out
}
