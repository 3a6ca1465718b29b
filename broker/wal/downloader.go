package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
)

// ErrObjectMissing means a pointer's object is gone (deleted or expired).
var ErrObjectMissing = errors.New("wal: object missing")

// ErrBadPointer means a pointer cannot be valid (empty or negative range,
// offsets out of order); nothing is fetched for it.
var ErrBadPointer = errors.New("wal: invalid pointer")

// ErrDownloadTimeout means a range was not downloaded within the
// download budget (DownloaderConfig.Timeout, wal.download.timeout.ms):
// the GET was abandoned and the follower fetches the range inline.
var ErrDownloadTimeout = errors.New("wal: download budget exceeded")

// ErrBucketBackoff means a range was not downloaded because its bucket
// timed out recently: the downloader backs off from it (no GET) and the
// follower fetches the range inline until the back-off ends.
var ErrBucketBackoff = errors.New("wal: bucket backing off after a download timeout")

// Defaults of the back-off from a bucket whose GETs time out.
const (
	DefaultTimeoutBackoff    = time.Second
	DefaultMaxTimeoutBackoff = 30 * time.Second
)

// RangeError is the failure of exactly one pointer's range; the follower
// fetches those offsets inline from the leader instead.
type RangeError struct {
	Pointer Pointer
	Err     error
}

func (e *RangeError) Error() string { return fmt.Sprintf("wal: fetch %v: %v", e.Pointer, e.Err) }

func (e *RangeError) Unwrap() error { return e.Err }

// DownloaderConfig configures a Downloader.
type DownloaderConfig struct {
	// Store returns the store of a bucket named in a pointer.
	Store func(bucket string) (objstore.Store, error)
	// MaxConcurrency bounds parallel GETs (default 4).
	MaxConcurrency int
	// MaxMergeGap merges ranges of one object separated by at most this
	// many bytes into one GET (default 0: only adjacent ranges).
	MaxMergeGap int64
	// Timeout is the budget of one Fetch call (wal.download.timeout.ms;
	// 0: none). GETs still running when it ends are abandoned and their
	// ranges fail with ErrDownloadTimeout, so a hanging or slow bucket
	// delays a follower's fetch round by at most this much instead of the
	// store's call timeout (several seconds, during which every partition
	// fetched from that leader stalls).
	Timeout time.Duration
	// HedgeAfter: a GET that has not answered after this long gets a
	// twin (the same range again) and the first good answer wins, the
	// other is cancelled: an object store's slow tail (a request stuck
	// behind others, a slow node) costs a follower — and with it every
	// acks=all produce — one hedge delay instead of the whole tail, for
	// the price of a GET (3 % of a PUT) now and then. 0: adaptive, three
	// times the average of recent GETs (at least MinHedgeDelay; 100 ms
	// before the first); < 0: never.
	HedgeAfter time.Duration
	// TimeoutBackoff is how long the downloader stays off a bucket after
	// a round in which one of its GETs ran out of the budget (default
	// DefaultTimeoutBackoff), doubled per consecutive such round up to
	// MaxTimeoutBackoff (default DefaultMaxTimeoutBackoff): a bucket
	// whose GETs hang costs a follower the budget once per back-off, not
	// on every fetch round. Meanwhile its ranges fail at once with
	// ErrBucketBackoff (inline), and Backoff tells the follower not to
	// ask for pointers; the first round after it probes the bucket
	// again, and one that downloads without a timeout ends the back-off.
	TimeoutBackoff, MaxTimeoutBackoff time.Duration
	// Clock is the back-off's clock (default time.Now; tests).
	Clock func() time.Time
}

// MinHedgeDelay bounds the adaptive hedge delay from below: on a fast
// store, twins of GETs that are merely a little slow would double the
// requests for nothing.
const MinHedgeDelay = 5 * time.Millisecond

// Downloader fetches the ranges pointers name, verifies them and returns
// their record batches. Safe for concurrent use.
type Downloader struct {
	cfg      DownloaderConfig
	gets     atomic.Int64
	timeouts atomic.Int64
	hedges   atomic.Int64
	// getAvg: successful GET durations, for the adaptive hedge delay.
	getAvg hedgeAvg
	// backoffs are the buckets being backed off from, guarded by mu.
	mu       sync.Mutex
	backoffs map[string]*bucketBackoff
}

// bucketBackoff is the back-off state of one bucket: consecutive rounds
// that timed out and until when no GET goes to it.
type bucketBackoff struct {
	rounds int
	until  time.Time
}

// Backoff reports whether the downloader is backing off from bucket (its
// GETs timed out recently): the follower fetches inline meanwhile.
func (d *Downloader) Backoff(bucket string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.backoffs[bucket]
	return b != nil && d.cfg.Clock().Before(b.until)
}

// noteRound records a bucket's outcome in one Fetch: timedOut when one
// of its GETs ran out of the budget, else (some GET answered) healthy.
func (d *Downloader) noteRound(bucket string, timedOut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !timedOut {
		delete(d.backoffs, bucket)
		return
	}
	b := d.backoffs[bucket]
	if b == nil {
		b = &bucketBackoff{}
		d.backoffs[bucket] = b
	}
	b.rounds++
	wait := min(d.cfg.TimeoutBackoff<<min(b.rounds-1, 16), d.cfg.MaxTimeoutBackoff)
	b.until = d.cfg.Clock().Add(wait)
}

// DownloaderStats counts a Downloader's GETs.
type DownloaderStats struct {
	// Gets is the number of GETs started (hedges included); TimedOut
	// those abandoned at the download budget; Hedged the GETs that got a
	// twin after HedgeAfter.
	Gets, TimedOut, Hedged int64
}

// Stats returns the downloader's counters.
func (d *Downloader) Stats() DownloaderStats {
	return DownloaderStats{Gets: d.gets.Load(), TimedOut: d.timeouts.Load(), Hedged: d.hedges.Load()}
}

// hedgeDelay is how long a GET may take before it gets a twin (<= 0:
// never).
func (d *Downloader) hedgeDelay() time.Duration {
	return d.getAvg.delay(d.cfg.HedgeAfter, MinHedgeDelay)
}

// observeGet feeds a successful GET's duration to the average.
func (d *Downloader) observeGet(took time.Duration) { d.getAvg.observe(took) }

// get runs one ranged GET, hedged (HedgeAfter). The first GET runs on
// the caller's goroutine (its stack is already grown to the SDK's
// depth); a twin runs on the timer's goroutine only when it is due.
func (d *Downloader) get(ctx context.Context, store objstore.Store, key string, off, n int64) ([]byte, error) {
	delay := d.hedgeDelay()
	start := time.Now()
	if delay <= 0 {
		data, err := store.Get(ctx, key, off, n)
		if err == nil {
			d.observeGet(time.Since(start))
		}
		return data, err
	}
	pctx, cancelPrimary := context.WithCancel(ctx)
	defer cancelPrimary()
	hctx, cancelHedge := context.WithCancel(ctx)
	defer cancelHedge()
	var hedgeData []byte
	var hedgeErr error
	hedgeDone := make(chan struct{})
	timer := time.AfterFunc(delay, func() {
		defer close(hedgeDone)
		d.hedges.Add(1)
		d.gets.Add(1)
		hedgeData, hedgeErr = store.Get(hctx, key, off, n)
		if hedgeErr == nil {
			cancelPrimary() // the twin won
		}
	})
	data, err := store.Get(pctx, key, off, n)
	if timer.Stop() {
		// Answered before the hedge delay: no twin.
		if err == nil {
			d.observeGet(time.Since(start))
		}
		return data, err
	}
	if err == nil {
		cancelHedge()
		<-hedgeDone
		d.observeGet(time.Since(start))
		return data, nil
	}
	<-hedgeDone
	if hedgeErr == nil {
		d.observeGet(time.Since(start))
		return hedgeData, nil
	}
	return nil, err
}

// errBudget is the cause of a Fetch context whose budget ran out.
var errBudget = errors.New("download budget")

// NewDownloader returns a Downloader.
func NewDownloader(cfg DownloaderConfig) *Downloader {
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 4
	}
	if cfg.TimeoutBackoff <= 0 {
		cfg.TimeoutBackoff = DefaultTimeoutBackoff
	}
	if cfg.MaxTimeoutBackoff <= 0 {
		cfg.MaxTimeoutBackoff = DefaultMaxTimeoutBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Downloader{cfg: cfg, backoffs: map[string]*bucketBackoff{}}
}

// Fetched is one pointer's outcome: its verified batches, or a
// *RangeError. Batches are never returned from a range that failed a
// check.
type Fetched struct {
	Pointer Pointer
	Batches []record.Batch
	// Data is the verified range itself, Batches back to back: a slice
	// of the GET's buffer (its capacity ends with the range, so an
	// append copies instead of writing over the next range).
	Data []byte
	Err  error
}

// getRange is one GET: a run of pointers into one object.
type getRange struct {
	bucket, key string
	start, end  int64
	idx         []int // into the sorted pointers
}

// PlanGets groups pointers into GETs: pointers into the same object whose
// byte ranges touch (or are at most maxGap apart) share one GET. ptrs must
// be sorted by (bucket, key, offset).
func planGets(ptrs []Pointer, maxGap int64) []getRange {
	var out []getRange
	for i, p := range ptrs {
		if n := len(out); n > 0 {
			g := &out[n-1]
			if g.bucket == p.Bucket && g.key == p.Key && p.Offset >= g.start && p.Offset <= g.end+maxGap {
				g.end = max(g.end, p.Offset+p.Length)
				g.idx = append(g.idx, i)
				continue
			}
		}
		out = append(out, getRange{bucket: p.Bucket, key: p.Key, start: p.Offset, end: p.Offset + p.Length, idx: []int{i}})
	}
	return out
}

// Fetch downloads the pointers' ranges and returns one Fetched per
// pointer, ordered by topic, partition and base offset. Each range is
// checked against its CRC-32C (a foreign pointer's, Pointer.Rebase, is
// then rebased: RebaseBatches) and its batches against the pointer
// (record.CheckFrame, contiguous offsets, leader epoch); a range that
// fails gets a *RangeError and no batches, the others are unaffected.
func (d *Downloader) Fetch(ctx context.Context, ptrs []Pointer) []Fetched {
	if d.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d.cfg.Timeout, errBudget)
		defer cancel()
	}
	sorted := append([]Pointer(nil), ptrs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Bucket != b.Bucket {
			return a.Bucket < b.Bucket
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Offset < b.Offset
	})
	out := make([]Fetched, 0, len(sorted))
	valid := sorted[:0]
	for _, p := range sorted {
		if err := p.validate(); err != nil {
			out = append(out, Fetched{Pointer: p, Err: &RangeError{Pointer: p, Err: err}})
			continue
		}
		if d.Backoff(p.Bucket) {
			out = append(out, Fetched{Pointer: p, Err: &RangeError{Pointer: p, Err: fmt.Errorf("%w: %s", ErrBucketBackoff, p.Bucket)}})
			continue
		}
		valid = append(valid, p)
	}
	bad := len(out)
	for _, p := range valid {
		out = append(out, Fetched{Pointer: p})
	}
	gets := planGets(valid, d.cfg.MaxMergeGap)
	sem := make(chan struct{}, d.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for i, g := range gets {
		sem <- struct{}{}
		if i == len(gets)-1 {
			// The last GET (the only one in the common case, one object
			// per answer) runs on the caller's goroutine, whose stack has
			// already grown to the SDK's depth: a fresh goroutine per GET
			// spent ~6 % of a broker's CPU copying stacks, and a round of
			// several objects (saturation) still paid it for every GET.
			d.fetchOne(ctx, g, out[bad:])
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d.fetchOne(ctx, g, out[bad:])
		}()
	}
	wg.Wait()
	if d.cfg.Timeout > 0 {
		d.noteRounds(gets, out[bad:])
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pointer, out[j].Pointer
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.BaseOffset < b.BaseOffset
	})
	return out
}

// noteRounds feeds each bucket's outcome of a Fetch to its back-off: a
// GET that ran out of the budget starts (or lengthens) it, GETs that
// answered (whatever their ranges' checks said) end it; a round cut
// short by the caller says nothing.
func (d *Downloader) noteRounds(gets []getRange, out []Fetched) {
	timedOut, answered := map[string]bool{}, map[string]bool{}
	for _, g := range gets {
		err := out[g.idx[0]].Err
		switch {
		case errors.Is(err, ErrDownloadTimeout):
			timedOut[g.bucket] = true
		case err == nil || errors.Is(err, ErrObjectMissing) || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			answered[g.bucket] = true
		}
	}
	for b := range timedOut {
		d.noteRound(b, true)
	}
	for b := range answered {
		if !timedOut[b] {
			d.noteRound(b, false)
		}
	}
}

func (d *Downloader) fetchOne(ctx context.Context, g getRange, out []Fetched) {
	fail := func(err error) {
		for _, i := range g.idx {
			out[i].Err = &RangeError{Pointer: out[i].Pointer, Err: err}
		}
	}
	if d.cfg.Store == nil {
		fail(errors.New("no store configured"))
		return
	}
	store, err := d.cfg.Store(g.bucket)
	if err != nil {
		fail(err)
		return
	}
	d.gets.Add(1)
	data, err := d.get(ctx, store, g.key, g.start, g.end-g.start)
	switch {
	case err == nil:
	case errors.Is(err, objstore.ErrNotFound):
		err = fmt.Errorf("%w: %w", ErrObjectMissing, err)
	case context.Cause(ctx) == errBudget:
		d.timeouts.Add(1)
		err = fmt.Errorf("%w (%v): %w", ErrDownloadTimeout, d.cfg.Timeout, err)
	}
	if err != nil {
		fail(err)
		return
	}
	for _, i := range g.idx {
		p := out[i].Pointer
		lo, hi := p.Offset-g.start, p.Offset+p.Length-g.start
		if hi > int64(len(data)) {
			out[i].Err = &RangeError{Pointer: p, Err: corrupt(ErrTruncated, int64(len(data))+g.start, -1, "object ends before the range")}
			continue
		}
		c := p.Chunk()
		chunk := data[lo:hi]
		if err := c.Verify(chunk); err != nil {
			out[i].Err = &RangeError{Pointer: p, Err: err}
			continue
		}
		if p.Rebase {
			// A forwarder's object: the CRC just checked is the one of
			// the bytes as forwarded; stamp them as the leader did, then
			// check the batches like any other range's.
			if err := RebaseBatches(chunk, p.BaseOffset, p.LastOffset, p.LeaderEpoch); err != nil {
				out[i].Err = &RangeError{Pointer: p, Err: err}
				continue
			}
		}
		batches, err := SplitBatches(c, chunk)
		if err != nil {
			out[i].Err = &RangeError{Pointer: p, Err: err}
			continue
		}
		out[i].Batches, out[i].Data = batches, chunk[:len(chunk):len(chunk)]
	}
}

func (p Pointer) validate() error {
	switch {
	case p.Offset < 0 || p.Length <= 0 || p.Length > math.MaxUint32 || p.Offset > math.MaxInt64-p.Length:
		return fmt.Errorf("%w: byte range %d+%d", ErrBadPointer, p.Offset, p.Length)
	case p.BaseOffset < 0 || p.LastOffset < p.BaseOffset:
		return fmt.Errorf("%w: offsets [%d,%d]", ErrBadPointer, p.BaseOffset, p.LastOffset)
	case p.Key == "":
		return fmt.Errorf("%w: no object key", ErrBadPointer)
	}
	return nil
}

// DownloaderCollector exports a Downloader's Stats at scrape time.
type DownloaderCollector struct {
	d                      *Downloader
	gets, timeouts, hedges *prometheus.Desc
}

// NewDownloaderCollector returns a collector for d.
func NewDownloaderCollector(d *Downloader) *DownloaderCollector {
	return &DownloaderCollector{
		d:        d,
		gets:     prometheus.NewDesc("strata_wal_download_gets_total", "GETs of WAL object ranges a follower started.", nil, nil),
		timeouts: prometheus.NewDesc("strata_wal_download_timeouts_total", "GETs of WAL object ranges abandoned at the download budget (wal.download.timeout.ms); their ranges were replicated inline.", nil, nil),
		hedges:   prometheus.NewDesc("strata_wal_download_hedges_total", "GETs of WAL object ranges that did not answer within the hedge delay and got a twin GET (the first good answer wins).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DownloaderCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.gets
	ch <- c.timeouts
	ch <- c.hedges
}

// Collect implements prometheus.Collector.
func (c *DownloaderCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	ch <- prometheus.MustNewConstMetric(c.gets, prometheus.CounterValue, float64(s.Gets))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.TimedOut))
	ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(s.Hedged))
}
