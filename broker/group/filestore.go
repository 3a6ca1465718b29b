package group

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileStore is the durable single-broker OffsetStore: an append-only log
// of commit and delete records, fsynced before each call returns and
// compacted by rewriting the live state into a new file (temp file, fsync,
// rename, directory fsync) once the log has grown to CompactRatio times the
// live state (and at least CompactMinBytes).
//
// On-disk format of <dir>/offsets.log (all integers big-endian):
//
//	file    := header record*
//	header  := "SOFS" version:uint32(=1)
//	record  := length:uint32 crc:uint32 payload[length]   crc = CRC-32C(payload)
//	payload := kind:uint8 group:str16 body
//	kind 1 (commit):          n:uint32 { topic:str16 partition:int32 offset:int64
//	                                     leaderEpoch:int32 commitTimeMillis:int64 metadata:str32 }[n]
//	kind 2 (delete offsets):  n:uint32 { topic:str16 partition:int32 }[n]
//	kind 3 (delete group):    (empty) — removes offsets and membership
//	kind 4 (group membership): JSON of GroupMetadata to the end of the payload
//	kind 5 (pending transactional commit): producerID:int64 n:uint32 { as kind 1 }[n]
//	kind 6 (transaction end):  producerID:int64 commit:uint8 — pending commits of
//	                           the producer become commits (1) or are dropped (0)
//	str16 := len:uint16 bytes;  str32 := len:uint32 bytes
//
// Recovery replays the log. A torn tail — a record cut short by a crash,
// a last record whose CRC does not match, or zero fill to the end of the
// file — is truncated away (it was never acknowledged). A bad record with
// valid data after it is corruption: Open fails with a *CorruptionError
// naming the file and offset and changes nothing.
//
// Writes are group-committed: concurrent calls (different groups) queue
// their records and one of them writes the whole queue with a single
// write and fsync, so the fsync cost is shared.
type FileStore struct {
	// CompactMinBytes and CompactRatio control compaction; set before use.
	CompactMinBytes int64
	CompactRatio    int64

	dir string

	// io serialises file I/O: whoever holds it writes every queued record
	// with one write and one fsync (group commit), so concurrent commits
	// of different groups share an fsync.
	io       sync.Mutex
	f        *os.File // guarded by io
	size     int64    // bytes in the log file; guarded by io
	liveSize int64    // size right after the last compaction; guarded by io

	mu      sync.Mutex // guards state, groups, pending, queue, closed
	state   offsetState
	groups  map[string]GroupMetadata
	pending pendingState
	queue   []*pendingWrite
	closed  bool

	// shares is the share-group state log, opened on first use
	// (share_store.go).
	shares shareFileLog
}

// pendingWrite is one record waiting for the next group commit.
type pendingWrite struct {
	rec   []byte
	apply func()
	done  chan error
}

const (
	fileStoreName    = "offsets.log"
	fileStoreMagic   = "SOFS"
	fileStoreVersion = 1
	fileHeaderLen    = 8
	recordHeaderLen  = 8
	maxRecordLen     = 256 << 20

	kindCommit        = 1
	kindDeleteOffsets = 2
	kindDeleteGroup   = 3
	kindGroupMetadata = 4
	kindTxnPending    = 5
	kindTxnEnd        = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptionError reports a record of the offsets log that cannot be read
// and is not a torn tail.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("group: corrupt offsets log %s at byte %d: %s", e.File, e.Offset, e.Reason)
}

// OpenFileStore opens (creating if needed) the offsets log in dir and
// replays it.
func OpenFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("group: create offsets dir: %w", err)
	}
	path := filepath.Join(dir, fileStoreName)
	// A leftover temp file is an unfinished compaction; the log is intact.
	if err := os.Remove(path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("group: remove stale compaction file: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("group: read offsets log: %w", err)
	}
	s := &FileStore{CompactMinBytes: 1 << 20, CompactRatio: 4, dir: dir, state: offsetState{}, groups: map[string]GroupMetadata{}, pending: pendingState{}}
	if len(data) == 0 {
		if err := s.rewrite(); err != nil {
			return nil, err
		}
		return s, nil
	}
	good, err := replay(path, data, s.state, s.groups, s.pending)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("group: open offsets log: %w", err)
	}
	if good < int64(len(data)) {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("group: truncate torn tail of offsets log at %d: %w", good, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("group: sync offsets log: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("group: seek offsets log: %w", err)
	}
	s.f, s.size, s.liveSize = f, good, good
	return s, nil
}

// replay applies the records of data to state and returns the length of
// the valid prefix.
func replay(path string, data []byte, state offsetState, groups map[string]GroupMetadata, pending pendingState) (int64, error) {
	if len(data) < fileHeaderLen {
		// The header is written by rename, never appended: a short
		// header is damage, not a torn write.
		return 0, &CorruptionError{path, 0, "file shorter than its header"}
	}
	if string(data[:4]) != fileStoreMagic {
		return 0, &CorruptionError{path, 0, "bad magic"}
	}
	if v := binary.BigEndian.Uint32(data[4:8]); v != fileStoreVersion {
		return 0, &CorruptionError{path, 4, fmt.Sprintf("unsupported version %d", v)}
	}
	pos := int64(fileHeaderLen)
	for pos < int64(len(data)) {
		rest := data[pos:]
		if allZero(rest) {
			return pos, nil // zero fill after a crash
		}
		if len(rest) < recordHeaderLen {
			return pos, nil // torn header
		}
		n := int64(binary.BigEndian.Uint32(rest[0:4]))
		if n > int64(len(rest)-recordHeaderLen) {
			return pos, nil // torn payload
		}
		payload := rest[recordHeaderLen : recordHeaderLen+n]
		end := pos + recordHeaderLen + n
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(rest[4:8]) {
			if end == int64(len(data)) {
				return pos, nil // last record written partly
			}
			return 0, &CorruptionError{path, pos, "record CRC mismatch"}
		}
		if err := applyRecord(payload, state, groups, pending); err != nil {
			return 0, &CorruptionError{path, pos, err.Error()}
		}
		pos = end
	}
	return pos, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Load implements OffsetStore.
func (s *FileStore) Load(context.Context) (map[string][]OffsetCommit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.state.snapshot(), nil
}

// Commit implements OffsetStore.
func (s *FileStore) Commit(_ context.Context, group string, commits []OffsetCommit) error {
	if len(commits) == 0 {
		return nil
	}
	return s.append(encodeCommit(nil, group, commits), func() { s.state.commit(group, commits) })
}

// DeleteOffsets implements OffsetStore.
func (s *FileStore) DeleteOffsets(_ context.Context, group string, partitions []TopicPartition) error {
	if len(partitions) == 0 {
		return nil
	}
	return s.append(encodeDeleteOffsets(group, partitions), func() { s.state.deleteOffsets(group, partitions) })
}

// DeleteGroup implements OffsetStore; it removes the membership too.
func (s *FileStore) DeleteGroup(_ context.Context, group string) error {
	return s.append(encodeHead(nil, kindDeleteGroup, group), func() {
		delete(s.state, group)
		delete(s.groups, group)
		delete(s.pending, group)
	})
}

// CommitPending implements TxnOffsetStore.
func (s *FileStore) CommitPending(_ context.Context, group string, producerID int64, commits []OffsetCommit) error {
	if len(commits) == 0 {
		return nil
	}
	return s.append(encodeTxnPending(group, producerID, commits), func() { s.pending.add(group, producerID, commits) })
}

// CompletePending implements TxnOffsetStore.
func (s *FileStore) CompletePending(_ context.Context, group string, producerID int64, commit bool) error {
	return s.append(encodeTxnEnd(group, producerID, commit), func() { applyTxnEnd(s.state, s.pending, group, producerID, commit) })
}

// LoadPending implements TxnOffsetStore.
func (s *FileStore) LoadPending(context.Context) (map[string]map[int64][]OffsetCommit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.pending.snapshot(), nil
}

func applyTxnEnd(state offsetState, pending pendingState, group string, producerID int64, commit bool) {
	cs := pending.complete(group, producerID)
	if commit && len(cs) > 0 {
		state.commit(group, cs)
	}
}

func encodeTxnPending(group string, producerID int64, cs []OffsetCommit) []byte {
	dst := encodeHead(nil, kindTxnPending, group)
	dst = binary.BigEndian.AppendUint64(dst, uint64(producerID))
	return appendCommits(dst, cs)
}

func encodeTxnEnd(group string, producerID int64, commit bool) []byte {
	dst := encodeHead(nil, kindTxnEnd, group)
	dst = binary.BigEndian.AppendUint64(dst, uint64(producerID))
	if commit {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// SaveGroup implements MembershipStore.
func (s *FileStore) SaveGroup(_ context.Context, group string, md GroupMetadata) error {
	payload, err := encodeGroupMetadata(group, md)
	if err != nil {
		return err
	}
	return s.append(payload, func() { s.groups[group] = md })
}

// LoadGroups implements MembershipStore.
func (s *FileStore) LoadGroups(context.Context) (map[string]GroupMetadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make(map[string]GroupMetadata, len(s.groups))
	for k, v := range s.groups {
		out[k] = v
	}
	return out, nil
}

func encodeGroupMetadata(group string, md GroupMetadata) ([]byte, error) {
	js, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("group: encode membership of %s: %w", group, err)
	}
	return append(encodeHead(nil, kindGroupMetadata, group), js...), nil
}

// Close closes the log file. Pending writes finish first.
func (s *FileStore) Close() error {
	s.io.Lock()
	defer s.io.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.shares.close(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}

// Size returns the current size of the log file in bytes.
func (s *FileStore) Size() int64 {
	s.io.Lock()
	defer s.io.Unlock()
	return s.size
}

func (s *FileStore) append(payload []byte, apply func()) error {
	if len(payload) > maxRecordLen {
		return fmt.Errorf("group: offsets record of %d bytes exceeds %d", len(payload), maxRecordLen)
	}
	rec := make([]byte, recordHeaderLen, recordHeaderLen+len(payload))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(payload, castagnoli))
	rec = append(rec, payload...)
	w := &pendingWrite{rec: rec, apply: apply, done: make(chan error, 1)}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, w)
	s.mu.Unlock()

	// Either an earlier I/O holder already wrote w, or w is still queued
	// and we write it (with whatever queued up behind it).
	s.io.Lock()
	s.flushQueue()
	s.io.Unlock()
	return <-w.done
}

// flushQueue writes every queued record with one write and one fsync.
// Callers hold s.io.
func (s *FileStore) flushQueue() {
	s.mu.Lock()
	batch := s.queue
	s.queue = nil
	closed := s.closed
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	finish := func(err error) {
		for _, w := range batch {
			w.done <- err
		}
	}
	if closed {
		finish(ErrClosed)
		return
	}
	var buf []byte
	if len(batch) == 1 {
		buf = batch[0].rec
	} else {
		for _, w := range batch {
			buf = append(buf, w.rec...)
		}
	}
	if _, err := s.f.Write(buf); err != nil {
		// The tail may now hold part of buf; cut it so the next record
		// does not land behind garbage.
		if terr := s.f.Truncate(s.size); terr == nil {
			_, _ = s.f.Seek(s.size, io.SeekStart)
		}
		finish(fmt.Errorf("group: write offsets log: %w", err))
		return
	}
	if err := s.f.Sync(); err != nil {
		// After a failed fsync the page cache state is unknown (see the
		// PostgreSQL fsync discussion); refuse further writes.
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.f.Close()
		finish(fmt.Errorf("group: sync offsets log: %w", err))
		return
	}
	s.size += int64(len(buf))
	s.mu.Lock()
	for _, w := range batch {
		w.apply()
	}
	s.mu.Unlock()
	finish(nil)
	if s.size > s.CompactMinBytes && s.size > s.CompactRatio*s.liveSize {
		if err := s.rewrite(); err != nil {
			// The log is still complete; compaction is retried once the
			// log has grown by the ratio again.
			s.liveSize = s.size
		}
	}
}

// rewrite writes the live state to a new log and swaps it in. Callers hold
// s.io (or own s exclusively).
func (s *FileStore) rewrite() error {
	path := filepath.Join(s.dir, fileStoreName)
	tmp := path + ".tmp"
	buf := make([]byte, 0, 4096)
	buf = append(buf, fileStoreMagic...)
	buf = binary.BigEndian.AppendUint32(buf, fileStoreVersion)
	s.mu.Lock()
	snap := s.state.snapshot()
	var payloads [][]byte
	for group, cs := range snap {
		payloads = append(payloads, encodeCommit(nil, group, cs))
	}
	for group, byPID := range s.pending.snapshot() {
		for pid, cs := range byPID {
			payloads = append(payloads, encodeTxnPending(group, pid, cs))
		}
	}
	for group, md := range s.groups {
		payload, err := encodeGroupMetadata(group, md)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		payloads = append(payloads, payload)
	}
	s.mu.Unlock()
	for _, payload := range payloads {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(payload, castagnoli))
		buf = append(buf, payload...)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("group: create offsets compaction file: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("group: write offsets compaction file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("group: sync offsets compaction file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return fmt.Errorf("group: install compacted offsets log: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.size, s.liveSize = f, int64(len(buf)), int64(len(buf))
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("group: open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("group: sync dir %s: %w", dir, err)
	}
	return nil
}

func encodeHead(dst []byte, kind byte, group string) []byte {
	dst = append(dst, kind)
	return appendStr16(dst, group)
}

func encodeCommit(dst []byte, group string, cs []OffsetCommit) []byte {
	return appendCommits(encodeHead(dst, kindCommit, group), cs)
}

func appendCommits(dst []byte, cs []OffsetCommit) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(cs)))
	for _, c := range cs {
		dst = appendStr16(dst, c.Topic)
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.Partition))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Offset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.LeaderEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.CommitTimeMillis))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Metadata)))
		dst = append(dst, c.Metadata...)
	}
	return dst
}

func encodeDeleteOffsets(group string, tps []TopicPartition) []byte {
	dst := encodeHead(nil, kindDeleteOffsets, group)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(tps)))
	for _, tp := range tps {
		dst = appendStr16(dst, tp.Topic)
		dst = binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
	}
	return dst
}

func appendStr16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// decoder reads the payload encoding; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errors.New("record payload truncated")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() byte {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) str16() string { return string(d.take(int(d.u16()))) }
func (d *decoder) str32() string { return string(d.take(int(d.u32()))) }

func (d *decoder) commits() ([]OffsetCommit, error) {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/26 { // 26 = smallest encoded commit
		return nil, fmt.Errorf("commit count %d exceeds payload", n)
	}
	cs := make([]OffsetCommit, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		c := OffsetCommit{Topic: d.str16()}
		c.Partition = int32(d.u32())
		c.Offset = int64(d.u64())
		c.LeaderEpoch = int32(d.u32())
		c.CommitTimeMillis = int64(d.u64())
		c.Metadata = d.str32()
		cs = append(cs, c)
	}
	return cs, nil
}

func applyRecord(payload []byte, state offsetState, groups map[string]GroupMetadata, pending pendingState) error {
	d := &decoder{b: payload}
	kind := d.u8()
	group := d.str16()
	switch kind {
	case kindCommit:
		cs, err := d.commits()
		if err != nil {
			return err
		}
		if d.err == nil {
			state.commit(group, cs)
		}
	case kindTxnPending:
		pid := int64(d.u64())
		cs, err := d.commits()
		if err != nil {
			return err
		}
		if d.err == nil {
			pending.add(group, pid, cs)
		}
	case kindTxnEnd:
		pid := int64(d.u64())
		commit := d.u8()
		if d.err == nil {
			if commit > 1 {
				return fmt.Errorf("transaction end flag %d", commit)
			}
			applyTxnEnd(state, pending, group, pid, commit == 1)
		}
	case kindDeleteOffsets:
		n := int(d.u32())
		if d.err == nil && n > len(d.b)/6 {
			return fmt.Errorf("delete count %d exceeds payload", n)
		}
		tps := make([]TopicPartition, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			tp := TopicPartition{Topic: d.str16()}
			tp.Partition = int32(d.u32())
			tps = append(tps, tp)
		}
		if d.err == nil {
			state.deleteOffsets(group, tps)
		}
	case kindDeleteGroup:
		if d.err == nil {
			delete(state, group)
			delete(groups, group)
			delete(pending, group)
		}
	case kindGroupMetadata:
		if d.err == nil {
			var md GroupMetadata
			if err := json.Unmarshal(d.b, &md); err != nil {
				return fmt.Errorf("group membership record: %w", err)
			}
			groups[group] = md
			d.b = nil
		}
	default:
		if d.err == nil {
			return fmt.Errorf("unknown record kind %d", kind)
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d trailing bytes in record", len(d.b))
	}
	return nil
}
