package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/strata-dev/strata/broker/log"
)

// CleanerConfig is the log cleaner's broker configuration (Kafka's
// log.cleaner.* keys).
type CleanerConfig struct {
	// Disabled is log.cleaner.enable=false: compacted topics are then not
	// cleaned (Kafka's default is enabled).
	Disabled bool
	// Threads is log.cleaner.threads (default 1): how many logs are
	// cleaned at once.
	Threads int
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second, the
	// bytes read plus written per second over all threads; <= 0 or +Inf:
	// unlimited (Kafka's default).
	IOMaxBytesPerSecond float64
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size (default 128 MiB)
	// over all threads; each key takes 24 bytes of it, as in Kafka.
	DedupeBufferSize int64
	// Backoff is log.cleaner.backoff.ms (default 15 s): the pause when no
	// log is due.
	Backoff time.Duration
}

// DefaultCleanerConfig returns Kafka's defaults.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{Threads: 1, DedupeBufferSize: 128 << 20, Backoff: 15 * time.Second}
}

// cleanerEntryBytes is what one key of the offset map counts against
// log.cleaner.dedupe.buffer.size (Kafka: a 16-byte MD5 and an 8-byte offset).
const cleanerEntryBytes = 24

// CleanerStats are the log cleaner's counters since start.
type CleanerStats struct {
	Runs, BytesRead, BytesWritten int64
	// MaxDirtyRatio is the largest dirty ratio of a compacted log seen by
	// the last selection round.
	MaxDirtyRatio float64
	// Seconds is the time spent cleaning.
	Seconds float64
}

// LogCleaner runs Kafka's log cleaner over the broker's compacted
// partitions: each round picks the due log with the highest dirty ratio
// below its high watermark (log.Log.DirtyRatio) and cleans it.
type LogCleaner struct {
	b       *Broker
	cfg     CleanerConfig
	limiter *rate.Limiter

	mu       sync.Mutex
	busy     map[*log.Log]bool
	runs     atomic.Int64
	read     atomic.Int64
	written  atomic.Int64
	nanos    atomic.Int64
	maxDirty atomic.Uint64 // float64 bits
}

// NewLogCleaner returns a cleaner of b's logs; Run starts it.
func NewLogCleaner(b *Broker, cfg CleanerConfig) *LogCleaner {
	def := DefaultCleanerConfig()
	if cfg.Threads <= 0 {
		cfg.Threads = def.Threads
	}
	if cfg.DedupeBufferSize <= 0 {
		cfg.DedupeBufferSize = def.DedupeBufferSize
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = def.Backoff
	}
	c := &LogCleaner{b: b, cfg: cfg, busy: map[*log.Log]bool{}}
	if r := cfg.IOMaxBytesPerSecond; r > 0 && !math.IsInf(r, 1) {
		// A burst of one second's worth (at least 64 KiB) so that a
		// segment's reads pass in few waits.
		c.limiter = rate.NewLimiter(rate.Limit(r), int(min(max(r, 64<<10), math.MaxInt32)))
	}
	return c
}

// Stats returns the counters.
func (c *LogCleaner) Stats() CleanerStats {
	return CleanerStats{
		Runs: c.runs.Load(), BytesRead: c.read.Load(), BytesWritten: c.written.Load(),
		MaxDirtyRatio: math.Float64frombits(c.maxDirty.Load()),
		Seconds:       time.Duration(c.nanos.Load()).Seconds(),
	}
}

// Run cleans until ctx ends, with cfg.Threads goroutines. A disabled
// cleaner returns at once.
func (c *LogCleaner) Run(ctx context.Context) {
	if c.cfg.Disabled {
		return
	}
	var wg sync.WaitGroup
	for range c.cfg.Threads {
		wg.Go(func() {
			for {
				cleaned, err := c.CleanOnce(ctx)
				if err != nil && ctx.Err() == nil {
					c.b.log.Error(err, "log cleaner")
				}
				if cleaned && err == nil {
					continue
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(c.cfg.Backoff):
				}
			}
		})
	}
	wg.Wait()
}

// CleanOnce cleans the dirtiest due log, if any, and reports whether it
// cleaned one.
func (c *LogCleaner) CleanOnce(ctx context.Context) (bool, error) {
	p, l, limit := c.pick()
	if l == nil {
		return false, nil
	}
	defer func() {
		c.mu.Lock()
		delete(c.busy, l)
		c.mu.Unlock()
	}()
	start := time.Now()
	st, err := l.Clean(ctx, log.CleanOptions{
		Limit:         limit,
		MaxMapEntries: int(min(c.cfg.DedupeBufferSize/int64(c.cfg.Threads)/cleanerEntryBytes, math.MaxInt32)),
		Limiter:       c.limiter,
	})
	c.nanos.Add(int64(time.Since(start)))
	c.read.Add(st.BytesRead)
	c.written.Add(st.BytesWritten)
	if st.Cleaned {
		c.runs.Add(1)
		c.b.log.V(1).Info("cleaned log", "topic", p.Topic, "partition", p.Index, "dirtyRatio", st.DirtyRatio,
			"bytesRead", st.BytesRead, "bytesWritten", st.BytesWritten, "recordsRead", st.RecordsRead, "recordsKept", st.RecordsKept)
	}
	if err != nil {
		if errors.Is(err, log.ErrClosed) || ctx.Err() != nil {
			return false, nil // deleted or shut down meanwhile
		}
		return false, fmt.Errorf("clean %s-%d: %w", p.Topic, p.Index, err)
	}
	return st.Cleaned, nil
}

// pick returns the due log with the highest dirty ratio (marked busy) and
// its cleaning limit, the high watermark.
func (c *LogCleaner) pick() (*Partition, *log.Log, int64) {
	var best *Partition
	var bestLimit int64
	bestRatio, maxRatio := -1.0, 0.0
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.b.AllPartitions() {
		if c.busy[p.Log] {
			continue
		}
		limit := int64(math.MaxInt64)
		if p.Replica != nil {
			// Above the high watermark a follower may still truncate.
			limit = p.Replica.HighWatermark()
		}
		r, due := p.Log.DirtyRatio(limit)
		maxRatio = max(maxRatio, r)
		if due && r > bestRatio {
			best, bestLimit, bestRatio = p, limit, r
		}
	}
	c.maxDirty.Store(math.Float64bits(maxRatio))
	if best == nil {
		return nil, nil, 0
	}
	c.busy[best.Log] = true
	return best, best.Log, bestLimit
}
