package log

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.FlushInterval = -1
	// Test batches carry small timestamps; segment.ms counts from them (as
	// in Kafka), so keep age-based rolls out of tests that do not want them.
	cfg.SegmentMs = 100 * 365 * 24 * time.Hour
	cfg.RetentionMs = -1
	return cfg
}

// batch builds a validated batch of n records of valueSize bytes with
// timestamps ts, ts+1, ...
func batch(t testing.TB, n, valueSize int, ts int64) record.Batch {
	t.Helper()
	return batchCodec(t, record.None, n, valueSize, ts)
}

func batchCodec(t testing.TB, c record.Codec, n, valueSize int, ts int64) record.Batch {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampDelta: int64(i), Value: bytes.Repeat([]byte{'v'}, valueSize), Key: []byte(fmt.Sprint(i))}
	}
	spec := record.DefaultSpec()
	spec.Codec, spec.BaseTimestamp = c, ts
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openLog(t testing.TB, dir string, cfg Config, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, cfg, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, bs ...record.Batch) AppendResult {
	t.Helper()
	res, err := l.AppendAsLeader(bs, 1)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// readAll reads every batch from start to end and returns their headers,
// checking contiguity and CRCs.
func readAll(t testing.TB, l *Log) []record.Header {
	t.Helper()
	var out []record.Header
	next := l.StartOffset()
	end := l.EndOffset()
	for next < end {
		res, err := l.Read(next, 1000, end)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("empty read at %d below end %d", next, end)
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		for _, b := range bs {
			h := b.Header()
			if h.LastOffset() < next {
				t.Fatalf("batch %d..%d returned for offset %d", h.BaseOffset, h.LastOffset(), next)
			}
			out = append(out, h)
			next = h.LastOffset() + 1
		}
		if res.HighestOffset != next-1 {
			t.Fatalf("HighestOffset %d, want %d", res.HighestOffset, next-1)
		}
	}
	return out
}

// splitStored splits stored batches (offsets stamped) checking CRCs.
func splitStored(b []byte) ([]record.Batch, error) {
	var out []record.Batch
	for len(b) > 0 {
		n, err := record.CheckFrame(b)
		if err != nil {
			return nil, err
		}
		out = append(out, record.Batch(b[:n]))
		b = b[n:]
	}
	return out, nil
}
