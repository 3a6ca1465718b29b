package log

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/notify"
	"github.com/strata-dev/strata/broker/record"
)

// Log is one partition's log: a directory of segments.
//
// Ownership and locking. A Log is safe for concurrent use. Two locks:
//   - mu guards all in-memory state (segment list, offsets, indexes held in
//     memory, epoch cache, producer state, config). Appends hold it for the
//     write(2) of their batches; readers hold it only to take a snapshot
//     (segment, committed size, index position). fsync never runs under mu
//     (except when sealing a segment at roll), so a slow disk delays only
//     the caller that asked for durability.
//   - ioMu guards the open files against being closed or shrunk under a
//     reader: Read, OffsetForTimestamp, appends and flushes hold it
//     shared while they do I/O; retention, truncation, DeleteRecords and
//     Close hold it exclusively. Reads therefore never wait for appends,
//     only (briefly) for destructive operations.
//
// Lock order: ioMu before mu. Bytes past a segment's committed size are
// never read, so a reader cannot see a half-written batch.
type Log struct {
	dir    string
	fs     FS
	logger logr.Logger
	now    func() time.Time

	ioMu sync.RWMutex
	mu   sync.RWMutex

	cfg       Config
	segs      []*segment // sorted by base; the last one is active. Replaced, never mutated in place.
	start     int64      // log start offset
	leo       int64      // log end offset
	size      int64      // sum of segment sizes
	epochs    epochCache
	producers producerStates
	// unreplicated are completed transactions whose marker may be at or
	// above the high watermark (txn.go); stableHWM is the largest high
	// watermark LastStableOffset was given.
	unreplicated []completedTxn
	stableHWM    atomic.Int64
	unflushed    int64 // records appended since the last fsync
	dirty        bool  // bytes appended since the last fsync
	// durable is the log end offset as of the last successful fsync: what
	// a power loss cannot take (FlushTo). syncDone is broadcast (on mu)
	// whenever an fsync ends.
	durable  int64
	syncDone *sync.Cond
	// onFailure is told about every write or fsync that failed (Option
	// WithOnFailure).
	onFailure func(error)
	waitCh    chan struct{}
	// subs are told whenever waitCh closes (Subscribe).
	subs   notify.List
	closed bool
	failed error
	// flushTimer fsyncs dirty data FlushInterval after the log turned
	// dirty (armFlushLocked); nil while the log is clean. flushToken
	// tells its callback whether it is still the armed one. A runtime
	// timer, not a goroutine per log: at thousands of partitions a
	// goroutine and a ticker each cost every GC cycle its stack scan and
	// the scheduler a wake-up per log every interval, clean or not.
	flushTimer *time.Timer
	flushToken *struct{}

	// cleanMu serialises Clean; cleaner is its progress (guarded by mu).
	cleanMu       sync.Mutex
	cleaner       cleanerState
	testCleanHook func(step string) error // tests: stop a clean at a step
}

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset, LastOffset int64
	// LogAppendTime is the timestamp the broker stamped, -1 for CreateTime.
	LogAppendTime  int64
	LogStartOffset int64
}

// ReadResult is the outcome of a Read.
type ReadResult struct {
	// Records holds whole batches, as stored.
	Records []byte
	// HighestOffset is the last offset of the last batch in Records, or
	// -1 when Records is empty.
	HighestOffset int64
}

func (l *Log) nowMs() int64 { return l.now().UnixMilli() }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// AppendAsLeader assigns offsets from the log end offset to the batches
// (which must have passed record.Validate), stamps leaderEpoch and, for
// LogAppendTime topics, the append time into them in place, and appends
// them. Idempotent producer batches are checked for duplicates and
// sequence gaps first (see ErrDuplicateSequence).
func (l *Log) AppendAsLeader(batches []record.Batch, leaderEpoch int32) (AppendResult, error) {
	return l.append(batches, leaderEpoch, true, false, nil)
}

// AppendAsLeaderVerified is AppendAsLeader for a produce whose
// transactions are verified with their coordinator (KIP-890 part 1): a
// transactional batch that would start its producer's transaction is
// refused with ErrInvalidTxnState unless guard (StartTxnVerification,
// before the coordinator was asked) is still the producer's current
// verification guard, checked under the append lock.
func (l *Log) AppendAsLeaderVerified(batches []record.Batch, leaderEpoch int32, guard *VerificationGuard) (AppendResult, error) {
	return l.append(batches, leaderEpoch, true, true, guard)
}

// AppendAsFollower appends batches whose offsets were assigned by the
// leader. Each must start at or after the log end offset (after the
// previous batch), else ErrNonContiguous. Gaps are accepted: a leader whose
// log was compacted serves batches with offsets missing between them (and
// inside them), and the follower's log keeps exactly those offsets. Newer leader epochs in
// the batches enter the epoch cache; an older one is logged and accepted
// (as Kafka does).
func (l *Log) AppendAsFollower(batches []record.Batch) (AppendResult, error) {
	return l.append(batches, -1, false, false, nil)
}

func (l *Log) append(batches []record.Batch, leaderEpoch int32, asLeader, verify bool, guard *VerificationGuard) (AppendResult, error) {
	if len(batches) == 0 {
		return AppendResult{}, fmt.Errorf("append: %w: no batches", record.ErrInvalidRecord)
	}
	l.ioMu.RLock()
	defer l.ioMu.RUnlock()
	l.mu.Lock()
	var res AppendResult
	var syncNeeded bool
	var err error
	if asLeader {
		res, syncNeeded, err = l.appendLocked(batches, leaderEpoch, asLeader, verify, guard)
	} else {
		res, syncNeeded, err = l.appendFollowerLocked(batches)
	}
	var pending *pendingSync
	if syncNeeded { // also after a follower append failed part way
		pending = l.prepareSync()
	}
	l.mu.Unlock()
	if pending != nil {
		// fsync outside mu: readers and other appends go on meanwhile,
		// and one fsync covers every append written before it.
		if serr := l.finishSync(pending); serr != nil && err == nil {
			// The bytes are written but not known durable: fail the
			// request so the producer retries (a duplicate at worst,
			// which idempotence absorbs).
			return AppendResult{}, serr
		}
	}
	if err != nil {
		return res, err
	}
	return res, nil
}

// appendFollowerLocked appends a follower's batches in groups that each
// fit the segment they go to, rolling between groups: a follower catching
// up receives many batches in one fetch (or one WAL object), and with one
// roll check per append its log would hold them all in one active segment
// of any size. The cleaner never cleans the active segment, and retention
// and tiering work by whole segments, so such a replica kept a whole
// compacted history uncleaned until its next append (found by
// TestWALCompactedTopicReplicas). Each group is checked and written as
// appendLocked does; if a later group fails, the earlier ones stay (the
// follower fetches again from its new log end) and the error is returned.
func (l *Log) appendFollowerLocked(batches []record.Batch) (AppendResult, bool, error) {
	var res AppendResult
	sync := false
	for first := true; len(batches) > 0; first = false {
		seg := l.active()
		room := l.cfg.SegmentBytes - seg.size
		if seg.size > 0 && int64(len(batches[0])) > room {
			room = l.cfg.SegmentBytes // appendLocked rolls first
		}
		n, size := 1, int64(len(batches[0]))
		for n < len(batches) && size+int64(len(batches[n])) <= room {
			size += int64(len(batches[n]))
			n++
		}
		r, s, err := l.appendLocked(batches[:n], -1, false, false, nil)
		if err != nil {
			if !first {
				return res, sync, err
			}
			return r, false, err
		}
		if first {
			res = r
		}
		res.LastOffset, res.LogStartOffset = r.LastOffset, r.LogStartOffset
		sync = sync || s
		batches = batches[n:]
	}
	return res, sync, nil
}

// appendLocked does the work of append with mu held; it reports whether
// the flush policy asks for an fsync before returning.
func (l *Log) appendLocked(batches []record.Batch, leaderEpoch int32, asLeader, verify bool, guard *VerificationGuard) (AppendResult, bool, error) {
	if l.closed {
		return AppendResult{}, false, ErrClosed
	}
	if l.failed != nil {
		return AppendResult{}, false, fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}

	var total int64
	records := int64(0)
	next := l.leo
	headers := make([]record.Header, len(batches))
	for i, b := range batches {
		if len(b) < record.BatchHeaderSize {
			return AppendResult{}, false, fmt.Errorf("append: batch %d: %w: %d bytes", i, record.ErrCorrupt, len(b))
		}
		h := b.Header()
		headers[i] = h
		if h.Size() != len(b) {
			return AppendResult{}, false, fmt.Errorf("append: batch %d: %w: header says %d bytes, have %d", i, record.ErrCorrupt, h.Size(), len(b))
		}
		if int64(len(b)) > l.cfg.SegmentBytes {
			return AppendResult{}, false, fmt.Errorf("append: batch %d: %w: %d bytes exceed segment.bytes %d", i, record.ErrTooLarge, len(b), l.cfg.SegmentBytes)
		}
		if !asLeader {
			if h.BaseOffset < next || h.LastOffsetDelta < 0 {
				return AppendResult{}, false, fmt.Errorf("append: batch %d at offset %d, log end is %d: %w", i, h.BaseOffset, next, ErrNonContiguous)
			}
			if h.PartitionLeaderEpoch < l.epochs.latest() {
				// Kafka accepts these and leaves the epoch cache alone; the
				// truncation protocol should have prevented them.
				l.logger.Info("follower batch with a leader epoch below the latest; not recorded in the epoch cache",
					"offset", h.BaseOffset, "epoch", h.PartitionLeaderEpoch, "latest", l.epochs.latest())
			}
		}
		if asLeader {
			next += int64(h.LastOffsetDelta) + 1
		} else {
			next = h.LastOffset() + 1
		}
		total += int64(len(b))
		records += int64(h.NumRecords)
	}
	if asLeader && leaderEpoch < l.epochs.latest() {
		return AppendResult{}, false, fmt.Errorf("append: leader epoch %d is below the latest %d in the log: %w", leaderEpoch, l.epochs.latest(), ErrNonContiguous)
	}

	// Idempotent producers: reject duplicates and gaps before anything is
	// stamped or written.
	markers := l.markers(batches, headers)
	pending, done, dup, err := l.producers.check(headers, markers, asLeader, l.leo)
	if err != nil {
		if dup != nil {
			return AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: dup.appendTime, LogStartOffset: l.start}, false, err
		}
		return AppendResult{}, false, err
	}
	if verify {
		if err := l.checkVerifiedLocked(headers, guard); err != nil {
			return AppendResult{}, false, err
		}
	}

	now := l.nowMs()
	seg := l.active()
	if seg.size > 0 && (seg.size+total > l.cfg.SegmentBytes || now-seg.rollTs >= l.cfg.SegmentMs.Milliseconds() || !seg.fits(next-1, total)) {
		if err := l.roll(now); err != nil {
			l.failed = err
			l.reportFailure(err)
			return AppendResult{}, false, fmt.Errorf("append: %w", err)
		}
		seg = l.active()
	}

	res := AppendResult{BaseOffset: l.leo, LastOffset: next - 1, LogAppendTime: -1}
	if !asLeader {
		res.BaseOffset = headers[0].BaseOffset
	}
	if asLeader {
		off := l.leo
		for _, b := range batches {
			record.SetBaseOffset(b, off)
			record.SetPartitionLeaderEpoch(b, leaderEpoch)
			if l.cfg.logAppendTime() {
				record.SetLogAppendTime(b, now)
			}
			off = b.LastOffset() + 1
		}
		if l.cfg.logAppendTime() {
			res.LogAppendTime = now
		}
	}

	// Record new leader epochs before the data: an entry whose batches
	// then fail to be written still starts at the log end, which is where
	// the epoch's next batch goes (and Open drops entries past the end).
	savedEpochs := l.epochs.entries
	changed := false
	for _, h := range headers {
		epoch, base := h.PartitionLeaderEpoch, h.BaseOffset
		if asLeader {
			epoch, base = leaderEpoch, res.BaseOffset
		}
		if l.epochs.assignCopy(epoch, base) {
			changed = true
		}
	}
	if changed {
		if err := l.epochs.persist(); err != nil {
			l.epochs.entries = savedEpochs
			return AppendResult{}, false, fmt.Errorf("append: %w", err)
		}
	}

	pos := seg.size
	for i, b := range batches {
		if _, err := seg.f.WriteAt(b, pos); err != nil {
			err = fmt.Errorf("append: write batch %d to %s: %w", i, seg.name, err)
			if terr := seg.f.Truncate(seg.size); terr != nil {
				l.failed = errors.Join(err, terr)
				l.logger.Error(l.failed, "cannot undo a failed append; the log refuses writes until reopened", "segment", seg.name)
			}
			l.reportFailure(err)
			return AppendResult{}, false, err
		}
		pos += int64(len(b))
	}
	pos = seg.size
	for _, b := range batches {
		h := b.Header()
		seg.track(h, pos, l.cfg.IndexIntervalBytes)
		pos += int64(len(b))
	}
	l.producers.commit(pending, res.LogAppendTime, now)
	l.clearVerificationLocked(headers)
	l.pruneUnreplicatedLocked()
	if len(done) > 0 {
		if err := l.completeTxnsLocked(seg, done); err != nil {
			// The marker is written; Open rebuilds the index from it.
			l.failed = err
			l.reportFailure(err)
			l.logger.Error(err, "cannot write the aborted-transaction index; the log refuses writes until reopened", "segment", seg.name)
		}
	}
	l.leo = next
	l.size += total
	l.unflushed += records
	l.dirty = true
	l.armFlushLocked()
	res.LogStartOffset = l.start
	close(l.waitCh)
	l.waitCh = make(chan struct{})
	l.subs.Signal()

	return res, l.cfg.FlushInterval == 0 || (l.cfg.FlushMessages > 0 && l.unflushed >= l.cfg.FlushMessages), nil
}

// roll seals the active segment and starts a new one at the log end
// offset. Called with mu held.
func (l *Log) roll(nowMs int64) error {
	old := l.active()
	if old.size == 0 && old.base == l.leo {
		old.rollTs = nowMs
		return nil
	}
	if err := old.seal(); err != nil {
		return fmt.Errorf("roll: seal %s: %w", old.name, err)
	}
	s, err := createSegment(l.fs, l.dir, l.leo, nowMs)
	if err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		s.close()
		return fmt.Errorf("roll: fsync dir: %w", err)
	}
	old.next = l.leo
	l.durable = max(l.durable, l.leo) // the sealed segment was fsynced
	segs := make([]*segment, len(l.segs), len(l.segs)+1)
	copy(segs, l.segs)
	l.segs = append(segs, s)
	l.unflushed, l.dirty = 0, false // the sealed segment was fsynced; the new one is empty
	// Producer state as of the new segment's base: Open replays only what
	// follows the newest snapshot. Losing one costs a longer replay, so a
	// failure is logged, not fatal.
	if err := l.writeProducerSnapshot(); err != nil {
		l.logger.Error(err, "producer snapshot at roll")
	}
	l.logger.V(1).Info("rolled segment", "base", s.base, "previous", old.base, "previousBytes", old.size)
	return nil
}

// Wait returns a channel that is closed by the next append (or truncation,
// or Close). Fetch long-polls wait on it, then read again.
func (l *Log) Wait() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.waitCh
}

// Subscribe calls fn at each event that closes Wait's channel (an
// append, Close) until cancel is called: how a reader of many partitions
// learns which changed without waiting on a channel per partition
// (package notify). fn runs with the log's lock held: it must only
// record the change (notify.Set.Mark).
func (l *Log) Subscribe(fn func()) (cancel func()) {
	return l.subs.Subscribe(fn)
}

// StartOffset is the log start offset: the first readable offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset is the log end offset (LEO): the offset the next append gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// Size is the number of bytes in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig changes the configuration (dynamic topic config). An invalid
// config is rejected and the old one kept.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	l.mu.Lock()
	changed := l.cfg.FlushInterval != cfg.FlushInterval
	l.cfg = cfg
	if changed {
		// Re-arm at the new interval (or not at all).
		l.stopFlushLocked()
		if l.dirty {
			l.armFlushLocked()
		}
	}
	l.mu.Unlock()
	return nil
}

// ValidateConfig reports what Open and SetConfig would reject.
func ValidateConfig(cfg Config) error { return cfg.validate() }

// segmentFor returns the index of the segment holding offset (the last one
// whose base is at or below it).
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// Read returns whole batches starting with the one containing offset: up
// to maxBytes, but at least one batch (KIP-74), and none whose base offset
// is at or above maxOffset. Reads stay within one segment, as Kafka's do.
// offset below the log start or above the log end is ErrOffsetOutOfRange;
// offset == log end returns an empty result.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (ReadResult, error) {
	empty := ReadResult{HighestOffset: -1}
	l.ioMu.RLock()
	defer l.ioMu.RUnlock()

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return empty, ErrClosed
	}
	if offset < l.start || offset > l.leo {
		start, leo := l.start, l.leo
		l.mu.RUnlock()
		return empty, fmt.Errorf("read offset %d, log has [%d, %d): %w", offset, start, leo, ErrOffsetOutOfRange)
	}
	if offset == l.leo || offset >= maxOffset {
		l.mu.RUnlock()
		return empty, nil
	}
	type view struct {
		seg     *segment
		limit   int64
		pos     int64
		havePos bool
	}
	var views []view
	for i := l.segmentFor(offset); i < len(l.segs); i++ {
		s := l.segs[i]
		v := view{seg: s, limit: s.size}
		if len(views) == 0 && s.offIdx.mem != nil {
			// The active segment's index lives in memory, guarded by mu.
			var err error
			if v.pos, err = s.lookup(offset); err != nil {
				l.mu.RUnlock()
				return empty, err
			}
			v.havePos = true
		}
		views = append(views, v)
	}
	l.mu.RUnlock()

	for i, v := range views {
		if i == 0 && !v.havePos {
			p, err := v.seg.lookup(offset) // sealed: the index file is immutable under ioMu
			if err != nil {
				return empty, err
			}
			v.pos = p
		}
		res, found, err := readSegment(v.seg, v.pos, v.limit, offset, maxBytes, maxOffset)
		if err != nil || found {
			return res, err
		}
	}
	return empty, nil
}

// readSegment reads from one segment, starting the index scan at pos.
// found is false when the segment holds no batch at or after offset.
func readSegment(s *segment, pos, limit, offset int64, maxBytes int, maxOffset int64) (ReadResult, bool, error) {
	empty := ReadResult{HighestOffset: -1}
	// Skip batches that end before offset.
	var h record.Header
	for {
		if pos >= limit {
			return empty, false, nil
		}
		var err error
		if h, err = readHeader(s.f, pos, limit); err != nil {
			return empty, false, &CorruptionError{File: s.name, Offset: pos, Err: err}
		}
		if h.LastOffset() >= offset {
			break
		}
		pos += int64(h.Size())
	}
	if h.BaseOffset >= maxOffset {
		return empty, true, nil
	}
	want := int64(max(maxBytes, h.Size()))
	want = min(want, limit-pos)
	buf := make([]byte, want)
	if _, err := s.f.ReadAt(buf, pos); err != nil {
		return empty, false, fmt.Errorf("read %s at %d: %w", s.name, pos, err)
	}
	// Keep whole batches below maxOffset.
	end, highest := 0, int64(-1)
	for end+record.BatchHeaderSize <= len(buf) {
		bh, err := record.ParseHeader(buf[end:])
		if err != nil {
			break
		}
		if bh.BatchLength < record.BatchHeaderSize-12 {
			return empty, false, &CorruptionError{File: s.name, Offset: pos + int64(end), Err: fmt.Errorf("%w: batch length %d", record.ErrCorrupt, bh.BatchLength)}
		}
		if end+bh.Size() > len(buf) || bh.BaseOffset >= maxOffset {
			break
		}
		end += bh.Size()
		highest = bh.LastOffset()
	}
	return ReadResult{Records: buf[:end:end], HighestOffset: highest}, true, nil
}

// Flush fsyncs the active segment's data (finishSync). The fsync runs
// without mu, so appends and reads continue while it waits for the disk.
func (l *Log) Flush() error {
	l.ioMu.RLock()
	defer l.ioMu.RUnlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.failed != nil {
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
	}
	p := l.prepareSync()
	l.mu.Unlock()
	if p == nil {
		return nil
	}
	return l.finishSync(p)
}

// pendingSync is an fsync prepared under mu and finished without it.
type pendingSync struct {
	seg       *segment
	unflushed int64
	leo       int64 // the log end the fsync makes durable
	err       error
}

// prepareSync writes the active segment's pending index entries and marks
// the log clean; nil when there is nothing to sync. Called with mu held
// (and ioMu shared, which keeps the files open until finishSync).
func (l *Log) prepareSync() *pendingSync {
	if !l.dirty {
		return nil
	}
	seg := l.active()
	p := &pendingSync{seg: seg, unflushed: l.unflushed, leo: l.leo}
	if err := seg.offIdx.persist(); err != nil {
		p.err = err
	} else if err := seg.timeIdx.persist(); err != nil {
		p.err = err
	}
	l.dirty, l.unflushed = false, 0
	return p
}

// finishSync fsyncs what prepareSync captured: the active segment's data
// only. Its indexes are written but not fsynced (one fsync per round, not
// three: at many partitions the fsyncs are most of a round): after a
// crash recovery rebuilds the last segment's indexes from its data
// (recoverSegment), and a segment is fsynced whole when sealed. A failed
// fsync fails the log (ErrLogFailed until reopened): the kernel may have
// dropped the dirty pages it could not write and report the next fsync
// as a success (PostgreSQL's "fsyncgate"), so retrying would call
// durable what is not. Reopening re-reads the tail from the file.
func (l *Log) finishSync(p *pendingSync) error {
	err := p.err
	if err == nil {
		err = p.seg.f.Sync()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.syncDone.Broadcast()
	if err != nil {
		err = fmt.Errorf("flush %s: %w", p.seg.name, err)
		if l.failed == nil {
			l.failed = err
			l.logger.Error(err, "fsync failed; the log refuses writes until reopened", "segment", p.seg.name)
		}
		l.dirty = true
		l.unflushed += p.unflushed
		l.reportFailure(err)
		return err
	}
	l.durable = max(l.durable, p.leo)
	if !l.dirty {
		l.stopFlushLocked() // nothing left for the timer
	}
	return nil
}

// DurableEnd is the log end offset as of the last successful fsync: the
// offsets below it survive a power loss.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return min(l.durable, l.leo)
}

// FlushTo returns once every offset below end is durable (fsynced),
// fsyncing if no fsync in flight covers them; end beyond the log end
// means the log end. Concurrent callers share fsyncs (group commit).
// acks=all acknowledgements and follower fetch positions wait on it, so
// that nothing acknowledged lives only in a page cache.
func (l *Log) FlushTo(end int64) error {
	l.mu.Lock()
	for {
		switch {
		case l.closed:
			l.mu.Unlock()
			return ErrClosed
		case l.failed != nil:
			err := fmt.Errorf("%w: %w", ErrLogFailed, l.failed)
			l.mu.Unlock()
			return err
		case l.durable >= min(end, l.leo):
			l.mu.Unlock()
			return nil
		case l.dirty:
			l.mu.Unlock()
			if err := l.Flush(); err != nil {
				return err
			}
			l.mu.Lock()
		default:
			// Not dirty and not durable: an fsync prepared by another
			// caller covers it and is running.
			l.syncDone.Wait()
		}
	}
}

// reportFailure tells the WithOnFailure callback about a failed write
// (called with mu held; the callback runs on its own goroutine).
func (l *Log) reportFailure(err error) {
	if l.onFailure != nil {
		go l.onFailure(fmt.Errorf("log %s: %w", l.dir, err))
	}
}

// armFlushLocked starts the flush timer when the log has turned dirty
// and FlushInterval asks for timed fsyncs: the data appended now is
// fsynced at most FlushInterval later (sooner if an acks=all wait, a
// follower's report or a roll fsyncs first, which stops the timer).
// Called with mu held.
func (l *Log) armFlushLocked() {
	iv := l.cfg.FlushInterval
	if l.flushTimer != nil || l.closed || iv <= 0 || iv >= math.MaxInt64/2 {
		return
	}
	tok := new(struct{})
	l.flushToken = tok
	l.flushTimer = time.AfterFunc(iv, func() { l.timedFlush(tok) })
}

// stopFlushLocked disarms the flush timer. A callback already running
// finds its token gone and does nothing. Called with mu held.
func (l *Log) stopFlushLocked() {
	if l.flushTimer != nil {
		l.flushTimer.Stop()
	}
	l.flushTimer, l.flushToken = nil, nil
}

// timedFlush is the flush timer's callback (its own goroutine).
func (l *Log) timedFlush(tok *struct{}) {
	l.mu.Lock()
	if l.flushToken != tok || l.closed {
		l.mu.Unlock()
		return
	}
	l.flushTimer, l.flushToken = nil, nil
	l.mu.Unlock()
	if err := l.Flush(); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Error(err, "periodic flush failed")
	}
}

// Close flushes, writes the clean shutdown marker and closes all files.
// The Log is unusable afterwards.
func (l *Log) Close() error {
	err := l.shutdown(true)
	return err
}

func (l *Log) shutdown(clean bool) error {
	// A timed flush in progress holds ioMu shared until its fsync ends.
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.stopFlushLocked()
	l.syncDone.Broadcast()
	close(l.waitCh)
	l.subs.Signal()
	var errs []error
	if clean && l.failed == nil {
		if err := l.active().sync(); err != nil {
			errs = append(errs, err)
		}
		if err := l.writeProducerSnapshot(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range l.segs {
		errs = append(errs, s.close())
	}
	if clean && l.failed == nil && errors.Join(errs...) == nil {
		errs = append(errs, writeFileAtomic(l.fs, l.dir, l.path(cleanShutdownFile), nil))
	}
	l.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	if err := l.shutdown(false); err != nil {
		l.logger.Error(err, "closing a log being deleted")
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete log %s: %w", l.dir, err)
	}
	return nil
}
