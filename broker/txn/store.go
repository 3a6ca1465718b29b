package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ErrConflict is returned by Store.Put and Store.Delete when the record's
// revision is not the one the caller read: another coordinator changed it.
var ErrConflict = errors.New("txn: transaction state changed by another coordinator")

// ErrClosed is returned by a closed store or coordinator.
var ErrClosed = errors.New("txn: closed")

// Stored is a record with its revision.
type Stored struct {
	Metadata Metadata
	// Revision changes with every Put; 0 means "absent".
	Revision int64
}

// Store persists transaction state. Put and Delete are compare-and-swap
// on the revision the caller read, so that two coordinators cannot both
// change a record; both are durable when they return nil.
type Store interface {
	// List returns every record.
	List(ctx context.Context) ([]Stored, error)
	// Get returns the record of id (Revision 0 when there is none).
	Get(ctx context.Context, id string) (Stored, error)
	// Put writes md if the stored revision is still rev (0: absent) and
	// returns the new revision; ErrConflict otherwise.
	Put(ctx context.Context, md Metadata, rev int64) (int64, error)
	// Delete removes the record of id if its revision is still rev.
	Delete(ctx context.Context, id string, rev int64) error
}

// MemoryStore is a non-durable Store for tests and brokers without a data
// directory.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string]Stored
	rev  int64
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{recs: map[string]Stored{}} }

// List implements Store.
func (s *MemoryStore) List(context.Context) ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(), nil
}

func (s *MemoryStore) listLocked() []Stored {
	out := make([]Stored, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, Stored{Metadata: r.Metadata.clone(), Revision: r.Revision})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metadata.TransactionalID < out[j].Metadata.TransactionalID })
	return out
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	if !ok {
		return Stored{}, nil
	}
	return Stored{Metadata: r.Metadata.clone(), Revision: r.Revision}, nil
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, md Metadata, rev int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(md, rev)
}

func (s *MemoryStore) putLocked(md Metadata, rev int64) (int64, error) {
	if s.recs[md.TransactionalID].Revision != rev {
		return 0, ErrConflict
	}
	s.rev++
	s.recs[md.TransactionalID] = Stored{Metadata: md.clone(), Revision: s.rev}
	return s.rev, nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, id string, rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(id, rev)
}

func (s *MemoryStore) deleteLocked(id string, rev int64) error {
	if s.recs[id].Revision != rev {
		return ErrConflict
	}
	delete(s.recs, id)
	s.rev++ // the store changed (FileStore.Version)
	return nil
}

// FileStore is the durable Store of a standalone broker: the whole state
// as one JSON document, <dir>/transactions.json, replaced on every change
// by writing a temporary file, fsyncing it, renaming it over the old one
// and fsyncing the directory. A crash leaves either the old or the new
// document. Transaction state is small (one record per transactional ID),
// so a whole rewrite per change costs about what an append would.
//
// Format: {"version":1,"revision":N,"transactions":[Metadata...]}; the
// revision counter is kept so that revisions never repeat across
// restarts.
type FileStore struct {
	path string
	mu   sync.Mutex
	mem  MemoryStore
	// closed stops writes after a failed fsync (the file's state is
	// unknown) or Close.
	closed bool
}

type fileDoc struct {
	Version      int        `json:"version"`
	Revision     int64      `json:"revision"`
	Transactions []Metadata `json:"transactions"`
}

const fileStoreName = "transactions.json"

// OpenFileStore opens (creating if needed) the transaction state in dir.
func OpenFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("txn: create state dir: %w", err)
	}
	s := &FileStore{path: filepath.Join(dir, fileStoreName), mem: MemoryStore{recs: map[string]Stored{}}}
	// A leftover temp file is an unfinished write; the document is intact.
	if err := os.Remove(s.path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("txn: remove stale temp file: %w", err)
	}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("txn: read %s: %w", s.path, err)
	}
	var doc fileDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("txn: corrupt transaction state %s: %w", s.path, err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("txn: transaction state %s: unsupported version %d", s.path, doc.Version)
	}
	s.mem.rev = doc.Revision
	for _, md := range doc.Transactions {
		// Every record gets a revision of its own; they are new to
		// this process.
		s.mem.rev++
		s.mem.recs[md.TransactionalID] = Stored{Metadata: md, Revision: s.mem.rev}
	}
	return s, nil
}

// List implements Store.
func (s *FileStore) List(ctx context.Context) ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.mem.listLocked(), nil
}

// Get implements Store.
func (s *FileStore) Get(ctx context.Context, id string) (Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Stored{}, ErrClosed
	}
	r, ok := s.mem.recs[id]
	if !ok {
		return Stored{}, nil
	}
	return Stored{Metadata: r.Metadata.clone(), Revision: r.Revision}, nil
}

// Put implements Store.
func (s *FileStore) Put(_ context.Context, md Metadata, rev int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	old, had := s.mem.recs[md.TransactionalID]
	prevRev := s.mem.rev
	n, err := s.mem.putLocked(md, rev)
	if err != nil {
		return 0, err
	}
	if err := s.writeLocked(); err != nil {
		// Not durable: undo, the caller answers with an error.
		if had {
			s.mem.recs[md.TransactionalID] = old
		} else {
			delete(s.mem.recs, md.TransactionalID)
		}
		s.mem.rev = prevRev
		return 0, err
	}
	return n, nil
}

// Delete implements Store.
func (s *FileStore) Delete(_ context.Context, id string, rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	old, prevRev := s.mem.recs[id], s.mem.rev
	if err := s.mem.deleteLocked(id, rev); err != nil {
		return err
	}
	if err := s.writeLocked(); err != nil {
		s.mem.recs[id], s.mem.rev = old, prevRev
		return err
	}
	return nil
}

// Close makes later calls fail with ErrClosed.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *FileStore) writeLocked() error {
	doc := fileDoc{Version: 1, Revision: s.mem.rev}
	for _, r := range s.mem.listLocked() {
		doc.Transactions = append(doc.Transactions, r.Metadata)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("txn: encode transaction state: %w", err)
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("txn: write transaction state: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("txn: write transaction state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("txn: sync transaction state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("txn: close transaction state: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("txn: install transaction state: %w", err)
	}
	d, err := os.Open(filepath.Dir(s.path))
	if err != nil {
		return fmt.Errorf("txn: open state dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		// The rename may or may not survive a crash: stop writing.
		s.closed = true
		return fmt.Errorf("txn: sync state dir: %w", err)
	}
	return nil
}
