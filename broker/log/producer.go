package log

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-dev/strata/broker/record"
)

// Idempotent producer errors returned by AppendAsLeader.
var (
	// ErrDuplicateSequence: the batch was already appended (a producer
	// retry). AppendResult carries the original batch's offsets; the
	// broker answers the Produce request with success, as Kafka does.
	ErrDuplicateSequence = errors.New("duplicate sequence number")
	// ErrOutOfOrderSequence: the batch's first sequence does not follow
	// the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than
	// the producer's current one (INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	// ErrCoordinatorFenced: a transaction marker's coordinator epoch is
	// older than the one of the producer's last marker in this partition:
	// a stale coordinator's (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("transaction coordinator fenced")
)

// maxProducerBatches is how many recent batches are kept per producer:
// Kafka's limit of 5 in-flight requests per idempotent producer.
const maxProducerBatches = 5

const snapshotSuffix = ".snapshot"

// producerBatch is what is remembered of a producer's recent batch.
type producerBatch struct {
	FirstSeq    int32 `json:"firstSeq"`
	LastSeq     int32 `json:"lastSeq"`
	firstOffset int64
	lastOffset  int64
	appendTime  int64 // LogAppendTime stamped, -1 for CreateTime
}

// producerEntry is the state of one producer id in this partition.
type producerEntry struct {
	Epoch    int16           `json:"epoch"`
	Batches  []producerBatch `json:"batches"` // oldest first, at most maxProducerBatches
	lastSeen int64           // ms: clock at the last append, or the batch's MaxTimestamp when replayed
	// TxnFirst is the first offset of the producer's ongoing transaction
	// in this partition, -1 when none (txn.go).
	TxnFirst int64 `json:"-"`
	// coordEpoch is the coordinator epoch of the producer's last marker,
	// -1 before any (DescribeProducers).
	coordEpoch int32
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

func (e *producerEntry) lastOffset() int64 {
	if len(e.Batches) == 0 {
		return -1
	}
	return e.Batches[len(e.Batches)-1].lastOffset
}

func (e *producerEntry) add(b producerBatch) {
	e.Batches = append(e.Batches, b)
	if len(e.Batches) > maxProducerBatches {
		e.Batches = append(e.Batches[:0], e.Batches[len(e.Batches)-maxProducerBatches:]...)
	}
}

// producerStates maps producer id to its state. Guarded by Log.mu.
type producerStates struct {
	m map[int64]*producerEntry
	// ongoing maps the producers with an open transaction to its first
	// offset (the entries' TxnFirst, indexed for the LSO).
	ongoing map[int64]int64
	// verifying holds the KIP-890 verification guard of each producer
	// whose transaction is being verified with its coordinator
	// (txn.go, StartTxnVerification).
	verifying map[int64]*VerificationGuard
}

// pendingProducers are the entries an append will install once written.
type pendingProducers map[int64]*producerEntry

func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// check validates the idempotent producer fields of batches about to be
// appended at leo. Leaders check epochs, duplicates and sequence order;
// followers only track. A duplicate returns its original metadata.
// markers holds the parsed marker of each control batch (nil for others,
// or nil as a whole when there is none): a marker ends the producer's
// transaction, returned in done.
func (p *producerStates) check(headers []record.Header, markers []*record.Marker, asLeader bool, leo int64) (pendingProducers, []completedTxn, *producerBatch, error) {
	var pending pendingProducers
	var done []completedTxn
	off := leo
	for i, h := range headers {
		first := off
		if !asLeader {
			first = h.BaseOffset
		}
		off = first + int64(h.LastOffsetDelta) + 1
		if h.ProducerID < 0 {
			continue
		}
		var marker *record.Marker
		if markers != nil {
			marker = markers[i]
		}
		if h.IsControl() && marker == nil {
			continue
		}
		if pending == nil {
			pending = pendingProducers{}
		}
		cur, ok := pending[h.ProducerID]
		if !ok {
			cur = &producerEntry{Epoch: -1, TxnFirst: -1, coordEpoch: -1}
			if e := p.m[h.ProducerID]; e != nil {
				cur.Epoch, cur.Batches, cur.lastSeen, cur.TxnFirst, cur.coordEpoch = e.Epoch, append([]producerBatch(nil), e.Batches...), e.lastSeen, e.TxnFirst, e.coordEpoch
			}
			pending[h.ProducerID] = cur
		}
		if marker != nil {
			// A transaction marker: the coordinator's epoch for the
			// producer. An older one is a zombie coordinator's or a
			// fenced producer's; a newer one fences the producer's
			// older epoch (its sequences restart).
			if asLeader && cur.Epoch >= 0 && h.ProducerEpoch < cur.Epoch {
				return nil, nil, nil, fmt.Errorf("producer %d marker epoch %d is older than %d: %w", h.ProducerID, h.ProducerEpoch, cur.Epoch, ErrInvalidProducerEpoch)
			}
			// Kafka's checkCoordinatorEpoch: a marker from a coordinator
			// older than the one that wrote the producer's last marker
			// here is a late retry of a coordinator that lost the
			// transactional ID; at the same producer epoch it would end
			// the producer's next transaction.
			if asLeader && cur.coordEpoch >= 0 && marker.CoordinatorEpoch < cur.coordEpoch {
				return nil, nil, nil, fmt.Errorf("producer %d marker coordinator epoch %d is older than %d: %w", h.ProducerID, marker.CoordinatorEpoch, cur.coordEpoch, ErrCoordinatorFenced)
			}
			if h.ProducerEpoch != cur.Epoch {
				cur.Epoch, cur.Batches = h.ProducerEpoch, nil
			}
			cur.coordEpoch = marker.CoordinatorEpoch
			if cur.TxnFirst >= 0 {
				done = append(done, completedTxn{producerID: h.ProducerID, firstOffset: cur.TxnFirst, lastOffset: first,
					aborted: marker.Type == record.ControlAbort, lso: p.lsoAfter(h.ProducerID, first, pending)})
				cur.TxnFirst = -1
			}
			continue
		}
		meta := producerBatch{FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(), firstOffset: first, lastOffset: off - 1, appendTime: -1}
		if asLeader {
			known := cur.Epoch >= 0
			if known && h.ProducerEpoch < cur.Epoch {
				return nil, nil, nil, fmt.Errorf("producer %d epoch %d is older than %d: %w", h.ProducerID, h.ProducerEpoch, cur.Epoch, ErrInvalidProducerEpoch)
			}
			if known && h.ProducerEpoch == cur.Epoch {
				for i := range cur.Batches {
					if d := cur.Batches[i]; d.FirstSeq == meta.FirstSeq && d.LastSeq == meta.LastSeq {
						if h.IsTransactional() && cur.TxnFirst < 0 {
							// The batch it repeats belonged to a transaction
							// that has ended here since (a transactional batch
							// opens one, only a marker closes it): not a retry
							// within the producer's transaction. A client that
							// took that batch for unsent reuses its sequence in
							// the next transaction at the same epoch; answering
							// "duplicate, success" would commit that
							// transaction without this record (strata chaos
							// found it: a committed transaction visible on one
							// partition of three). Out of order: the client
							// aborts and bumps its epoch.
							return nil, nil, nil, fmt.Errorf("producer %d epoch %d sequence %d..%d repeats the batch at offset %d of a transaction that has ended: %w",
								h.ProducerID, h.ProducerEpoch, d.FirstSeq, d.LastSeq, d.firstOffset, ErrOutOfOrderSequence)
						}
						return nil, nil, &d, fmt.Errorf("producer %d epoch %d sequence %d..%d at offset %d: %w", h.ProducerID, h.ProducerEpoch, d.FirstSeq, d.LastSeq, d.firstOffset, ErrDuplicateSequence)
					}
				}
				// No known batches (all below the log start): any sequence.
				if len(cur.Batches) > 0 && !inSequence(cur.lastSeq(), meta.FirstSeq) {
					return nil, nil, nil, fmt.Errorf("producer %d epoch %d: sequence %d does not follow %d: %w", h.ProducerID, h.ProducerEpoch, meta.FirstSeq, cur.lastSeq(), ErrOutOfOrderSequence)
				}
				if cur.TxnFirst >= 0 && !h.IsTransactional() {
					return nil, nil, nil, fmt.Errorf("producer %d sent a non-transactional batch during its transaction (started at offset %d): %w", h.ProducerID, cur.TxnFirst, ErrInvalidTxnState)
				}
			}
			if known && h.ProducerEpoch > cur.Epoch && meta.FirstSeq != 0 {
				return nil, nil, nil, fmt.Errorf("producer %d new epoch %d must start at sequence 0, not %d: %w", h.ProducerID, h.ProducerEpoch, meta.FirstSeq, ErrOutOfOrderSequence)
			}
		}
		if h.ProducerEpoch != cur.Epoch {
			cur.Epoch, cur.Batches = h.ProducerEpoch, nil
		}
		if h.IsTransactional() && cur.TxnFirst < 0 {
			cur.TxnFirst = first
		}
		cur.add(meta)
	}
	return pending, done, nil, nil
}

// lsoAfter is the LSO once producerID's transaction ended at marker: the
// first offset of the oldest other open transaction (as of the batches
// checked so far), else the offset after the marker.
func (p *producerStates) lsoAfter(producerID, marker int64, pending pendingProducers) int64 {
	lso := marker + 1
	for id, first := range p.ongoing {
		if _, ok := pending[id]; !ok && id != producerID {
			lso = min(lso, first)
		}
	}
	for id, e := range pending {
		if id != producerID && e.TxnFirst >= 0 {
			lso = min(lso, e.TxnFirst)
		}
	}
	return lso
}

// commit installs the pending entries of a successful append.
func (p *producerStates) commit(pending pendingProducers, appendTime, nowMs int64) {
	if len(pending) == 0 {
		return
	}
	if p.m == nil {
		p.m = map[int64]*producerEntry{}
	}
	for id, e := range pending {
		if appendTime >= 0 {
			for i := range e.Batches {
				if e.Batches[i].appendTime < 0 {
					e.Batches[i].appendTime = appendTime
				}
			}
		}
		e.lastSeen = max(e.lastSeen, nowMs)
		p.m[id] = e
		p.track(id, e)
	}
}

// track keeps the ongoing index in step with an entry.
func (p *producerStates) track(id int64, e *producerEntry) {
	if e != nil && e.TxnFirst >= 0 {
		if p.ongoing == nil {
			p.ongoing = map[int64]int64{}
		}
		p.ongoing[id] = e.TxnFirst
		return
	}
	delete(p.ongoing, id)
}

// forget removes a producer.
func (p *producerStates) forget(id int64) {
	delete(p.m, id)
	delete(p.ongoing, id)
}

// expire forgets producers idle for ttl or longer (Kafka's
// producer.id.expiration.ms); ttl <= 0 keeps them.
func (p *producerStates) expire(nowMs, ttlMs int64) {
	if ttlMs <= 0 {
		return
	}
	for id, e := range p.m {
		// A producer with an open transaction stays: its transaction
		// holds the LSO until the coordinator ends it.
		if nowMs-e.lastSeen >= ttlMs && e.TxnFirst < 0 {
			p.forget(id)
		}
	}
	// Guards of verifications that never led to an append (refused, or
	// the producer gave up) go the same way, as in Kafka.
	for id, g := range p.verifying {
		if nowMs-g.createdMs >= ttlMs {
			delete(p.verifying, id)
		}
	}
}

// update tracks one stored batch during a rebuild (no checks); marker is
// the batch's transaction marker, if it is one. It returns the
// transaction the marker ended.
func (p *producerStates) update(h record.Header, marker *record.Marker) []completedTxn {
	var markers []*record.Marker
	if marker != nil {
		markers = []*record.Marker{marker}
	}
	pending, done, _, _ := p.check([]record.Header{h}, markers, false, 0)
	appendTime := int64(-1)
	if h.TimestampType() == record.TimestampLogAppendTime {
		appendTime = h.MaxTimestamp
	}
	p.commit(pending, appendTime, h.MaxTimestamp)
	return done
}

// truncateHead forgets producers whose last batch is below the log start
// (Kafka: evicting unretained producers).
func (p *producerStates) truncateHead(start int64) {
	for id, e := range p.m {
		if e.lastOffset() < start && e.TxnFirst < 0 {
			p.forget(id)
		}
	}
}

func (p *producerStates) reset() { p.m, p.ongoing, p.verifying = nil, nil, nil }

// snapshot file: one JSON object per line per producer, then a line with
// the CRC-32C of everything before it.
type snapshotEntry struct {
	ID       int64               `json:"id"`
	Epoch    int16               `json:"epoch"`
	LastSeen int64               `json:"lastSeen"`
	Batches  []snapshotBatchJSON `json:"batches"`
	// TxnFirst: the first offset of the producer's ongoing transaction
	// (absent: none; snapshots before transactions have none).
	TxnFirst *int64 `json:"txnFirst,omitempty"`
	// CoordEpoch: the coordinator epoch of its last marker (absent: none).
	CoordEpoch *int32 `json:"coordEpoch,omitempty"`
}

type snapshotBatchJSON struct {
	FirstSeq    int32 `json:"firstSeq"`
	LastSeq     int32 `json:"lastSeq"`
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	AppendTime  int64 `json:"appendTime"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (p *producerStates) encode() []byte {
	ids := make([]int64, 0, len(p.m))
	for id := range p.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []byte
	for _, id := range ids {
		e := p.m[id]
		se := snapshotEntry{ID: id, Epoch: e.Epoch, LastSeen: e.lastSeen}
		if e.TxnFirst >= 0 {
			first := e.TxnFirst
			se.TxnFirst = &first
		}
		if e.coordEpoch >= 0 {
			ce := e.coordEpoch
			se.CoordEpoch = &ce
		}
		for _, b := range e.Batches {
			se.Batches = append(se.Batches, snapshotBatchJSON{b.FirstSeq, b.LastSeq, b.firstOffset, b.lastOffset, b.appendTime})
		}
		line, _ := json.Marshal(se)
		out = append(append(out, line...), '\n')
	}
	return append(out, fmt.Sprintf("crc %08x\n", crc32.Checksum(out, castagnoli))...)
}

func decodeSnapshot(data []byte) (map[int64]*producerEntry, error) {
	i := strings.LastIndex(strings.TrimSuffix(string(data), "\n"), "\n") + 1
	body, trailer := data[:i], strings.TrimSpace(string(data[i:]))
	if trailer != fmt.Sprintf("crc %08x", crc32.Checksum(body, castagnoli)) {
		return nil, fmt.Errorf("checksum mismatch")
	}
	m := map[int64]*producerEntry{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var se snapshotEntry
		if err := json.Unmarshal(sc.Bytes(), &se); err != nil {
			return nil, err
		}
		e := &producerEntry{Epoch: se.Epoch, lastSeen: se.LastSeen, TxnFirst: -1, coordEpoch: -1}
		if se.TxnFirst != nil {
			e.TxnFirst = *se.TxnFirst
		}
		if se.CoordEpoch != nil {
			e.coordEpoch = *se.CoordEpoch
		}
		for _, b := range se.Batches {
			e.Batches = append(e.Batches, producerBatch{FirstSeq: b.FirstSeq, LastSeq: b.LastSeq, firstOffset: b.FirstOffset, lastOffset: b.LastOffset, appendTime: b.AppendTime})
		}
		m[se.ID] = e
	}
	return m, sc.Err()
}

func (l *Log) snapshotName(offset int64) string { return segmentName(l.dir, offset, snapshotSuffix) }

// writeProducerSnapshot records producer state as of the log end offset,
// so that Open only scans batches after it. Called with mu held.
func (l *Log) writeProducerSnapshot() error {
	if err := writeFileAtomic(l.fs, l.dir, l.snapshotName(l.leo), l.producers.encode()); err != nil {
		return fmt.Errorf("write producer snapshot: %w", err)
	}
	return nil
}

// snapshotOffsets lists the offsets of the snapshot files, ascending.
func (l *Log) snapshotOffsets() ([]int64, error) {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), snapshotSuffix)
		if !ok || len(stem) != segmentNameDigits {
			continue
		}
		if off, err := strconv.ParseInt(stem, 10, 64); err == nil {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// removeSnapshots deletes snapshot files for which drop is true.
func (l *Log) removeSnapshots(drop func(off int64) bool) error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	for _, off := range offs {
		if drop(off) {
			if err := l.fs.Remove(l.snapshotName(off)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// rebuildProducers loads the newest usable snapshot at or below the log
// end offset and replays batch headers after it (and the markers of
// control batches). The aborted-transaction entries of the replayed
// markers are regenerated; the replay starts at or below the first
// segment whose txnindex file is stale, so that its entries are rebuilt
// too. Called with mu held (or during Open).
func (l *Log) rebuildProducers() error {
	l.producers.reset()
	l.unreplicated = nil
	l.stableHWM.Store(0) // the high watermark may be below the old one now
	if err := l.removeSnapshots(func(off int64) bool { return off > l.leo }); err != nil {
		return err
	}
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	limit := l.leo
	for _, s := range l.segs {
		if s.txn.stale {
			limit = s.base
			break
		}
	}
	from := l.start
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] < l.start {
			break
		}
		if offs[i] > limit {
			continue
		}
		data, err := readFile(l.fs, l.snapshotName(offs[i]))
		if err == nil {
			var m map[int64]*producerEntry
			if m, err = decodeSnapshot(data); err == nil {
				l.producers.m, from = m, offs[i]
				break
			}
		}
		l.logger.Info("ignoring unreadable producer snapshot", "file", l.snapshotName(offs[i]), "reason", err.Error())
	}
	for id, e := range l.producers.m {
		l.producers.track(id, e)
	}
	changed := map[*segment]bool{}
	for _, s := range l.segs {
		if s.txn.dropFrom(from) {
			changed[s] = true
		}
	}
	if from < l.leo {
		if err := l.replayProducers(from, changed); err != nil {
			return err
		}
	}
	// A tiered log's local start is not its start: producers whose
	// batches are only in the slow tier stay until the broker evicts them
	// at the tier's start (EvictProducersBelow).
	if !l.cfg.RemoteStorage {
		l.producers.truncateHead(l.start)
	}
	return l.persistTxnIndexes(changed)
}

// replayProducers feeds the batches from offset from on into producer
// state (see rebuildProducers).
func (l *Log) replayProducers(from int64, changed map[*segment]bool) error {
	var err error
	for i := l.segmentFor(from); i < len(l.segs); i++ {
		s := l.segs[i]
		pos := int64(0)
		if s.base <= from {
			if pos, err = s.lookup(from); err != nil {
				return err
			}
		}
		r := bufio.NewReaderSize(io.NewSectionReader(s.f, pos, s.size-pos), 64<<10)
		for pos < s.size {
			var hb [record.BatchHeaderSize]byte
			if _, err := io.ReadFull(r, hb[:]); err != nil {
				return &CorruptionError{File: s.name, Offset: pos, Err: err}
			}
			h, _ := record.ParseHeader(hb[:])
			if h.Size() < record.BatchHeaderSize || pos+int64(h.Size()) > s.size {
				return &CorruptionError{File: s.name, Offset: pos, Err: fmt.Errorf("%w: batch length %d", record.ErrCorrupt, h.BatchLength)}
			}
			var marker *record.Marker
			if h.IsControl() && h.ProducerID >= 0 {
				// Markers are small: read the whole batch for its type.
				b := make([]byte, h.Size())
				copy(b, hb[:])
				if _, err := io.ReadFull(r, b[record.BatchHeaderSize:]); err != nil {
					return &CorruptionError{File: s.name, Offset: pos, Err: err}
				}
				if m, err := record.ParseMarker(b); err == nil {
					marker = &m
				}
			} else if _, err := r.Discard(h.Size() - record.BatchHeaderSize); err != nil {
				return &CorruptionError{File: s.name, Offset: pos, Err: err}
			}
			pos += int64(h.Size())
			if h.LastOffset() < from {
				continue
			}
			if done := l.producers.update(h, marker); len(done) > 0 {
				if err := l.completeTxnsLocked(s, done); err != nil {
					return err
				}
				changed[s] = true
			}
		}
	}
	return nil
}

// ProducerState returns the epoch and last sequence known for a producer
// id, ok false when unknown (tests, DescribeProducers).
func (l *Log) ProducerState(producerID int64) (epoch int16, lastSequence int32, lastOffset int64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	e := l.producers.m[producerID]
	if e == nil {
		return -1, -1, -1, false
	}
	return e.Epoch, e.lastSeq(), e.lastOffset(), true
}

// ProducerInfo is one producer's state in this partition (DescribeProducers).
type ProducerInfo struct {
	ID            int64
	Epoch         int16
	LastSequence  int32 // -1: no batch at this epoch
	LastTimestamp int64 // ms: clock at its last append, or its last batch's MaxTimestamp when replayed
	// CoordinatorEpoch of its last transaction marker, -1 before any.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of its ongoing transaction, -1
	// when none.
	TxnStartOffset int64
}

// Producers lists the producers the log tracks, by ID.
func (l *Log) Producers() []ProducerInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerInfo, 0, len(l.producers.m))
	for id, e := range l.producers.m {
		out = append(out, ProducerInfo{ID: id, Epoch: e.Epoch, LastSequence: e.lastSeq(), LastTimestamp: e.lastSeen,
			CoordinatorEpoch: e.coordEpoch, TxnStartOffset: e.TxnFirst})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
