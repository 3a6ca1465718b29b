package group

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// ShareStateStore is implemented by an OffsetStore that also keeps the
// share-partition state of share groups (KIP-932): MemoryStore, FileStore
// and the cluster's etcd store. A ShareCoordinator whose store does not
// implement it keeps share state in memory only.
//
// Calls for one share partition never overlap (the ShareCoordinator holds
// the partition's lock); SaveShareState must be durable when it returns:
// an acknowledgement is answered only after it.
type ShareStateStore interface {
	// LoadShareState returns the state of a share partition; ok is false
	// when none is stored.
	LoadShareState(ctx context.Context, group, topic string, partition int32) (st ShareState, ok bool, err error)
	// SaveShareState replaces the state of a share partition.
	SaveShareState(ctx context.Context, group, topic string, partition int32, st ShareState) error
	// DeleteShareState removes the state of every share partition of
	// group (DeleteGroups of a share group), durably when it returns.
	DeleteShareState(ctx context.Context, group string) error
}

// ShareStateLister is implemented by a ShareStateStore that can list the
// share partitions a group has state for (DescribeShareGroupOffsets
// without topics).
type ShareStateLister interface {
	ListShareState(ctx context.Context, group string) ([]TopicPartition, error)
}

var (
	_ ShareStateStore  = (*MemoryStore)(nil)
	_ ShareStateStore  = (*FileStore)(nil)
	_ ShareStateLister = (*MemoryStore)(nil)
	_ ShareStateLister = (*FileStore)(nil)
)

// parseShareKey splits a shareKey.
func parseShareKey(k string) (group string, tp TopicPartition, ok bool) {
	parts := strings.Split(k, "\x00")
	if len(parts) != 3 {
		return "", TopicPartition{}, false
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return "", TopicPartition{}, false
	}
	return parts[0], TopicPartition{Topic: parts[1], Partition: int32(p)}, true
}

func listShareKeys[V any](m map[string]V, group string) []TopicPartition {
	var out []TopicPartition
	for k := range m {
		if g, tp, ok := parseShareKey(k); ok && g == group {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

// ListShareState implements ShareStateLister.
func (s *MemoryStore) ListShareState(_ context.Context, group string) ([]TopicPartition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return listShareKeys(s.shares, group), nil
}

// ListShareState implements ShareStateLister.
func (s *FileStore) ListShareState(_ context.Context, group string) ([]TopicPartition, error) {
	l, err := s.shareLog()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return listShareKeys(l.state, group), nil
}

func shareKey(group, topic string, partition int32) string {
	return group + "\x00" + topic + "\x00" + strconv.Itoa(int(partition))
}

// LoadShareState implements ShareStateStore.
func (s *MemoryStore) LoadShareState(_ context.Context, group, topic string, partition int32) (ShareState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.shares[shareKey(group, topic, partition)]
	st.Batches = append([]ShareStateBatch(nil), st.Batches...)
	return st, ok, nil
}

// SaveShareState implements ShareStateStore.
func (s *MemoryStore) SaveShareState(_ context.Context, group, topic string, partition int32, st ShareState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shares == nil {
		s.shares = map[string]ShareState{}
	}
	st.Batches = append([]ShareStateBatch(nil), st.Batches...)
	s.shares[shareKey(group, topic, partition)] = st
	return nil
}

// DeleteShareState implements ShareStateStore.
func (s *MemoryStore) DeleteShareState(_ context.Context, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tp := range listShareKeys(s.shares, group) {
		delete(s.shares, shareKey(group, tp.Topic, tp.Partition))
	}
	return nil
}

// DeleteShareState implements ShareStateStore: the log is rewritten
// without the group's partitions (there is no tombstone record).
func (s *FileStore) DeleteShareState(_ context.Context, group string) error {
	l, err := s.shareLog()
	if err != nil {
		return err
	}
	return l.deleteGroup(group)
}

// LoadShareState implements ShareStateStore.
func (s *FileStore) LoadShareState(_ context.Context, group, topic string, partition int32) (ShareState, bool, error) {
	l, err := s.shareLog()
	if err != nil {
		return ShareState{}, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.state[shareKey(group, topic, partition)]
	return st.state, ok, nil
}

// SaveShareState implements ShareStateStore.
func (s *FileStore) SaveShareState(_ context.Context, group, topic string, partition int32, st ShareState) error {
	l, err := s.shareLog()
	if err != nil {
		return err
	}
	return l.save(group, topic, partition, st)
}

// shareLog opens <dir>/share-state.log on first use. Its format is the
// offsets log's framing (header "SSST" version:uint32(=1), then records of
// length:uint32 crc:uint32 payload, CRC-32C), one record per saved share
// partition:
//
//	payload := group:str16 topic:str16 partition:int32 JSON(ShareState)
//
// The last record of a partition wins. A torn tail is truncated on open;
// the log is rewritten with the live state (temp file, fsync, rename,
// directory fsync) once it has grown to CompactRatio times that and at
// least CompactMinBytes. Every save is written and fsynced before it
// returns.
func (s *FileStore) shareLog() (*shareFileLog, error) {
	s.shares.once.Do(func() {
		s.shares.err = s.shares.open(s.dir, s.CompactMinBytes, s.CompactRatio)
	})
	if s.shares.err != nil {
		return nil, s.shares.err
	}
	return &s.shares, nil
}

const (
	shareLogName    = "share-state.log"
	shareLogMagic   = "SSST"
	shareLogVersion = 1
)

type shareEntry struct {
	group, topic string
	partition    int32
	state        ShareState
}

// shareFileLog is the share-state log of a FileStore.
type shareFileLog struct {
	once sync.Once
	err  error // from opening

	mu         sync.Mutex // guards everything below
	path       string
	f          *os.File
	size, live int64
	minBytes   int64
	ratio      int64
	state      map[string]shareEntry
	closed     bool
}

func (l *shareFileLog) open(dir string, minBytes, ratio int64) error {
	l.path = filepath.Join(dir, shareLogName)
	l.minBytes, l.ratio = minBytes, ratio
	l.state = map[string]shareEntry{}
	if err := os.Remove(l.path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("group: remove stale share-state compaction file: %w", err)
	}
	data, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("group: read share-state log: %w", err)
	}
	if len(data) == 0 {
		return l.rewrite()
	}
	good, err := l.replay(data)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("group: open share-state log: %w", err)
	}
	if good < int64(len(data)) {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return fmt.Errorf("group: truncate torn tail of share-state log at %d: %w", good, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("group: sync share-state log: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("group: seek share-state log: %w", err)
	}
	l.f, l.size, l.live = f, good, good
	return nil
}

func (l *shareFileLog) replay(data []byte) (int64, error) {
	if len(data) < fileHeaderLen || string(data[:4]) != shareLogMagic {
		return 0, &CorruptionError{l.path, 0, "bad header"}
	}
	if v := binary.BigEndian.Uint32(data[4:8]); v != shareLogVersion {
		return 0, &CorruptionError{l.path, 4, fmt.Sprintf("unsupported version %d", v)}
	}
	pos := int64(fileHeaderLen)
	for pos < int64(len(data)) {
		rest := data[pos:]
		if allZero(rest) || len(rest) < recordHeaderLen {
			return pos, nil
		}
		n := int64(binary.BigEndian.Uint32(rest[0:4]))
		if n > int64(len(rest)-recordHeaderLen) {
			return pos, nil
		}
		payload := rest[recordHeaderLen : recordHeaderLen+n]
		end := pos + recordHeaderLen + n
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(rest[4:8]) {
			if end == int64(len(data)) {
				return pos, nil
			}
			return 0, &CorruptionError{l.path, pos, "record CRC mismatch"}
		}
		e, err := decodeShareEntry(payload)
		if err != nil {
			return 0, &CorruptionError{l.path, pos, err.Error()}
		}
		l.state[shareKey(e.group, e.topic, e.partition)] = e
		pos = end
	}
	return pos, nil
}

func encodeShareEntry(e shareEntry) ([]byte, error) {
	js, err := json.Marshal(e.state)
	if err != nil {
		return nil, fmt.Errorf("group: encode share state: %w", err)
	}
	dst := appendStr16(nil, e.group)
	dst = appendStr16(dst, e.topic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.partition))
	return append(dst, js...), nil
}

func decodeShareEntry(payload []byte) (shareEntry, error) {
	d := &decoder{b: payload}
	e := shareEntry{group: d.str16(), topic: d.str16()}
	e.partition = int32(d.u32())
	if d.err != nil {
		return e, d.err
	}
	if err := json.Unmarshal(d.b, &e.state); err != nil {
		return e, fmt.Errorf("share state record: %w", err)
	}
	return e, nil
}

func frameRecord(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

func (l *shareFileLog) save(group, topic string, partition int32, st ShareState) error {
	e := shareEntry{group: group, topic: topic, partition: partition, state: st}
	payload, err := encodeShareEntry(e)
	if err != nil {
		return err
	}
	rec := frameRecord(nil, payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if _, err := l.f.Write(rec); err != nil {
		if terr := l.f.Truncate(l.size); terr == nil {
			_, _ = l.f.Seek(l.size, io.SeekStart)
		}
		return fmt.Errorf("group: write share-state log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		l.closed = true
		l.f.Close()
		return fmt.Errorf("group: sync share-state log: %w", err)
	}
	l.size += int64(len(rec))
	e.state.Batches = append([]ShareStateBatch(nil), st.Batches...)
	l.state[shareKey(group, topic, partition)] = e
	if l.size > l.minBytes && l.size > l.ratio*l.live {
		if err := l.rewrite(); err != nil {
			l.live = l.size // retried once the log has grown by the ratio again
		}
	}
	return nil
}

func (l *shareFileLog) deleteGroup(group string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	removed := map[string]shareEntry{}
	for _, tp := range listShareKeys(l.state, group) {
		k := shareKey(group, tp.Topic, tp.Partition)
		removed[k] = l.state[k]
		delete(l.state, k)
	}
	if len(removed) == 0 {
		return nil
	}
	if err := l.rewrite(); err != nil {
		maps.Copy(l.state, removed) // still in the log on disk
		return fmt.Errorf("group: delete share state of %q: %w", group, err)
	}
	return nil
}

// rewrite writes the live state to a new log and swaps it in. Callers hold
// l.mu (or own l exclusively).
func (l *shareFileLog) rewrite() error {
	buf := append([]byte(shareLogMagic), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[4:], shareLogVersion)
	for _, e := range l.state {
		payload, err := encodeShareEntry(e)
		if err != nil {
			return err
		}
		buf = frameRecord(buf, payload)
	}
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("group: create share-state compaction file: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("group: write share-state compaction file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("group: sync share-state compaction file: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		f.Close()
		return fmt.Errorf("group: install compacted share-state log: %w", err)
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		f.Close()
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.size, l.live = f, int64(len(buf)), int64(len(buf))
	return nil
}

func (l *shareFileLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.f == nil {
		l.closed = true
		return nil
	}
	l.closed = true
	return l.f.Close()
}
