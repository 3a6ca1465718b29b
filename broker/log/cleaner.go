package log

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/time/rate"

	"github.com/strata-dev/strata/broker/record"
)

// Log compaction (cleanup.policy=compact), Kafka's log cleaner for one log.
//
// The cleanable part of a compacted log is the prefix of sealed segments
// whose offsets are all below the caller's limit (the high watermark) and
// whose newest record is older than MinCompactionLag. It is split at the
// first dirty offset: segments below it were cleaned before, segments
// from it on are dirty. Clean builds a map key -> latest offset over the
// dirty segments (until CleanOptions.MaxMapEntries is reached, at least
// one segment), then rewrites every segment from the log start to where the map
// stopped, keeping a record only when no later record has its key.
// Records keep their offsets: a rewritten batch keeps its base offset and
// last offset delta (record.Rebuild), so offsets have gaps and never move.
// Tombstones (null values) stay until DeleteRetention has passed since the
// cleaner first reached them; records without a key are dropped.
// Transaction markers go in two passes once no data of their transaction
// is left (txnCleaner). A batch
// that is an idempotent producer's last one is kept even when all its
// records go (as an empty batch), so that the producer's sequence checks
// survive. Consecutive segments are merged while their total original
// size stays within SegmentBytes.
//
// Crash safety: a group of segments is written to <base>.log.cleaned (and
// .index.cleaned, .timeindex.cleaned) and fsynced; then, holding the log's
// locks, the commit point is the cleaner-swap file ("<base> <end>", written
// atomically): the .cleaned files are renamed to .swap, the replaced
// segments deleted, the .swap files renamed to their final names and
// cleaner-swap removed. Open finishes a swap whose cleaner-swap file exists
// and otherwise deletes leftover .cleaned and .swap files (the old
// segments are intact then). See recoverCleanerSwap.
//
// The first dirty offset and the tombstone horizons are kept in
// cleaner-offset-checkpoint.

const (
	cleanedSuffix        = ".cleaned"
	swapSuffix           = ".swap"
	cleanerSwapFile      = "cleaner-swap"
	cleanerCheckpoint    = "cleaner-offset-checkpoint"
	cleanerCheckpointVer = "0"
)

// CleanOptions are the broker's cleaner settings for one Clean.
type CleanOptions struct {
	// Limit: only segments whose offsets are all below it are cleaned
	// (the high watermark; math.MaxInt64 on a single broker).
	Limit int64
	// MaxMapEntries bounds the key -> offset map (Kafka sizes it from
	// log.cleaner.dedupe.buffer.size, 24 bytes an entry): no segment is
	// added once the map holds this many keys, and it always takes at
	// least one whole segment (so it can exceed the bound by one
	// segment's new keys). <= 0: unbounded.
	MaxMapEntries int
	// Limiter throttles the bytes read and written
	// (log.cleaner.io.max.bytes.per.second); nil: no limit.
	Limiter *rate.Limiter
	// Force cleans whatever the dirty ratio (tests, tools).
	Force bool
}

// CleanStats describes a Clean.
type CleanStats struct {
	// Cleaned is false when there was nothing to do.
	Cleaned bool
	// DirtyRatio is the dirty share of the cleanable bytes before cleaning.
	DirtyRatio                float64
	BytesRead, BytesWritten   int64
	RecordsRead, RecordsKept  int64
	SegmentsRead, SegmentsOut int
}

// cleanMark says that the cleaner first reached the offsets below end at
// ms (tombstone horizons). Marks are sorted by end and by ms.
type cleanMark struct{ end, ms int64 }

// cleanerState is what the cleaner remembers of a log. Guarded by Log.mu.
type cleanerState struct {
	loaded     bool
	firstDirty int64
	marks      []cleanMark
	// markerHorizon is the earliest delete horizon of a transaction
	// marker the last clean kept (0: none known; not persisted, so after
	// a restart such markers wait for the next clean the dirty ratio
	// brings). Once it passed, the log is due (Kafka 3.x does the same).
	markerHorizon int64
}

// markerHorizonDueLocked reports whether a kept marker's delete horizon
// passed. Called with mu held.
func (l *Log) markerHorizonDueLocked(now int64) bool {
	return l.cleaner.markerHorizon > 0 && l.cleaner.markerHorizon <= now
}

// errCleanAborted: the log changed (retention, truncation) under a clean;
// the clean's output is dropped and the next round starts over.
var errCleanAborted = errors.New("log changed while cleaning")

// cleanable describes the cleanable part of the log as of now.
type cleanable struct {
	segs       []*segment // the whole segment list
	end        int        // segs[:end] are cleanable
	dirty      int        // segs[dirty:end] are dirty
	firstDirty int64
	ratio      float64
	forced     bool
}

// cleanableLocked computes the cleanable range. Called with mu held.
func (l *Log) cleanableLocked(limit int64) cleanable {
	c := cleanable{segs: l.segs}
	now := l.nowMs()
	minLag := l.cfg.MinCompactionLag.Milliseconds()
	for c.end < len(l.segs)-1 {
		s, next := l.segs[c.end], l.segs[c.end+1].base
		if next > limit || (minLag > 0 && s.maxTs >= 0 && now-s.maxTs < minLag) {
			break
		}
		c.end++
	}
	c.firstDirty = max(l.cleaner.firstDirty, l.start)
	var cleanBytes, dirtyBytes int64
	c.dirty = c.end
	for i := 0; i < c.end; i++ {
		s := l.segs[i]
		if s.base >= c.firstDirty || l.segs[i+1].base > c.firstDirty {
			if c.dirty == c.end {
				c.dirty = i
			}
			dirtyBytes += s.size
		} else {
			cleanBytes += s.size
		}
	}
	if dirtyBytes+cleanBytes > 0 {
		c.ratio = float64(dirtyBytes) / float64(dirtyBytes+cleanBytes)
	}
	if c.dirty < c.end && l.cfg.MaxCompactionLag < maxDuration {
		s := l.segs[c.dirty]
		c.forced = s.rollTs >= 0 && now-s.rollTs > l.cfg.MaxCompactionLag.Milliseconds()
	}
	return c
}

const maxDuration = 1<<63 - 1

// DirtyRatio reports the dirty share of the cleanable bytes below limit
// and whether the log is due for cleaning (compacted, with dirty segments
// at or above MinCleanableDirtyRatio, or forced by MaxCompactionLag). The
// broker's cleaner picks the dirtiest due log.
func (l *Log) DirtyRatio(limit int64) (ratio float64, due bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || !l.cfg.Compact {
		return 0, false
	}
	c := l.cleanableLocked(limit)
	horizonDue := c.end > 0 && l.markerHorizonDueLocked(l.nowMs())
	if c.dirty == c.end {
		return 0, horizonDue
	}
	return c.ratio, c.forced || horizonDue || c.ratio >= l.cfg.MinCleanableDirtyRatio
}

// Clean compacts the log once (see the comment at the top of cleaner.go).
// It is a no-op when the log is not compacted, another Clean of it is
// running, or it is not due (unless opts.Force). Appends and reads go on
// while it runs; they wait only for the swap of each rewritten group.
func (l *Log) Clean(ctx context.Context, opts CleanOptions) (CleanStats, error) {
	var st CleanStats
	if !l.cleanMu.TryLock() {
		return st, nil
	}
	defer l.cleanMu.Unlock()

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return st, ErrClosed
	}
	if l.failed != nil {
		l.mu.RUnlock()
		return st, fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}
	cfg := l.cfg
	// Transactions: nothing at or above the first unstable offset is
	// cleaned (its fate is not decided), and aborted records are dropped
	// rather than counted as a key's latest value.
	limit := opts.Limit
	for _, first := range l.producers.ongoing {
		limit = min(limit, first)
	}
	for _, t := range l.unreplicated {
		if t.lastOffset >= opts.Limit {
			limit = min(limit, t.firstOffset)
		}
	}
	aborted := map[int64][]AbortedTxn{}
	for _, s := range l.segs {
		for _, e := range s.txn.entries {
			aborted[e.ProducerID] = append(aborted[e.ProducerID], e)
		}
	}
	c := l.cleanableLocked(limit)
	st.DirtyRatio = c.ratio
	now := l.nowMs()
	// A log with nothing dirty is cleaned again when a kept marker's
	// delete horizon passed: the clean drops the marker.
	horizonDue := c.end > 0 && l.markerHorizonDueLocked(now)
	if !cfg.Compact || (c.dirty == c.end && !horizonDue) || (!opts.Force && !c.forced && !horizonDue && c.ratio < cfg.MinCleanableDirtyRatio) {
		l.mu.RUnlock()
		return st, nil
	}
	marks := append([]cleanMark(nil), l.cleaner.marks...)
	lastOfProducer := map[int64]int64{}
	for pid, e := range l.producers.m {
		lastOfProducer[pid] = e.lastOffset()
	}
	// Private read handles: retention may close the segments' own files
	// while we read; an unlinked file stays readable through its fd.
	srcs := make([]cleanSource, c.end)
	var openErr error
	for i := range srcs {
		s := c.segs[i]
		srcs[i] = cleanSource{seg: s, size: s.size, next: c.segs[i+1].base, aborted: append([]AbortedTxn(nil), s.txn.entries...)}
		if srcs[i].f, openErr = l.fs.OpenFile(s.name, os.O_RDONLY, 0); openErr != nil {
			break
		}
	}
	l.mu.RUnlock()
	defer func() {
		for _, s := range srcs {
			if s.f != nil {
				s.f.Close()
			}
		}
	}()
	if openErr != nil {
		return st, fmt.Errorf("clean: %w", openErr)
	}

	// 1. The key -> latest offset map over the dirty segments.
	offsets := map[[16]byte]int64{}
	mapEnd := c.dirty
	for mapEnd < c.end {
		if opts.MaxMapEntries > 0 && mapEnd > c.dirty && len(offsets) >= opts.MaxMapEntries {
			break // full: the next round goes on from here
		}
		s := srcs[mapEnd]
		if err := throttle(ctx, opts.Limiter, s.size); err != nil {
			return st, err
		}
		err := eachBatch(s.f, s.size, s.seg.base, func(b record.Batch, h record.Header) error {
			skip := h.IsControl() || h.IsTransactional() && isAborted(aborted, h.ProducerID, h.BaseOffset) // markers are no key's value; aborted records never were
			return walkKeys(b, h, func(r *record.Record) error {
				st.RecordsRead++
				if !skip && r.Key != nil {
					offsets[keyHash(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
				}
				return nil
			})
		})
		if err != nil {
			return st, fmt.Errorf("clean: map %s: %w", s.seg.name, err)
		}
		st.BytesRead += s.size
		st.SegmentsRead++
		mapEnd++
	}
	endOffset := c.segs[mapEnd].base // first offset not covered by the map

	deleteRetention := cfg.DeleteRetention.Milliseconds()
	tombstoneGone := func(off int64) bool {
		for _, m := range marks {
			if off < m.end {
				return m.ms+deleteRetention <= now
			}
		}
		return false // first reached by this clean
	}
	keep := func(h record.Header, r record.Record) bool {
		if h.IsControl() {
			return true // markers: txnCleaner decides, batch by batch
		}
		if h.IsTransactional() && isAborted(aborted, h.ProducerID, h.BaseOffset) {
			return false
		}
		if r.Key == nil {
			return false // Kafka drops keyless records from compacted logs
		}
		off := h.BaseOffset + int64(r.OffsetDelta)
		if latest, ok := offsets[keyHash(r.Key)]; ok && off < latest {
			return false
		}
		return r.ValueLen >= 0 || !tombstoneGone(off)
	}

	// 2. Rewrite segs[:mapEnd] in groups, swapping each in.
	tc := newTxnCleaner(now, deleteRetention)
	for i := 0; i < mapEnd; {
		ns, n, err := l.writeCleaned(ctx, opts.Limiter, srcs[i:mapEnd], keep, lastOfProducer, tc, &st)
		if err != nil {
			return st, err
		}
		if tc.dropped >= 0 {
			// A producer snapshot at or below a dropped marker may
			// hold the marker's transaction open, and a replay from it
			// would no longer find the marker: such snapshots go
			// first (a longer replay at worst).
			l.mu.Lock()
			err := l.removeSnapshots(func(off int64) bool { return off <= tc.dropped })
			l.mu.Unlock()
			if err != nil {
				ns.close()
				l.removeCleaned(ns.base, cleanedSuffix)
				return st, fmt.Errorf("clean: %w", err)
			}
		}
		group := make([]*segment, n)
		for k := range group {
			group[k] = srcs[i+k].seg
		}
		if err := l.swapIn(group, ns); err != nil {
			if errors.Is(err, errCleanAborted) {
				l.logger.V(1).Info("log changed while cleaning; dropped the cleaned segment", "base", ns.base)
				return st, nil
			}
			return st, err
		}
		st.SegmentsOut++
		i += n
	}

	// 3. Remember where cleaning stopped and when offsets were first reached.
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := &l.cleaner
	cs.firstDirty = max(cs.firstDirty, endOffset)
	cs.markerHorizon = tc.nextHorizon
	if len(cs.marks) == 0 || cs.marks[len(cs.marks)-1].end < endOffset {
		cs.marks = append(cs.marks, cleanMark{end: endOffset, ms: now})
	}
	// A mark is redundant once the next one has expired too (both then
	// allow dropping tombstones below their ends).
	for len(cs.marks) > 1 && cs.marks[1].ms+deleteRetention <= now {
		cs.marks = cs.marks[1:]
	}
	if err := l.persistCleanerState(); err != nil {
		// Losing it costs a re-clean, and tombstones kept longer.
		l.logger.Error(err, "cleaner checkpoint")
	}
	cs.loaded = true
	st.Cleaned = true
	return st, nil
}

func keyHash(k []byte) [16]byte {
	h := fnv.New128a()
	h.Write(k)
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// throttle waits until the limiter allows n more bytes.
func throttle(ctx context.Context, lim *rate.Limiter, n int64) error {
	if lim == nil {
		return nil
	}
	for n > 0 {
		c := min(n, int64(lim.Burst()))
		if err := lim.WaitN(ctx, int(c)); err != nil {
			return fmt.Errorf("clean: throttle: %w", err)
		}
		n -= c
	}
	return nil
}

// eachBatch scans a sealed segment file, checking every batch's framing
// and CRC, and hands over each batch; visit decodes its records (walkKeys,
// cleanBatch).
func eachBatch(f File, size, base int64, visit func(record.Batch, record.Header) error) error {
	sc := newScanner(f, 0, size, base)
	for {
		b, _, err := sc.scan()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := visit(b, b.Header()); err != nil {
			return err
		}
	}
}

// walkKeys walks a stored batch's records with their keys, not their
// values: the cleaner holds one key at a time, not the batch's records
// (a batch of 256 MiB of tiny records took GiBs as []record.Record).
// Bounded by the broker-wide cap, not the topic's max.message.bytes: that
// may have been lowered since the batch was written, and a batch the
// cleaner cannot read stops it.
func walkKeys(b record.Batch, h record.Header, visit func(*record.Record) error) error {
	if err := record.WalkKeys(b, record.MaxDecompressedBytes, visit); err != nil {
		return fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	return nil
}

// cleanSource is a segment being cleaned, read through its own handle.
type cleanSource struct {
	seg     *segment
	f       File
	size    int64
	next    int64        // the next segment's base
	aborted []AbortedTxn // its aborted-transaction index entries
}

// isAborted reports whether the batch of producerID at offset belongs to
// an aborted transaction (its first offset at or below offset, its marker
// after it).
func isAborted(aborted map[int64][]AbortedTxn, producerID, offset int64) bool {
	for _, e := range aborted[producerID] {
		if e.FirstOffset <= offset && offset < e.LastOffset {
			return true
		}
	}
	return false
}

// segState is what rolling back the last source of a cleaned segment
// restores.
type segState struct {
	size, next, maxTs, maxTsOffset, rollTs, lastTimeEntry int64
	sinceIndex, offN, timeN                               int
}

func (s *segment) state() segState {
	return segState{s.size, s.next, s.maxTs, s.maxTsOffset, s.rollTs, s.lastTimeEntry, s.sinceIndex, s.offIdx.n, s.timeIdx.n}
}

func (s *segment) restore(st segState) {
	s.size, s.next, s.maxTs, s.maxTsOffset, s.rollTs, s.lastTimeEntry, s.sinceIndex = st.size, st.next, st.maxTs, st.maxTsOffset, st.rollTs, st.lastTimeEntry, st.sinceIndex
	s.offIdx.n, s.offIdx.mem = st.offN, s.offIdx.mem[:st.offN*s.offIdx.width]
	s.timeIdx.n, s.timeIdx.mem = st.timeN, s.timeIdx.mem[:st.timeN*s.timeIdx.width]
}

// writeCleaned writes the kept records of srcs[0], then of as many
// following sources as fit (the cleaned output within SegmentBytes,
// offsets within the index's range), into a new sealed segment named
// <base>.log.cleaned (indexes alike), fsynced. It returns the segment and
// the number of sources it replaces. Merging by the cleaned size (Kafka
// groups by the size before cleaning) turns a log of full segments into
// few segments in one clean, and saves a swap per source.
func (l *Log) writeCleaned(ctx context.Context, lim *rate.Limiter, srcs []cleanSource,
	keep func(record.Header, record.Record) bool, lastOfProducer map[int64]int64, tc *txnCleaner, st *CleanStats) (*segment, int, error) {
	base := srcs[0].seg.base
	ns := &segment{base: base, name: segmentName(l.dir, base, logSuffix), maxTs: -1, maxTsOffset: -1, lastTimeEntry: -1, next: base, rollTs: srcs[0].seg.rollTs}
	var err error
	create := func(suffix string) (File, error) {
		return l.fs.OpenFile(segmentName(l.dir, base, suffix)+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	}
	if ns.f, err = create(logSuffix); err != nil {
		return nil, 0, fmt.Errorf("clean: %w", err)
	}
	ns.offIdx = &index{name: segmentName(l.dir, base, indexSuffix), width: offsetEntrySize, mem: make([]byte, 0, 64*offsetEntrySize)}
	ns.timeIdx = &index{name: segmentName(l.dir, base, timeIndexSuffix), width: timeEntrySize, mem: make([]byte, 0, 64*timeEntrySize)}
	fail := func(err error) (*segment, int, error) {
		ns.close()
		l.removeCleaned(base, cleanedSuffix)
		return nil, 0, err
	}
	if ns.offIdx.f, err = create(indexSuffix); err != nil {
		return fail(fmt.Errorf("clean: %w", err))
	}
	if ns.timeIdx.f, err = create(timeIndexSuffix); err != nil {
		return fail(fmt.Errorf("clean: %w", err))
	}
	ns.txn = &txnIndex{name: segmentName(l.dir, base, txnIndexSuffix)}
	if ns.txn.f, err = create(txnIndexSuffix); err != nil {
		return fail(fmt.Errorf("clean: %w", err))
	}
	var pos int64
	used := 0
	for k, s := range srcs {
		if k > 0 && s.next-base > math.MaxInt32 {
			break
		}
		if err := throttle(ctx, lim, s.size); err != nil {
			return fail(err)
		}
		saved, start := ns.state(), pos
		tc.begin()
		var kept int64
		err := eachBatch(s.f, s.size, s.seg.base, func(b record.Batch, h record.Header) error {
			var out record.Batch
			var err error
			if h.IsControl() {
				if err := walkKeys(b, h, func(*record.Record) error { return nil }); err != nil {
					return err // checked as every batch is
				}
				out, err = tc.controlBatch(b, h)
			} else {
				tc.dataBatch(h)
				out, err = cleanBatch(b, h, keep, lastOfProducer)
			}
			if err != nil || out == nil {
				return err
			}
			kept += int64(out.Header().NumRecords)
			if _, err := ns.f.WriteAt(out, pos); err != nil {
				return err
			}
			ns.track(out.Header(), pos, l.cfg.IndexIntervalBytes)
			pos += int64(len(out))
			return nil
		})
		if err != nil {
			return fail(fmt.Errorf("clean %s: %w", s.seg.name, err))
		}
		st.BytesRead += s.size
		if k > 0 && (pos > l.cfg.SegmentBytes || pos > math.MaxInt32) {
			// Does not fit: this source starts the next group.
			ns.restore(saved)
			tc.undo()
			if err := ns.f.Truncate(start); err != nil {
				return fail(fmt.Errorf("clean: %w", err))
			}
			pos = start
			break
		}
		st.RecordsKept += kept
		used = k + 1
		ns.next = s.next
	}
	for _, s := range srcs[:used] {
		for _, e := range s.aborted {
			if tc.empty[e.LastOffset] {
				continue // no data of the transaction left to filter (Kafka drops the entry too)
			}
			if err := ns.txn.add(e); err != nil {
				return fail(fmt.Errorf("clean: %w", err))
			}
		}
	}
	if err := throttle(ctx, lim, pos); err != nil {
		return fail(err)
	}
	st.BytesWritten += pos
	if err := ns.seal(); err != nil {
		return fail(fmt.Errorf("clean: %w", err))
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return fail(fmt.Errorf("clean: fsync dir: %w", err))
	}
	if err := l.cleanHook("cleaned"); err != nil {
		ns.close() // as a crash would leave it: written, not swapped
		return nil, 0, err
	}
	return ns, used, nil
}

// txnCleaner follows transactions through one Clean, in offset order
// over the rewritten segments (Kafka's CleanedTransactionMetadata), and
// decides the fate of their markers. A transaction marker is removable
// once the clean finds no batch of its transaction before it: the data
// was removed by an earlier clean (superseded keys, aborted records, or
// retention). Like Kafka (KIP-534), removal takes two passes: the first
// clean that finds the marker removable rewrites it with a delete horizon
// (now + delete.retention.ms, in the batch: attribute bit 6, base
// timestamp), and a clean after the horizon drops it — a consumer that
// read the transaction's data before it was removed has
// delete.retention.ms to read its marker. The aborted-transaction index
// entry of a transaction without data is dropped at once (nothing left to
// filter), as Kafka does.
type txnCleaner struct {
	now, retention int64
	// open: producers with a batch of their current transaction seen by
	// this clean (the transaction's marker must stay).
	open map[int64]bool
	// empty: offsets of the markers whose transaction has no data left.
	empty map[int64]bool
	// dropped is the highest offset of a marker dropped, -1 for none.
	dropped int64
	// nextHorizon is the earliest delete horizon of a marker kept, 0 for
	// none.
	nextHorizon int64

	// Undo state of the source being written (writeCleaned rolls back a
	// source that does not fit and writes it again in the next group).
	openSaved        map[int64]bool
	emptyAdded       []int64
	droppedSaved     int64
	nextHorizonSaved int64
}

func newTxnCleaner(now, retention int64) *txnCleaner {
	return &txnCleaner{now: now, retention: retention, open: map[int64]bool{}, empty: map[int64]bool{}, dropped: -1}
}

// begin starts a source: undo goes back to here.
func (tc *txnCleaner) begin() {
	tc.openSaved = maps.Clone(tc.open)
	tc.emptyAdded = tc.emptyAdded[:0]
	tc.droppedSaved = tc.dropped
	tc.nextHorizonSaved = tc.nextHorizon
}

func (tc *txnCleaner) undo() {
	tc.open = tc.openSaved
	for _, off := range tc.emptyAdded {
		delete(tc.empty, off)
	}
	tc.dropped = tc.droppedSaved
	tc.nextHorizon = tc.nextHorizonSaved
}

// dataBatch notes a data batch read by the clean (before its records are
// filtered: a batch removed in this clean keeps its marker until the next).
func (tc *txnCleaner) dataBatch(h record.Header) {
	if h.ProducerID >= 0 && h.IsTransactional() {
		tc.open[h.ProducerID] = true
	}
}

// controlBatch returns what to write of a control batch: itself, itself
// with a delete horizon, or nil (dropped).
func (tc *txnCleaner) controlBatch(b record.Batch, h record.Header) (record.Batch, error) {
	if h.ProducerID < 0 {
		return b, nil
	}
	if _, err := record.ParseMarker(b); err != nil {
		return b, nil // not a transaction marker: kept as it is
	}
	if tc.open[h.ProducerID] {
		delete(tc.open, h.ProducerID)
		return b, nil
	}
	tc.empty[h.BaseOffset] = true
	tc.emptyAdded = append(tc.emptyAdded, h.BaseOffset)
	if horizon, ok := h.DeleteHorizon(); ok {
		if horizon <= tc.now {
			tc.dropped = max(tc.dropped, h.LastOffset())
			return nil, nil
		}
		tc.keptHorizon(horizon)
		return b, nil
	}
	tc.keptHorizon(tc.now + tc.retention)
	return record.WithDeleteHorizon(b, tc.now+tc.retention)
}

func (tc *txnCleaner) keptHorizon(ms int64) {
	if tc.nextHorizon == 0 || ms < tc.nextHorizon {
		tc.nextHorizon = ms
	}
}

// cleanBatch returns the batch with only the kept records: b itself when
// all stay, a rebuilt batch when some do, an empty batch when none do but
// it is an idempotent producer's last batch, else nil. keep sees records
// with their keys and value lengths (walkKeys); only a batch that keeps
// some of its records is decoded whole, to be rebuilt.
func cleanBatch(b record.Batch, h record.Header, keep func(record.Header, record.Record) bool, lastOfProducer map[int64]int64) (record.Batch, error) {
	var total, kept int
	err := walkKeys(b, h, func(r *record.Record) error {
		total++
		if keep(h, *r) {
			kept++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case kept == total:
		return b, nil
	case kept == 0 && !(h.ProducerID >= 0 && lastOfProducer[h.ProducerID] == h.LastOffset()):
		return nil, nil
	}
	recs, err := record.Records(b, record.MaxDecompressedBytes)
	if err != nil {
		return nil, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	out := recs[:0]
	for _, r := range recs {
		if keep(h, r) {
			out = append(out, r)
		}
	}
	return record.Rebuild(b, out)
}

// cleanHook lets tests stop a clean at a step, as a crash would.
func (l *Log) cleanHook(step string) error {
	if l.testCleanHook == nil {
		return nil
	}
	return l.testCleanHook(step)
}

// removeCleaned deletes a group's files with the given extra suffix.
func (l *Log) removeCleaned(base int64, extra string) {
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := l.fs.Remove(segmentName(l.dir, base, suffix) + extra); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Error(err, "removing a cleaner file")
		}
	}
}

// swapIn replaces group (consecutive segments of the log) with ns.
func (l *Log) swapIn(group []*segment, ns *segment) error {
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	at := -1
	for i, s := range l.segs {
		if s == group[0] {
			at = i
			break
		}
	}
	if l.closed || l.failed != nil || at < 0 || at+len(group) >= len(l.segs) {
		ns.close()
		l.removeCleaned(ns.base, cleanedSuffix)
		return errCleanAborted
	}
	for k, s := range group {
		if l.segs[at+k] != s {
			ns.close()
			l.removeCleaned(ns.base, cleanedSuffix)
			return errCleanAborted
		}
	}
	end := l.segs[at+len(group)].base
	crash := func(err error) error {
		// Past the commit point: Open finishes the swap.
		l.failed = err
		l.logger.Error(err, "log cleaner swap failed; the log refuses writes until reopened")
		return fmt.Errorf("clean: swap: %w", err)
	}
	if err := writeFileAtomic(l.fs, l.dir, l.path(cleanerSwapFile), []byte(fmt.Sprintf("%d %d\n", ns.base, end))); err != nil {
		ns.close()
		l.removeCleaned(ns.base, cleanedSuffix)
		return fmt.Errorf("clean: write %s: %w", cleanerSwapFile, err)
	}
	if err := l.cleanHook("committed"); err != nil {
		return crash(err)
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		n := segmentName(l.dir, ns.base, suffix)
		if err := l.fs.Rename(n+cleanedSuffix, n+swapSuffix); err != nil {
			return crash(err)
		}
	}
	if err := l.cleanHook("swap"); err != nil {
		return crash(err)
	}
	var removed int64
	for _, s := range group {
		removed += s.size
		if err := errors.Join(s.close(), s.remove(l.fs)); err != nil {
			return crash(err)
		}
	}
	if err := l.cleanHook("removed"); err != nil {
		return crash(err)
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		n := segmentName(l.dir, ns.base, suffix)
		if err := l.fs.Rename(n+swapSuffix, n); err != nil {
			return crash(err)
		}
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return crash(err)
	}
	if err := l.fs.Remove(l.path(cleanerSwapFile)); err != nil {
		return crash(err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return crash(err)
	}
	segs := make([]*segment, 0, len(l.segs)-len(group)+1)
	segs = append(segs, l.segs[:at]...)
	segs = append(segs, ns)
	segs = append(segs, l.segs[at+len(group):]...)
	l.segs = segs
	l.size += ns.size - removed
	l.logger.V(1).Info("cleaned segments", "base", ns.base, "segments", len(group), "bytesBefore", removed, "bytesAfter", ns.size)
	return nil
}

// recoverCleanerSwap runs first in Open: it finishes a swap whose commit
// point (the cleaner-swap file) was written, and otherwise removes what an
// interrupted clean left (the replaced segments are then untouched).
func (l *Log) recoverCleanerSwap() error {
	data, err := readFile(l.fs, l.path(cleanerSwapFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err == nil {
		var base, end int64
		if _, err := fmt.Sscanf(string(data), "%d %d", &base, &end); err != nil || base < 0 || end <= base {
			return &CorruptionError{File: l.path(cleanerSwapFile), Offset: -1, Err: fmt.Errorf("unexpected content %q", data)}
		}
		if err := l.finishSwap(base, end); err != nil {
			return fmt.Errorf("finish cleaner swap of %d: %w", base, err)
		}
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
			l.logger.Info("removing the output of an interrupted clean", "file", n)
			if err := l.fs.Remove(l.path(n)); err != nil {
				return err
			}
		}
	}
	return syncDir(l.fs, l.dir)
}

// finishSwap completes the swap of the segment at base replacing the
// segments in [base, end). Every step is idempotent.
func (l *Log) finishSwap(base, end int64) error {
	l.logger.Info("finishing an interrupted cleaner swap", "base", base, "end", end)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		n := segmentName(l.dir, base, suffix)
		if _, err := l.fs.Stat(n + cleanedSuffix); err == nil {
			if err := l.fs.Rename(n+cleanedSuffix, n+swapSuffix); err != nil {
				return err
			}
		}
	}
	_, err := l.fs.Stat(segmentName(l.dir, base, logSuffix) + swapSuffix)
	newLogPending := err == nil
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix && ext != txnIndexSuffix {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil || b < base || b >= end {
			continue
		}
		// The final-named files at base are the new ones once the new
		// .log is in place; its indexes are rebuilt when missing.
		if b == base && !newLogPending {
			continue
		}
		if err := l.fs.Remove(l.path(name)); err != nil {
			return err
		}
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		n := segmentName(l.dir, base, suffix)
		if _, err := l.fs.Stat(n + swapSuffix); err == nil {
			if err := l.fs.Rename(n+swapSuffix, n); err != nil {
				return err
			}
		}
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return err
	}
	if err := l.fs.Remove(l.path(cleanerSwapFile)); err != nil {
		return err
	}
	return syncDir(l.fs, l.dir)
}

// loadCleanerState reads cleaner-offset-checkpoint:
// "0\n<firstDirty>\n<n>\n<end> <ms>\n...".
func (l *Log) loadCleanerState() error {
	data, err := readFile(l.fs, l.path(cleanerCheckpoint))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	bad := func(why string) error {
		return &CorruptionError{File: l.path(cleanerCheckpoint), Offset: -1, Err: fmt.Errorf("%s in %q", why, data)}
	}
	f := strings.Fields(string(data))
	if len(f) < 3 || f[0] != cleanerCheckpointVer {
		return bad("unexpected header")
	}
	var cs cleanerState
	n, err1 := strconv.Atoi(f[2])
	fd, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || n < 0 || len(f) != 3+2*n {
		return bad("unexpected counts")
	}
	cs.firstDirty = fd
	for i := 0; i < n; i++ {
		end, err1 := strconv.ParseInt(f[3+2*i], 10, 64)
		ms, err2 := strconv.ParseInt(f[4+2*i], 10, 64)
		if err1 != nil || err2 != nil {
			return bad("bad mark")
		}
		cs.marks = append(cs.marks, cleanMark{end: end, ms: ms})
	}
	cs.loaded = true
	l.cleaner = cs
	return nil
}

func (l *Log) persistCleanerState() error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%d\n%d\n", cleanerCheckpointVer, l.cleaner.firstDirty, len(l.cleaner.marks))
	for _, m := range l.cleaner.marks {
		fmt.Fprintf(&b, "%d %d\n", m.end, m.ms)
	}
	if err := writeFileAtomic(l.fs, l.dir, l.path(cleanerCheckpoint), []byte(b.String())); err != nil {
		return fmt.Errorf("write %s: %w", cleanerCheckpoint, err)
	}
	return nil
}

// truncateCleanerState forgets cleaning progress at and above the log end
// after a truncation: offsets appended there again are dirty and their
// tombstones not yet reached. Called with mu held.
func (l *Log) truncateCleanerState() {
	cs := &l.cleaner
	changed := false
	if cs.firstDirty > l.leo {
		cs.firstDirty, changed = l.leo, true
	}
	for len(cs.marks) > 0 && cs.marks[len(cs.marks)-1].end > l.leo {
		n := len(cs.marks)
		if n > 1 && cs.marks[n-2].end >= l.leo {
			cs.marks = cs.marks[:n-1] // the earlier mark already covers what is left
		} else {
			cs.marks[n-1].end = l.leo
		}
		changed = true
	}
	if changed && cs.loaded {
		if err := l.persistCleanerState(); err != nil {
			l.logger.Error(err, "cleaner checkpoint after truncation")
		}
	}
}
