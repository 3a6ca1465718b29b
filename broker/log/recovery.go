package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/record"
)

const (
	cleanShutdownFile    = ".clean-shutdown"
	startOffsetFile      = "log-start-offset-checkpoint"
	checkpointTmpSuffix  = ".tmp"
	segmentNameDigits    = 20
	maxRecoveryBatchSize = 1 << 31
)

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// Open opens the log in dir, creating it if needed, and recovers it:
//
//   - After a clean shutdown (marker file present) the last segment's
//     batches after its last index entry are checked; everything else is
//     trusted apart from cheap index sanity checks.
//   - After a crash the whole last segment is checked batch by batch (CRC,
//     framing, increasing offsets) and its indexes are rebuilt. Earlier
//     segments were fsynced before the next one was created and are not
//     re-read.
//   - The first bad batch of the last segment and everything after it is
//     a torn tail: it is truncated away and logged.
//   - A missing or inconsistent index of any segment is rebuilt by
//     scanning the segment; a bad batch found while doing so in a segment
//     other than the last is a *CorruptionError (nothing is deleted).
//
// See docs/storage.md for the table of outcomes.
func Open(dir string, cfg Config, opts ...Option) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := options{logger: logr.Discard(), now: time.Now, fs: OSFS{}}
	for _, opt := range opts {
		opt(&o)
	}
	l := &Log{
		dir: dir, fs: o.fs, logger: o.logger.WithValues("log", dir), now: o.now, cfg: cfg,
		waitCh: make(chan struct{}),
		epochs: epochCache{fs: o.fs, dir: dir}, onFailure: o.onFailure,
	}
	l.syncDone = sync.NewCond(&l.mu)
	if err := l.recover(); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, nil
}

func (l *Log) recover() error {
	if _, err := l.fs.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		// A new partition: its directory must survive a power loss
		// once a write in it was acknowledged.
		if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
			return err
		}
		if err := syncDir(l.fs, filepath.Dir(l.dir)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	// An interrupted log cleaner swap is finished (or its output dropped)
	// before the segments are listed.
	if err := l.recoverCleanerSwap(); err != nil {
		return err
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	orphans := map[int64][]string{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, checkpointTmpSuffix) {
			if err := l.fs.Remove(l.path(name)); err != nil {
				return err
			}
			continue
		}
		ext := filepath.Ext(name)
		stem := strings.TrimSuffix(name, ext)
		if len(stem) != segmentNameDigits || (ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix && ext != txnIndexSuffix) {
			continue
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil || base < 0 {
			continue
		}
		if ext == logSuffix {
			bases = append(bases, base)
		} else {
			orphans[base] = append(orphans[base], name)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, b := range bases {
		delete(orphans, b)
	}
	for _, names := range orphans { // indexes whose .log is gone (deleted segment)
		for _, n := range names {
			if err := l.fs.Remove(l.path(n)); err != nil {
				return err
			}
		}
	}

	_, statErr := l.fs.Stat(l.path(cleanShutdownFile))
	clean := statErr == nil
	if clean {
		// From here on a crash must count as unclean.
		if err := l.fs.Remove(l.path(cleanShutdownFile)); err != nil {
			return err
		}
		if err := syncDir(l.fs, l.dir); err != nil {
			return err
		}
	}

	start, err := l.loadStartOffset()
	if err != nil {
		return err
	}
	if err := l.loadCleanerState(); err != nil {
		return err
	}
	if err := l.epochs.load(); err != nil {
		return err
	}
	loadedEpochs := len(l.epochs.entries)

	for i, base := range bases {
		s, err := openSegmentFiles(l.fs, l.dir, base, 0)
		if err != nil {
			return fmt.Errorf("open segment %d: %w", base, err)
		}
		l.segs = append(l.segs, s)
		last := i == len(bases)-1
		if !last {
			s.next = bases[i+1]
		}
		if err := l.recoverSegment(s, last, clean); err != nil {
			return err
		}
	}
	if len(l.segs) == 0 {
		s, err := createSegment(l.fs, l.dir, start, l.nowMs())
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
		if err := syncDir(l.fs, l.dir); err != nil {
			return err
		}
	}
	for _, s := range l.segs {
		if err := s.txn.load(s.base, s.next); err != nil {
			return err
		}
		if s.txn.stale {
			l.logger.Info("rebuilding the aborted-transaction index", "file", s.txn.name)
		}
	}
	act := l.active()
	l.leo = act.next
	for _, s := range l.segs {
		l.size += s.size
	}
	l.start = max(start, l.segs[0].base)
	if l.start > l.leo {
		l.logger.Info("log start offset is past the recovered log end; moving it back", "start", l.start, "end", l.leo)
		l.start = l.leo
	}
	// A torn tail may have taken offsets the cleaner had reached: data
	// appended there again is dirty.
	l.truncateCleanerState()
	changed := len(l.epochs.entries) != loadedEpochs // epochs found in the recovered tail
	changed = l.epochs.truncateFromEnd(l.leo) || changed
	changed = l.epochs.truncateFromStart(l.start) || changed
	if changed {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}
	if err := l.rebuildProducers(); err != nil {
		return err
	}
	if !clean {
		// The recovered tail may be a killed process's page cache: make
		// it durable before anything counts on it (FlushTo).
		if err := act.sync(); err != nil {
			return err
		}
	}
	l.durable = l.leo
	return nil
}

// recoverSegment loads one segment's state. See Open.
func (l *Log) recoverSegment(s *segment, last, clean bool) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	fileSize := st.Size()
	interval := l.cfg.IndexIntervalBytes

	if last && !clean {
		return l.rebuildTail(s, fileSize, "unclean shutdown")
	}
	if err := l.checkIndexes(s, fileSize, last); err != nil {
		l.logger.Info("rebuilding indexes", "segment", s.name, "reason", err.Error())
		if last {
			return l.rebuildTail(s, fileSize, "inconsistent index")
		}
		if pos, err := s.rebuild(fileSize, interval, nil); err != nil {
			return &CorruptionError{File: s.name, Offset: pos, Err: err}
		}
		s.next = max(s.next, s.base)
		return s.seal()
	}
	if !last {
		return nil
	}
	// Clean shutdown: check the batches after the last index entry and
	// make the indexes the in-memory active ones.
	if err := s.offIdx.load(); err != nil {
		return err
	}
	if err := s.timeIdx.load(); err != nil {
		return err
	}
	from, next := int64(0), s.base
	if s.offIdx.n > 0 {
		e, _ := s.offIdx.entry(s.offIdx.n - 1)
		rel, pos := decodeOffsetEntry(e)
		from, next = int64(pos), s.base
		_ = rel
	}
	if s.timeIdx.n > 0 {
		e, _ := s.timeIdx.entry(s.timeIdx.n - 1)
		ts, rel := decodeTimeEntry(e)
		s.maxTs, s.maxTsOffset, s.lastTimeEntry = ts, s.base+int64(rel), ts
	}
	s.size = from
	s.sinceIndex = 0
	sc := newScanner(s.f, from, fileSize, next)
	first := true
	for {
		b, pos, err := sc.scan()
		if err == io.EOF {
			break
		}
		if err != nil {
			return l.truncateTorn(s, pos, fileSize, err)
		}
		h := b.Header()
		if first && from > 0 {
			// The indexed batch itself was counted when indexed.
			s.size, s.next = pos+int64(h.Size()), h.LastOffset()+1
			if h.MaxTimestamp > s.maxTs {
				s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
			}
			first = false
			continue
		}
		first = false
		s.track(h, pos, interval)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
	}
	if s.size == 0 {
		s.rollTs = l.nowMs()
	} else if err := l.setRollTs(s); err != nil {
		return err
	}
	return nil
}

// setRollTs reads the first batch's max timestamp (segment.ms counts from it).
func (l *Log) setRollTs(s *segment) error {
	h, err := readHeader(s.f, 0, s.size)
	if err != nil {
		return &CorruptionError{File: s.name, Offset: 0, Err: err}
	}
	s.rollTs = h.MaxTimestamp
	if s.rollTs < 0 {
		s.rollTs = l.nowMs()
	}
	return nil
}

// rebuildTail scans the whole last segment, rebuilding its indexes and
// truncating a torn tail.
func (l *Log) rebuildTail(s *segment, fileSize int64, why string) error {
	pos, err := s.rebuild(fileSize, l.cfg.IndexIntervalBytes, func(b record.Batch) {
		h := b.Header()
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
	})
	if err != nil {
		if terr := l.truncateTorn(s, pos, fileSize, err); terr != nil {
			return terr
		}
	}
	l.logger.V(1).Info("recovered last segment", "segment", s.name, "reason", why, "bytes", s.size, "nextOffset", s.next)
	if s.size == 0 {
		s.rollTs = l.nowMs()
		return nil
	}
	return l.setRollTs(s)
}

// truncateTorn cuts the last segment at pos, the first bad batch.
func (l *Log) truncateTorn(s *segment, pos, fileSize int64, cause error) error {
	if !errors.Is(cause, record.ErrCorrupt) && !errors.Is(cause, record.ErrUnsupportedMagic) {
		return fmt.Errorf("recover %s: %w", s.name, cause)
	}
	l.logger.Info("truncating torn tail", "segment", s.name, "position", pos, "droppedBytes", fileSize-pos, "reason", cause.Error())
	if err := s.f.Truncate(pos); err != nil {
		return fmt.Errorf("truncate torn tail of %s: %w", s.name, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.name, err)
	}
	s.size = pos
	return nil
}

// checkIndexes runs cheap sanity checks on a segment's index files: whole
// entries, increasing, pointing inside the segment, and the last offset
// index entry pointing at a batch that ends at the indexed offset.
func (l *Log) checkIndexes(s *segment, fileSize int64, last bool) error {
	if s.missingIndex {
		return fmt.Errorf("index files of %s missing", s.name)
	}
	for _, ix := range []*index{s.offIdx, s.timeIdx} {
		st, err := ix.f.Stat()
		if err != nil {
			return err
		}
		if st.Size()%int64(ix.width) != 0 {
			return fmt.Errorf("%s has %d bytes, not a multiple of %d", ix.name, st.Size(), ix.width)
		}
		ix.n = int(st.Size()) / ix.width
		ix.written = ix.n
	}
	if fileSize > 0 && s.timeIdx.n == 0 && !last {
		return fmt.Errorf("%s is empty for a non-empty sealed segment", s.timeIdx.name)
	}
	// One sequential read per index file (a 1 GiB segment has ~2 MiB of
	// offset index), not a pread per entry.
	offBuf, err := readIndexFile(s.offIdx)
	if err != nil {
		return err
	}
	timeBuf, err := readIndexFile(s.timeIdx)
	if err != nil {
		return err
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i := 0; i < s.offIdx.n; i++ {
		rel, pos := decodeOffsetEntry(offBuf[i*offsetEntrySize:])
		if int64(rel) <= prevRel || int64(pos) <= prevPos || int64(pos) >= fileSize {
			return fmt.Errorf("%s entry %d (%d, %d) out of order or past the data", s.offIdx.name, i, rel, pos)
		}
		prevRel, prevPos = int64(rel), int64(pos)
	}
	if s.offIdx.n > 0 {
		h, err := readHeader(s.f, prevPos, fileSize)
		if err != nil || h.LastOffset() != s.base+prevRel {
			return fmt.Errorf("%s last entry (%d, %d) does not match the batch there", s.offIdx.name, prevRel, prevPos)
		}
	}
	prevTs := int64(-1)
	for i := 0; i < s.timeIdx.n; i++ {
		ts, rel := decodeTimeEntry(timeBuf[i*timeEntrySize:])
		if ts < prevTs || (!last && s.base+int64(rel) >= s.next) {
			return fmt.Errorf("%s entry %d (%d, %d) out of order or past the segment", s.timeIdx.name, i, ts, rel)
		}
		prevTs = ts
	}
	if !last {
		s.size = fileSize
		if s.timeIdx.n > 0 {
			e, _ := s.timeIdx.entry(s.timeIdx.n - 1)
			ts, rel := decodeTimeEntry(e)
			s.maxTs, s.maxTsOffset, s.lastTimeEntry = ts, s.base+int64(rel), ts
		}
		if fileSize > 0 {
			h, err := readHeader(s.f, 0, fileSize)
			if err != nil {
				return err
			}
			s.rollTs = h.MaxTimestamp
		}
	}
	return nil
}

func readIndexFile(ix *index) ([]byte, error) {
	buf := make([]byte, ix.n*ix.width)
	if _, err := ix.f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", ix.name, err)
	}
	return buf, nil
}

func (l *Log) loadStartOffset() (int64, error) {
	data, err := readFile(l.fs, l.path(startOffsetFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	lines := strings.Fields(string(data))
	if len(lines) != 2 || lines[0] != "0" {
		return 0, &CorruptionError{File: l.path(startOffsetFile), Offset: -1, Err: fmt.Errorf("unexpected content %q", data)}
	}
	off, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || off < 0 {
		return 0, &CorruptionError{File: l.path(startOffsetFile), Offset: -1, Err: fmt.Errorf("bad offset %q", lines[1])}
	}
	return off, nil
}

func (l *Log) persistStartOffset(start int64) error {
	if err := writeFileAtomic(l.fs, l.dir, l.path(startOffsetFile), []byte(fmt.Sprintf("0\n%d\n", start))); err != nil {
		return fmt.Errorf("write %s: %w", startOffsetFile, err)
	}
	return nil
}
