package faultfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-dev/strata/broker/log"
)

// EnvVar enables the layer in a broker process when set to "1".
const EnvVar = "STRATA_FAULTFS"

// Enabled reports whether EnvVar asks for the layer.
func Enabled() bool { return os.Getenv(EnvVar) == "1" }

const (
	// StateDir is the layer's own directory inside the data directory.
	StateDir    = ".faultfs"
	journalName = "journal"
	controlName = "fault"
	appliedName = "fault.applied"
	// pollInterval is how often a broker reads the fault control file.
	pollInterval = 20 * time.Millisecond
)

// Mode is an injected disk fault.
type Mode string

const (
	// None: no fault.
	None Mode = ""
	// NoSpace: writes, file creations, renames and fsyncs fail with ENOSPC.
	NoSpace Mode = "enospc"
	// IOError: writes, file creations, renames, truncations and fsyncs fail
	// with EIO.
	IOError Mode = "eio"
)

// ParseMode checks a mode's name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case None, NoSpace, IOError:
		return m, nil
	}
	return None, fmt.Errorf("faultfs: unknown fault mode %q (want enospc, eio or empty)", s)
}

func (m Mode) errno() syscall.Errno {
	if m == IOError {
		return syscall.EIO
	}
	return syscall.ENOSPC
}

// FS is log.FS over the operating system's file system that records what
// is durable under its root (see the package comment). Safe for
// concurrent use.
type FS struct {
	log.OSFS
	root string

	mu      sync.Mutex // guards st and journal writes
	st      *state
	journal *os.File

	mode  atomic.Pointer[Mode]
	acked bool // the mode in force is in the applied file (poll goroutine only)
	stop  chan struct{}
	done  chan struct{}
}

var _ log.FS = (*FS)(nil)

// New starts the layer for the data directory root: it loads the journal a
// previous process left (what it did not sync stays undurable) and polls
// the fault control file until Close.
func New(root string) (*FS, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, StateDir), 0o755); err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	st, err := loadState(abs)
	if err != nil {
		return nil, err
	}
	// Rewrite the journal as its state: it stays as short as the set of
	// files the broker touched.
	if err := writeJournal(abs, st); err != nil {
		return nil, err
	}
	j, err := os.OpenFile(journalPath(abs), os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	f := &FS{root: abs, st: st, journal: j, stop: make(chan struct{}), done: make(chan struct{})}
	none := None
	f.mode.Store(&none)
	f.pollFault()
	go f.poll()
	return f, nil
}

// Close stops polling the control file and closes the journal.
func (f *FS) Close() error {
	close(f.stop)
	<-f.done
	return f.journal.Close()
}

// Mode returns the fault in force, as last read from the control file.
func (f *FS) Mode() Mode { return *f.mode.Load() }

func (f *FS) poll() {
	defer close(f.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.pollFault()
		}
	}
}

func (f *FS) pollFault() {
	m := None
	if b, err := os.ReadFile(controlPath(f.root)); err == nil {
		if pm, err := ParseMode(string(b)); err == nil {
			m = pm
		}
	}
	if *f.mode.Load() != m || !f.acked {
		f.mode.Store(&m)
		// Tell WaitApplied the mode is in force: a test that sets a fault
		// and then writes must not race the next poll.
		f.acked = writeAtomic(appliedPath(f.root), []byte("mode="+string(m))) == nil
	}
}

// WaitApplied waits until the running broker whose data directory is
// dataDir has put mode in force (its layer acknowledges each mode it
// reads from the control file), or ctx ends. SetFault alone returns
// before the broker's next poll, and a busy machine can delay that poll
// past the writes a test meant to fail.
func WaitApplied(ctx context.Context, dataDir string, mode Mode) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	want := "mode=" + string(mode)
	t := time.NewTicker(pollInterval / 4)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(appliedPath(abs)); err == nil && string(b) == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faultfs: the broker in %s did not put fault %q in force: %w", dataDir, mode, ctx.Err())
		case <-t.C:
		}
	}
}

// SetFaultAndWait is SetFault then WaitApplied: for a running broker.
func SetFaultAndWait(ctx context.Context, dataDir string, mode Mode) error {
	if err := SetFault(dataDir, mode); err != nil {
		return err
	}
	return WaitApplied(ctx, dataDir, mode)
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// fault returns the injected error for op on name, nil without a fault.
func (f *FS) fault(op, name string) error {
	m := *f.mode.Load()
	if m == None {
		return nil
	}
	return &os.PathError{Op: op, Path: name, Err: m.errno()}
}

// rel returns name relative to the root, or ok false for a file outside it
// (and for the layer's own directory), which the layer does not track.
func (f *FS) rel(name string) (string, bool) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", false
	}
	r, err := filepath.Rel(f.root, abs)
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	if r == StateDir || strings.HasPrefix(r, StateDir+string(filepath.Separator)) {
		return "", false
	}
	return r, true
}

// record applies a journal record to the state and appends it to the
// journal (one write(2): a SIGKILL leaves it whole or absent).
func (f *FS) record(r rec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.apply(r)
	_, _ = f.journal.Write([]byte(r.String() + "\n"))
}

// seen journals a file or directory the layer meets for the first time
// that existed already: what it holds counts as durable.
func (f *FS) seen(rel string, abs string) {
	f.mu.Lock()
	_, known := f.st.entries[rel]
	f.mu.Unlock()
	if known {
		return
	}
	info, err := os.Lstat(abs)
	if err != nil {
		return
	}
	size := int64(-1)
	if !info.IsDir() {
		size = info.Size()
	}
	f.record(rec{op: opOld, path: rel, n: size})
}

// OpenFile opens name; creating a file under the root makes its directory
// entry undurable until its directory is fsynced.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (log.File, error) {
	rel, tracked := f.rel(name)
	writing := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0
	if writing {
		if err := f.fault("open", name); err != nil {
			return nil, err
		}
	}
	if tracked {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0 {
			f.record(rec{op: opNew, path: rel})
		} else if err == nil {
			f.seen(rel, name)
		}
	}
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if tracked && flag&os.O_TRUNC != 0 {
		f.record(rec{op: opTrunc, path: rel, n: 0})
	}
	return &File{File: file, fs: f, name: name, rel: rel, tracked: tracked}, nil
}

// Remove removes name (durably at once: a removal is never undone).
func (f *FS) Remove(name string) error {
	if err := f.fault("remove", name); err != nil && f.Mode() == IOError {
		return err
	}
	if err := f.OSFS.Remove(name); err != nil {
		return err
	}
	if rel, ok := f.rel(name); ok {
		f.record(rec{op: opRemove, path: rel})
	}
	return nil
}

// RemoveAll removes path and everything under it (durably at once).
func (f *FS) RemoveAll(path string) error {
	if err := f.fault("removeall", path); err != nil && f.Mode() == IOError {
		return err
	}
	if err := f.OSFS.RemoveAll(path); err != nil {
		return err
	}
	if rel, ok := f.rel(path); ok {
		f.record(rec{op: opRemove, path: rel})
	}
	return nil
}

// Rename renames oldpath to newpath. newpath takes oldpath's durable
// contents; its directory entry is durable only if newpath's was (the
// outcome where the rename reached the disk) until the directory is
// fsynced.
func (f *FS) Rename(oldpath, newpath string) error {
	if err := f.fault("rename", newpath); err != nil {
		return err
	}
	oldRel, oldOK := f.rel(oldpath)
	newRel, newOK := f.rel(newpath)
	if oldOK {
		f.seen(oldRel, oldpath)
	}
	if newOK {
		f.seen(newRel, newpath)
	}
	// Journal first: a SIGKILL between the rename and its record would
	// leave the journal with the replaced file's durable size for the new
	// content, and a power loss would then cut that content to a length
	// no crash could give it (a leader-epoch checkpoint "0\n2\n0 0\n":
	// its second entry cut off, TestChaosShort classic seed 3). Journaled
	// first, a kill before the rename leaves the old file, which the
	// journal's sizes cannot shorten below its length.
	switch {
	case oldOK && newOK:
		f.record(rec{op: opRename, path: oldRel, to: newRel})
	case oldOK:
		f.record(rec{op: opRemove, path: oldRel})
	case newOK:
		f.record(rec{op: opRemove, path: newRel}) // untracked from now on
	}
	if testBeforeRename != nil {
		testBeforeRename()
	}
	if err := f.OSFS.Rename(oldpath, newpath); err != nil {
		// Not renamed after all (never in the harness): take both paths
		// as they are, durable.
		for _, p := range []struct {
			rel, abs string
			ok       bool
		}{{oldRel, oldpath, oldOK}, {newRel, newpath, newOK}} {
			if !p.ok {
				continue
			}
			if info, serr := os.Lstat(p.abs); serr == nil {
				n := info.Size()
				if info.IsDir() {
					n = -1
				}
				f.record(rec{op: opOld, path: p.rel, n: n})
			}
		}
		return err
	}
	return nil
}

// testBeforeRename runs between a rename's journal record and the rename
// (tests).
var testBeforeRename func()

// MkdirAll creates path and its missing parents; each new directory is
// undurable until its parent is fsynced.
func (f *FS) MkdirAll(path string, perm os.FileMode) error {
	var missing []string
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := f.fault("mkdir", path); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if rel, ok := f.rel(missing[i]); ok {
			f.record(rec{op: opMkdir, path: rel})
		}
	}
	return f.OSFS.MkdirAll(path, perm)
}

// File is an open file of an FS.
type File struct {
	log.File
	fs      *FS
	name    string
	rel     string
	tracked bool
}

// WriteAt writes at off, or fails whole with the injected fault.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Truncate changes the size; shrinking is durable at once (one legal
// outcome of a crash), growing is not.
func (f *File) Truncate(size int64) error {
	if err := f.fs.fault("truncate", f.name); err != nil {
		// A full disk still lets a file shrink.
		if info, serr := f.File.Stat(); serr != nil || f.fs.Mode() == IOError || size > info.Size() {
			return err
		}
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if f.tracked {
		f.fs.record(rec{op: opTrunc, path: f.rel, n: size})
	}
	return nil
}

// Sync fsyncs the file. For a file, what it held when Sync was called
// becomes durable; for a directory, every entry created or renamed in it
// does.
func (f *File) Sync() error {
	if err := f.fs.fault("fsync", f.name); err != nil {
		return err
	}
	info, err := f.File.Stat()
	if err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	if info.IsDir() {
		if rel, ok := f.fs.rel(f.name); ok {
			f.fs.record(rec{op: opDirSync, path: rel})
		} else if abs, err := filepath.Abs(f.name); err == nil && abs == f.fs.root {
			f.fs.record(rec{op: opDirSync, path: "."})
		}
		return nil
	}
	if f.tracked {
		// The size before the fsync: bytes written while it ran may have
		// missed it.
		f.fs.record(rec{op: opSync, path: f.rel, n: info.Size()})
	}
	return nil
}

// SetFault makes the writes and fsyncs of the broker whose data directory
// is dataDir fail with mode (None clears it). The broker's layer reads the
// control file within pollInterval.
func SetFault(dataDir string, mode Mode) error {
	if _, err := ParseMode(string(mode)); err != nil {
		return err
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(abs, StateDir), 0o755); err != nil {
		return fmt.Errorf("faultfs: %w", err)
	}
	path := controlPath(abs)
	if mode == None {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("faultfs: clear fault: %w", err)
		}
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(mode), 0o644); err != nil {
		return fmt.Errorf("faultfs: set fault: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("faultfs: set fault: %w", err)
	}
	return nil
}

// DropUnsynced brings the data directory of a stopped broker (SIGKILLed:
// its layer must not run) back to its durable state, as a power loss
// would: files and directories whose creation was never made durable are
// removed, files are truncated to their size at their last fsync. The
// journal is then reset: what is left is durable.
func DropUnsynced(dataDir string) error {
	_, err := Drop(dataDir)
	return err
}

// Dropped is what a power loss took.
type Dropped struct {
	// Bytes were cut from Files files; Removed entries (files or
	// directories) were never made durable.
	Bytes          int64
	Files, Removed int
}

func (d Dropped) String() string {
	return fmt.Sprintf("%d unsynced bytes dropped from %d files, %d undurable entries removed", d.Bytes, d.Files, d.Removed)
}

// Drop is DropUnsynced, reporting what it dropped.
func Drop(dataDir string) (Dropped, error) {
	var d Dropped
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return d, err
	}
	st, err := loadState(abs)
	if err != nil {
		return d, err
	}
	paths := make([]string, 0, len(st.entries))
	for p := range st.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents before their children
	var removed []string
	under := func(p string) bool {
		for _, r := range removed {
			if strings.HasPrefix(p, r+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		e := st.entries[p]
		if under(p) {
			continue
		}
		full := filepath.Join(abs, p)
		if !st.entryDurable(p) {
			if _, err := os.Lstat(full); err == nil {
				d.Removed++
			}
			if err := os.RemoveAll(full); err != nil {
				return d, fmt.Errorf("faultfs: drop %s: %w", p, err)
			}
			removed = append(removed, p)
			continue
		}
		if e.dir || e.durable < 0 {
			continue
		}
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return d, fmt.Errorf("faultfs: %w", err)
		}
		if info.Size() > e.durable {
			if err := os.Truncate(full, e.durable); err != nil {
				return d, fmt.Errorf("faultfs: drop the unsynced tail of %s: %w", p, err)
			}
			d.Bytes += info.Size() - e.durable
			d.Files++
		}
	}
	if err := os.Remove(journalPath(abs)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("faultfs: %w", err)
	}
	return d, nil
}

func journalPath(root string) string { return filepath.Join(root, StateDir, journalName) }
func controlPath(root string) string { return filepath.Join(root, StateDir, controlName) }
func appliedPath(root string) string { return filepath.Join(root, StateDir, appliedName) }

// Journal records, one a line: "<op> <quoted path> [<n> | <quoted path>]".
type op string

const (
	opOld     op = "old"     // existed before: durable entry, durable size n (-1: directory)
	opNew     op = "new"     // file created: undurable entry, durable size 0
	opMkdir   op = "mkdir"   // directory created: undurable entry
	opSync    op = "sync"    // file fsynced holding n bytes
	opTrunc   op = "trunc"   // file truncated to n bytes
	opDirSync op = "dirsync" // directory fsynced: its entries are durable
	opRename  op = "rename"  // path renamed to to
	opRemove  op = "remove"  // path and everything under it removed
)

type rec struct {
	op   op
	path string
	to   string
	n    int64
}

func (r rec) String() string {
	switch r.op {
	case opOld, opSync, opTrunc:
		return fmt.Sprintf("%s %s %d", r.op, strconv.Quote(r.path), r.n)
	case opRename:
		return fmt.Sprintf("%s %s %s", r.op, strconv.Quote(r.path), strconv.Quote(r.to))
	}
	return fmt.Sprintf("%s %s", r.op, strconv.Quote(r.path))
}

func parseRec(line string) (rec, error) {
	sp := strings.IndexByte(line, ' ')
	if sp < 0 {
		return rec{}, fmt.Errorf("faultfs: bad journal line %q", line)
	}
	r := rec{op: op(line[:sp])}
	rest := line[sp+1:]
	p, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return rec{}, fmt.Errorf("faultfs: bad journal line %q: %w", line, err)
	}
	r.path, _ = strconv.Unquote(p)
	rest = strings.TrimPrefix(rest[len(p):], " ")
	switch r.op {
	case opOld, opSync, opTrunc:
		if r.n, err = strconv.ParseInt(rest, 10, 64); err != nil {
			return rec{}, fmt.Errorf("faultfs: bad journal line %q: %w", line, err)
		}
	case opRename:
		if r.to, err = strconv.Unquote(rest); err != nil {
			return rec{}, fmt.Errorf("faultfs: bad journal line %q: %w", line, err)
		}
	case opNew, opMkdir, opDirSync, opRemove:
	default:
		return rec{}, fmt.Errorf("faultfs: bad journal line %q", line)
	}
	return r, nil
}

// entry is what is durable of one path.
type entry struct {
	dir bool
	// linked: the directory entry is durable (its creation or last rename
	// was followed by an fsync of its directory).
	linked bool
	// durable is a file's durable size.
	durable int64
}

// state is the journal replayed: paths relative to the root.
type state struct{ entries map[string]*entry }

func (s *state) apply(r rec) {
	switch r.op {
	case opOld:
		s.entries[r.path] = &entry{dir: r.n < 0, linked: true, durable: r.n}
	case opNew:
		s.entries[r.path] = &entry{}
	case opMkdir:
		s.entries[r.path] = &entry{dir: true, durable: -1}
	case opSync:
		if e, ok := s.entries[r.path]; ok {
			e.durable = r.n
		}
	case opTrunc:
		if e, ok := s.entries[r.path]; ok && e.durable > r.n {
			e.durable = r.n
		}
	case opDirSync:
		for p, e := range s.entries {
			if filepath.Dir(p) == r.path {
				e.linked = true
			}
		}
	case opRename:
		from, ok := s.entries[r.path]
		if !ok {
			return
		}
		s.remove(r.path)
		to := *from
		if prev, ok := s.entries[r.to]; ok && prev.linked {
			to.linked = true // the outcome where the rename reached the disk
		} else {
			to.linked = false
		}
		s.entries[r.to] = &to
	case opRemove:
		s.remove(r.path)
	}
}

func (s *state) remove(path string) {
	for p := range s.entries {
		if p == path || strings.HasPrefix(p, path+string(filepath.Separator)) {
			delete(s.entries, p)
		}
	}
}

// entryDurable: the path's entry and those of its tracked parents are
// durable.
func (s *state) entryDurable(p string) bool {
	for ; p != "." && p != string(filepath.Separator); p = filepath.Dir(p) {
		if e, ok := s.entries[p]; ok && !e.linked {
			return false
		}
	}
	return true
}

func loadState(root string) (*state, error) {
	st := &state{entries: map[string]*entry{}}
	f, err := os.Open(journalPath(root))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	} else if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		r, err := parseRec(sc.Text())
		if err != nil {
			return nil, err
		}
		st.apply(r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("faultfs: read journal: %w", err)
	}
	return st, nil
}

// writeJournal replaces the journal with records that rebuild st.
func writeJournal(root string, st *state) error {
	var b strings.Builder
	paths := make([]string, 0, len(st.entries))
	for p := range st.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e := st.entries[p]
		switch {
		case e.dir && e.linked:
			b.WriteString(rec{op: opOld, path: p, n: -1}.String() + "\n")
		case e.dir:
			b.WriteString(rec{op: opMkdir, path: p}.String() + "\n")
		case e.linked:
			b.WriteString(rec{op: opOld, path: p, n: e.durable}.String() + "\n")
		default:
			b.WriteString(rec{op: opNew, path: p}.String() + "\n")
			b.WriteString(rec{op: opSync, path: p, n: e.durable}.String() + "\n")
		}
	}
	tmp := journalPath(root) + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("faultfs: %w", err)
	}
	if err := os.Rename(tmp, journalPath(root)); err != nil {
		return fmt.Errorf("faultfs: %w", err)
	}
	return nil
}
