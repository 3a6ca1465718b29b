package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/strata-dev/strata/broker/record"
)

// Transactions, partition side (Kafka's ProducerStateManager transaction
// part and the .txnindex files).
//
// A producer's transactional batch that finds no ongoing transaction for
// it starts one at its base offset; the producer's COMMIT or ABORT control
// batch (the marker WriteTxnMarkers appends) ends it. The first unstable
// offset is the smallest first offset of an ongoing transaction, or of a
// completed one whose marker is not yet below the high watermark (Kafka's
// unreplicated transactions: a marker that a failover could still lose);
// the last stable offset (LSO) is min(first unstable offset, high
// watermark). read_committed consumers read below the LSO only.
//
// Every aborted transaction is an entry of the aborted-transaction index:
// producer id, first offset, last offset (the marker) and the LSO right
// after the abort, kept in memory per segment and in the segment's
// <base>.txnindex file (Kafka's format: 34-byte entries, version int16 (0)
// | producerId int64 | firstOffset int64 | lastOffset int64 |
// lastStableOffset int64, big endian), in the segment that holds the
// marker. Entries are appended as markers are, fsynced with the segment,
// and derived data: Open rebuilds those of the batches it replays into
// producer state, and a segment whose file is missing, torn or
// inconsistent is rebuilt by replaying from the producer snapshot at or
// below its base.

const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 34
)

// ErrInvalidTxnState: a producer with an ongoing transaction sent a
// non-transactional batch (INVALID_TXN_STATE).
var ErrInvalidTxnState = errors.New("invalid transaction state")

// AbortedTxn is an entry of the aborted-transaction index.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // offset of the ABORT marker
	// LastStableOffset is the LSO once this transaction completed: an
	// entry with LastStableOffset >= X ends the search for transactions
	// starting below X.
	LastStableOffset int64
}

// completedTxn is a transaction a marker ended in this partition.
type completedTxn struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64
	aborted     bool
	lso         int64 // the LSO right after the marker (AbortedTxn.LastStableOffset)
}

// txnIndex is a segment's aborted transactions. Guarded by Log.mu; the
// file is written with WriteAt at the end of the entries.
type txnIndex struct {
	name    string
	f       File
	entries []AbortedTxn // ordered by LastOffset
	// stale: the file was missing or inconsistent when opened; Open
	// rebuilds the entries from the segment.
	stale bool
}

func encodeAbortedTxn(e AbortedTxn) []byte {
	b := make([]byte, txnIndexEntrySize)
	be := binary.BigEndian
	be.PutUint16(b[0:], 0)
	be.PutUint64(b[2:], uint64(e.ProducerID))
	be.PutUint64(b[10:], uint64(e.FirstOffset))
	be.PutUint64(b[18:], uint64(e.LastOffset))
	be.PutUint64(b[26:], uint64(e.LastStableOffset))
	return b
}

// openTxnIndex opens a segment's aborted-transaction index. A missing
// file is not created here (an empty one would look valid after a failed
// Open): it is marked stale and written by rewrite once rebuilt. With
// O_CREATE in flag (a new segment) it is created empty.
func openTxnIndex(fs FS, dir string, base int64, flag int) (*txnIndex, error) {
	ti := &txnIndex{name: segmentName(dir, base, txnIndexSuffix)}
	if flag&os.O_CREATE == 0 {
		if _, err := fs.Stat(ti.name); err != nil {
			ti.stale = true
			return ti, nil
		}
	}
	f, err := fs.OpenFile(ti.name, os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, err
	}
	ti.f = f
	return ti, nil
}

// EncodeTxnIndex returns entries in the .txnindex file format (the slow
// tier uploads a segment's entries in it, as Kafka uploads the file).
func EncodeTxnIndex(entries []AbortedTxn) []byte {
	out := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, e := range entries {
		out = append(out, encodeAbortedTxn(e)...)
	}
	return out
}

// DecodeTxnIndex parses a .txnindex file and checks it against the
// offsets [base, next) of the segment it belongs to: whole entries,
// version 0, ordered by last offset, inside the segment, first <= last.
// Anything else is record.ErrCorrupt.
func DecodeTxnIndex(buf []byte, base, next int64) ([]AbortedTxn, error) {
	if len(buf)%txnIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: transaction index of %d bytes is not whole %d-byte entries", record.ErrCorrupt, len(buf), txnIndexEntrySize)
	}
	be := binary.BigEndian
	prev := int64(-1)
	out := make([]AbortedTxn, 0, len(buf)/txnIndexEntrySize)
	for i := 0; i < len(buf); i += txnIndexEntrySize {
		e := buf[i:]
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(e[2:])),
			FirstOffset:      int64(be.Uint64(e[10:])),
			LastOffset:       int64(be.Uint64(e[18:])),
			LastStableOffset: int64(be.Uint64(e[26:])),
		}
		if v := be.Uint16(e); v != 0 || a.LastOffset <= prev || a.LastOffset < base || a.LastOffset >= next || a.FirstOffset > a.LastOffset {
			return nil, fmt.Errorf("%w: transaction index entry %d (version %d, first %d, last %d) out of order or outside [%d, %d)", record.ErrCorrupt, i/txnIndexEntrySize, v, a.FirstOffset, a.LastOffset, base, next)
		}
		prev = a.LastOffset
		out = append(out, a)
	}
	return out, nil
}

// load reads the entries and checks them against the segment's offsets
// [base, next) (DecodeTxnIndex). A bad file marks the index stale.
func (ti *txnIndex) load(base, next int64) error {
	ti.entries = nil
	if ti.stale {
		return nil
	}
	st, err := ti.f.Stat()
	if err != nil {
		return err
	}
	if st.Size()%txnIndexEntrySize != 0 {
		ti.stale = true
		return nil
	}
	buf := make([]byte, st.Size())
	if _, err := ti.f.ReadAt(buf, 0); err != nil && len(buf) > 0 {
		return fmt.Errorf("read %s: %w", ti.name, err)
	}
	entries, err := DecodeTxnIndex(buf, base, next)
	if err != nil {
		ti.stale = true
		return nil
	}
	if len(entries) > 0 {
		ti.entries = entries
	}
	return nil
}

// add appends an entry to memory and to the file (memory only while the
// index is stale: rewrite writes the file).
func (ti *txnIndex) add(e AbortedTxn) error {
	pos := int64(len(ti.entries)) * txnIndexEntrySize
	ti.entries = append(ti.entries, e)
	if ti.stale || ti.f == nil {
		return nil
	}
	if _, err := ti.f.WriteAt(encodeAbortedTxn(e), pos); err != nil {
		return fmt.Errorf("write %s: %w", ti.name, err)
	}
	return nil
}

// rewrite replaces the file with the entries in memory (atomically) and
// reopens it.
func (ti *txnIndex) rewrite(fs FS, dir string) error {
	data := EncodeTxnIndex(ti.entries)
	if err := writeFileAtomic(fs, dir, ti.name, data); err != nil {
		return fmt.Errorf("rewrite %s: %w", ti.name, err)
	}
	f, err := fs.OpenFile(ti.name, os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if ti.f != nil {
		ti.f.Close()
	}
	ti.f, ti.stale = f, false
	return nil
}

// dropFrom forgets entries whose marker is at or above offset; reports
// whether any went.
func (ti *txnIndex) dropFrom(offset int64) bool {
	i := sort.Search(len(ti.entries), func(i int) bool { return ti.entries[i].LastOffset >= offset })
	if i == len(ti.entries) {
		return false
	}
	ti.entries = ti.entries[:i:i]
	return true
}

// markers parses the markers of the control batches among batches (nil
// entries for data batches, and for control batches that hold no
// transaction marker: those are logged and do not end a transaction).
func (l *Log) markers(batches []record.Batch, headers []record.Header) []*record.Marker {
	var out []*record.Marker
	for i, h := range headers {
		if !h.IsControl() {
			continue
		}
		if out == nil {
			out = make([]*record.Marker, len(headers))
		}
		m, err := record.ParseMarker(batches[i])
		if err != nil {
			l.logger.Info("control batch without a transaction marker", "offset", h.BaseOffset, "reason", err.Error())
			continue
		}
		out[i] = &m
	}
	return out
}

// completeTxnsLocked records transactions that markers just ended: aborted
// ones enter the index of seg (all of done's markers are in seg), and all stay unstable until the high
// watermark passes their marker. Called with mu held, after
// producers.commit.
func (l *Log) completeTxnsLocked(seg *segment, done []completedTxn) error {
	var errs []error
	for _, c := range done {
		if c.aborted {
			errs = append(errs, seg.txn.add(AbortedTxn{ProducerID: c.producerID, FirstOffset: c.firstOffset, LastOffset: c.lastOffset, LastStableOffset: c.lso}))
		}
		l.unreplicated = append(l.unreplicated, c)
	}
	return errors.Join(errs...)
}

// pruneUnreplicatedLocked forgets completed transactions whose marker is
// below the largest high watermark seen. Called with mu held.
func (l *Log) pruneUnreplicatedLocked() {
	hwm := l.stableHWM.Load()
	n := 0
	for _, c := range l.unreplicated {
		if c.lastOffset >= hwm {
			l.unreplicated[n] = c
			n++
		}
	}
	clear(l.unreplicated[n:])
	l.unreplicated = l.unreplicated[:n]
}

// LastStableOffset is the LSO given the partition's high watermark hwm:
// the smallest first offset of a transaction that is ongoing or whose
// marker is at or above hwm, capped by hwm, and never below the log start.
// It also remembers hwm: completed transactions below it are stable for
// good.
func (l *Log) LastStableOffset(hwm int64) int64 {
	l.NoteHighWatermark(hwm)
	l.mu.RLock()
	defer l.mu.RUnlock()
	lso := hwm
	for _, first := range l.producers.ongoing {
		lso = min(lso, first)
	}
	for _, c := range l.unreplicated {
		if c.lastOffset >= hwm {
			lso = min(lso, c.firstOffset)
		}
	}
	return max(lso, min(l.start, hwm))
}

// NoteHighWatermark tells the log that the partition's high watermark
// reached hwm: completed transactions whose marker is below it are stable
// for good, and the next append forgets them (without it, a partition
// that nobody reads would keep every completed transaction).
func (l *Log) NoteHighWatermark(hwm int64) {
	for {
		cur := l.stableHWM.Load()
		if hwm <= cur || l.stableHWM.CompareAndSwap(cur, hwm) {
			return
		}
	}
}

// OngoingTxns returns how many producers have a transaction open in this
// partition (a gauge).
func (l *Log) OngoingTxns() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.producers.ongoing)
}

// AbortedTxns returns the aborted transactions that overlap [from, upTo):
// last offset at or after from and first offset below upTo (a
// read_committed fetch's AbortedTransactions), ordered by last offset.
func (l *Log) AbortedTxns(from, upTo int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		es := l.segs[i].txn.entries
		j := sort.Search(len(es), func(k int) bool { return es[k].LastOffset >= from })
		for ; j < len(es); j++ {
			e := es[j]
			if e.FirstOffset < upTo {
				out = append(out, e)
			}
			if e.LastStableOffset >= upTo {
				// Every later transaction started at or after this one's
				// LSO (see AbortedTxn.LastStableOffset).
				return out
			}
		}
	}
	return out
}

// rebuildTxnIndexes runs at the end of rebuildProducers: the entries of
// every marker replayed from from on were regenerated into memory; write
// the files of the segments that changed.
func (l *Log) persistTxnIndexes(changed map[*segment]bool) error {
	for _, s := range l.segs {
		if changed[s] || s.txn.stale {
			if err := s.txn.rewrite(l.fs, l.dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// VerificationGuard is KIP-890 part 1's verification state of one
// producer in one partition (Kafka's VerificationGuard): the partition
// leader creates it before it asks the transaction coordinator whether
// the partition is part of the producer's ongoing transaction, and the
// append of the producer's first transactional batch succeeds only while
// the guard is still the producer's current one. A marker for the
// producer (the transaction ended) or the start of its transaction in
// the partition clears it, so a verification that was answered before a
// marker but is appended after it is refused (INVALID_TXN_STATE) instead
// of opening a transaction no marker will ever end.
//
// verified caches the coordinator's positive answer for the requests of
// the same transaction that come before its first batch is appended; it
// is set only while the guard is current (TxnVerified) and is guarded by
// Log.mu.
type VerificationGuard struct {
	producerID int64
	epoch      int16
	createdMs  int64
	verified   bool
}

// StartTxnVerification returns producerID's verification guard for a
// transactional batch at producerEpoch: nil when the producer already has
// a transaction open in the partition at that epoch (nothing to verify;
// AppendAsLeaderVerified still refuses the batch if a marker ends the
// transaction before it is appended), else the current guard of that
// epoch, made now if there is none. A guard for an epoch older than the
// current guard's is never current (the append is refused).
func (l *Log) StartTxnVerification(producerID int64, producerEpoch int16) *VerificationGuard {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.producers.m[producerID]; e != nil && e.TxnFirst >= 0 && e.Epoch == producerEpoch {
		return nil
	}
	cur := l.producers.verifying[producerID]
	if cur != nil && cur.epoch == producerEpoch {
		return cur
	}
	g := &VerificationGuard{producerID: producerID, epoch: producerEpoch, createdMs: l.nowMs()}
	if cur == nil || cur.epoch < producerEpoch {
		if l.producers.verifying == nil {
			l.producers.verifying = map[int64]*VerificationGuard{}
		}
		l.producers.verifying[producerID] = g
	}
	return g
}

// TxnVerified records the coordinator's positive answer for g and
// reports whether g is still current; false means a marker ended the
// transaction (or a newer epoch replaced the guard) while the
// coordinator was asked: the answer is stale and is not remembered.
func (l *Log) TxnVerified(g *VerificationGuard) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g == nil || l.producers.verifying[g.producerID] != g {
		return false
	}
	g.verified = true
	return true
}

// IsTxnVerified reports whether the coordinator already confirmed g's
// transaction and g is still current (no need to ask again).
func (l *Log) IsTxnVerified(g *VerificationGuard) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return g != nil && g.verified && l.producers.verifying[g.producerID] == g
}

// checkVerifiedLocked refuses (ErrInvalidTxnState) the transactional
// batches among headers that would start a transaction of their producer
// without guard being its current verification guard: KIP-890's check
// under the append lock. Called with mu held, for verified leader appends.
func (l *Log) checkVerifiedLocked(headers []record.Header, guard *VerificationGuard) error {
	for _, h := range headers {
		if h.ProducerID < 0 || !h.IsTransactional() || h.IsControl() {
			continue
		}
		if e := l.producers.m[h.ProducerID]; e != nil && e.TxnFirst >= 0 {
			continue // a transaction is open: verified when it started
		}
		if guard == nil || guard.producerID != h.ProducerID || guard.epoch != h.ProducerEpoch || l.producers.verifying[h.ProducerID] != guard {
			return fmt.Errorf("producer %d epoch %d: the transaction's verification ended before its first batch was appended (a marker ended it): %w",
				h.ProducerID, h.ProducerEpoch, ErrInvalidTxnState)
		}
	}
	return nil
}

// clearVerificationLocked drops the guards of the producers whose
// transaction a marker among headers ended or a transactional batch
// started: verification answers given before are stale or not needed.
// Called with mu held after a successful append (leader and follower).
func (l *Log) clearVerificationLocked(headers []record.Header) {
	if len(l.producers.verifying) == 0 {
		return
	}
	for _, h := range headers {
		if h.ProducerID >= 0 && (h.IsControl() || h.IsTransactional()) {
			delete(l.producers.verifying, h.ProducerID)
		}
	}
}
