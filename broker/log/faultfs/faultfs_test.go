package faultfs

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/log"
)

// ops is a little script against the layer; paths are relative to the root.
type ops struct {
	t    *testing.T
	fs   *FS
	root string
	open map[string]log.File
}

func (o *ops) p(name string) string { return filepath.Join(o.root, name) }

func (o *ops) create(name string) {
	o.t.Helper()
	f, err := o.fs.OpenFile(o.p(name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		o.t.Fatal(err)
	}
	o.open[name] = f
}

func (o *ops) write(name, data string) {
	o.t.Helper()
	f := o.open[name]
	if f == nil {
		var err error
		if f, err = o.fs.OpenFile(o.p(name), os.O_RDWR, 0); err != nil {
			o.t.Fatal(err)
		}
		o.open[name] = f
	}
	st, err := f.Stat()
	if err != nil {
		o.t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(data), st.Size()); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) sync(name string) {
	o.t.Helper()
	if err := o.open[name].Sync(); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) syncDir(name string) {
	o.t.Helper()
	d, err := o.fs.OpenFile(o.p(name), os.O_RDONLY, 0)
	if err != nil {
		o.t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) truncate(name string, n int64) {
	o.t.Helper()
	if err := o.open[name].Truncate(n); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) rename(from, to string) {
	o.t.Helper()
	if f := o.open[from]; f != nil {
		f.Close()
		delete(o.open, from)
	}
	if err := o.fs.Rename(o.p(from), o.p(to)); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) mkdir(name string) {
	o.t.Helper()
	if err := o.fs.MkdirAll(o.p(name), 0o755); err != nil {
		o.t.Fatal(err)
	}
}

func (o *ops) remove(name string) {
	o.t.Helper()
	if f := o.open[name]; f != nil {
		f.Close()
		delete(o.open, name)
	}
	if err := o.fs.Remove(o.p(name)); err != nil {
		o.t.Fatal(err)
	}
}

// crash kills the "process": files stay open and unsynced, the layer
// stops.
func (o *ops) crash() {
	o.t.Helper()
	for _, f := range o.open {
		f.Close() // closing is not syncing
	}
	o.open = map[string]log.File{}
	if err := o.fs.Close(); err != nil {
		o.t.Fatal(err)
	}
}

// tree lists the root's files (contents) and directories ("/"), without
// the layer's own directory.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case rel == ".":
		case rel == StateDir:
			return filepath.SkipDir
		case d.IsDir():
			out[rel+"/"] = ""
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDropUnsynced(t *testing.T) {
	tests := []struct {
		name string
		// before runs without the layer: what exists when it starts.
		before map[string]string
		run    func(o *ops)
		// live is what the files hold before the power loss, want after it.
		live, want map[string]string
		// dropped is what Drop reports.
		dropped Dropped
	}{
		{
			name:    "unsynced write to an existing file is lost",
			before:  map[string]string{"a": "old"},
			run:     func(o *ops) { o.write("a", "new") },
			live:    map[string]string{"a": "oldnew"},
			want:    map[string]string{"a": "old"},
			dropped: Dropped{Bytes: 3, Files: 1},
		},
		{
			name:   "synced write survives, the tail after the sync does not",
			before: map[string]string{"a": "old"},
			run: func(o *ops) {
				o.write("a", "-synced")
				o.sync("a")
				o.write("a", "-lost")
			},
			live:    map[string]string{"a": "old-synced-lost"},
			want:    map[string]string{"a": "old-synced"},
			dropped: Dropped{Bytes: 5, Files: 1},
		},
		{
			name: "a created file without a directory fsync is gone, even synced",
			run: func(o *ops) {
				o.create("a")
				o.write("a", "data")
				o.sync("a")
			},
			live:    map[string]string{"a": "data"},
			want:    map[string]string{},
			dropped: Dropped{Removed: 1},
		},
		{
			name: "a created file whose directory was fsynced keeps its synced part",
			run: func(o *ops) {
				o.create("a")
				o.write("a", "data")
				o.syncDir(".")
				o.write("a", "more")
			},
			live:    map[string]string{"a": "datamore"},
			want:    map[string]string{"a": ""},
			dropped: Dropped{Bytes: 8, Files: 1},
		},
		{
			name: "a new directory needs its parent fsynced; its files go with it",
			run: func(o *ops) {
				o.mkdir("p/q")
				o.create("p/q/a")
				o.sync("p/q/a")
				o.syncDir("p/q")
				o.syncDir("p") // q is durable, p is not: the root was not fsynced
			},
			live:    map[string]string{"p/": "", "p/q/": "", "p/q/a": ""},
			want:    map[string]string{},
			dropped: Dropped{Removed: 1}, // p, and everything in it
		},
		{
			name: "a new directory whose parents were fsynced stays",
			run: func(o *ops) {
				o.mkdir("p")
				o.syncDir(".")
				o.create("p/a")
				o.write("p/a", "x")
				o.sync("p/a")
				o.syncDir("p")
				o.create("p/b")
			},
			live:    map[string]string{"p/": "", "p/a": "x", "p/b": ""},
			want:    map[string]string{"p/": "", "p/a": "x"},
			dropped: Dropped{Removed: 1},
		},
		{
			name:   "atomic replace: temp, fsync, rename over a durable file",
			before: map[string]string{"cp": "v1"},
			run: func(o *ops) {
				o.create("cp.tmp")
				o.write("cp.tmp", "v2")
				o.sync("cp.tmp")
				o.rename("cp.tmp", "cp")
			},
			live: map[string]string{"cp": "v2"},
			want: map[string]string{"cp": "v2"},
		},
		{
			name: "rename to a new name without a directory fsync is gone",
			run: func(o *ops) {
				o.create("t")
				o.write("t", "v")
				o.sync("t")
				o.rename("t", "n")
			},
			live:    map[string]string{"n": "v"},
			want:    map[string]string{},
			dropped: Dropped{Removed: 1},
		},
		{
			name: "a renamed file keeps only what was synced before the rename",
			run: func(o *ops) {
				o.create("t")
				o.write("t", "sync")
				o.sync("t")
				o.write("t", "lost")
				o.rename("t", "n")
				o.syncDir(".")
			},
			live:    map[string]string{"n": "synclost"},
			want:    map[string]string{"n": "sync"},
			dropped: Dropped{Bytes: 4, Files: 1},
		},
		{
			name:   "truncation is durable at once",
			before: map[string]string{"a": "0123456789"},
			run: func(o *ops) {
				o.write("a", "")
				o.truncate("a", 4)
				o.write("a", "xy")
			},
			live:    map[string]string{"a": "0123xy"},
			want:    map[string]string{"a": "0123"},
			dropped: Dropped{Bytes: 2, Files: 1},
		},
		{
			name:   "removal is durable at once",
			before: map[string]string{"a": "x", "b": "y"},
			run:    func(o *ops) { o.remove("a") },
			live:   map[string]string{"b": "y"},
			want:   map[string]string{"b": "y"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, data := range tc.before {
				if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := New(root)
			if err != nil {
				t.Fatal(err)
			}
			o := &ops{t: t, fs: f, root: root, open: map[string]log.File{}}
			tc.run(o)
			o.crash()
			if got := tree(t, root); !maps.Equal(got, tc.live) {
				t.Fatalf("before the power loss: %q, want %q", got, tc.live)
			}
			d, err := Drop(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := tree(t, root); !maps.Equal(got, tc.want) {
				t.Fatalf("after the power loss: %q, want %q", got, tc.want)
			}
			if d != tc.dropped {
				t.Fatalf("dropped %+v, want %+v", d, tc.dropped)
			}
			// Everything left is durable: a second power loss changes nothing.
			f, err = New(root)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := DropUnsynced(root); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, root); !maps.Equal(got, tc.want) {
				t.Fatalf("after a second power loss: %q, want %q", got, tc.want)
			}
		})
	}
}

// A process killed without a power loss leaves its journal: the next
// process's layer keeps what it had not synced undurable.
func TestJournalOutlivesAKill(t *testing.T) {
	root := t.TempDir()
	f, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	o := &ops{t: t, fs: f, root: root, open: map[string]log.File{}}
	o.create("a")
	o.write("a", "synced")
	o.sync("a")
	o.syncDir(".")
	o.write("a", "-unsynced")
	o.crash() // a kill: the page cache keeps the tail

	f, err = New(root)
	if err != nil {
		t.Fatal(err)
	}
	o = &ops{t: t, fs: f, root: root, open: map[string]log.File{}}
	o.write("a", "-again")
	o.crash()
	if err := DropUnsynced(root); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); got["a"] != "synced" {
		t.Fatalf("after the power loss a holds %q, want %q", got["a"], "synced")
	}
}

func TestSetFault(t *testing.T) {
	for _, tc := range []struct {
		mode  Mode
		errno syscall.Errno
	}{{NoSpace, syscall.ENOSPC}, {IOError, syscall.EIO}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			root := t.TempDir()
			f, err := New(root)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			file, err := f.OpenFile(filepath.Join(root, "a"), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			if _, err := file.WriteAt([]byte("ok"), 0); err != nil {
				t.Fatal(err)
			}
			if err := SetFault(root, tc.mode); err != nil {
				t.Fatal(err)
			}
			waitMode(t, f, tc.mode)
			checks := map[string]error{}
			_, checks["write"] = file.WriteAt([]byte("x"), 2)
			checks["fsync"] = file.Sync()
			_, checks["create"] = f.OpenFile(filepath.Join(root, "b"), os.O_CREATE|os.O_RDWR, 0o644)
			checks["rename"] = f.Rename(filepath.Join(root, "a"), filepath.Join(root, "c"))
			checks["mkdir"] = f.MkdirAll(filepath.Join(root, "d"), 0o755)
			for op, err := range checks {
				if !errors.Is(err, tc.errno) {
					t.Errorf("%s in mode %s: %v, want %v", op, tc.mode, err, tc.errno)
				}
			}
			// Reads work, and nothing was written.
			buf := make([]byte, 8)
			if n, _ := file.ReadAt(buf, 0); string(buf[:n]) != "ok" {
				t.Fatalf("read %q", buf[:n])
			}
			if err := SetFault(root, None); err != nil {
				t.Fatal(err)
			}
			waitMode(t, f, None)
			if _, err := file.WriteAt([]byte("x"), 2); err != nil {
				t.Fatalf("write after the fault cleared: %v", err)
			}
			if err := file.Sync(); err != nil {
				t.Fatalf("fsync after the fault cleared: %v", err)
			}
		})
	}
	if err := SetFault(t.TempDir(), Mode("full")); err == nil || !strings.Contains(err.Error(), "unknown fault mode") {
		t.Fatalf("SetFault with a bad mode: %v", err)
	}
}

func waitMode(t *testing.T, f *FS, m Mode) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.Mode() != m {
		if time.Now().After(deadline) {
			t.Fatalf("the layer did not take mode %q", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSetFaultAndWait: when SetFaultAndWait returns, the layer's very next
// write fails; without a running layer to acknowledge the mode it gives up
// when its context ends.
func TestSetFaultAndWait(t *testing.T) {
	root := t.TempDir()
	f, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, err := f.OpenFile(filepath.Join(root, "a"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []Mode{NoSpace, None, IOError, None} {
		if err := SetFaultAndWait(ctx, root, m); err != nil {
			t.Fatal(err)
		}
		_, werr := file.WriteAt([]byte("x"), 0)
		if (werr != nil) != (m != None) {
			t.Fatalf("write right after mode %q was acknowledged: %v", m, werr)
		}
	}

	idle := t.TempDir()
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := SetFaultAndWait(short, idle, NoSpace); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetFaultAndWait with no broker running: %v", err)
	}
}

// A SIGKILL can land between a rename and its journal record. The power
// loss after it must leave one of the two files whole, never the new
// content cut to the old one's length (a leader-epoch checkpoint that no
// longer parsed after a chaos power loss): the rename is journaled first.
func TestRenameKilledMidway(t *testing.T) {
	root := t.TempDir()
	const v1, v2 = "0\n1\n0 0\n", "0\n2\n0 0\n3 5\n"
	if err := os.WriteFile(filepath.Join(root, "ckpt"), []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	o := &ops{t: t, fs: f, root: root, open: map[string]log.File{}}
	o.write("ckpt", "") // the layer meets the old file: durable as it is
	o.create("ckpt.tmp")
	o.write("ckpt.tmp", v2)
	o.sync("ckpt.tmp")
	// The machine as a kill mid-rename leaves it: a copy of the directory,
	// journal included.
	killed := t.TempDir()
	testBeforeRename = func() {
		if err := os.CopyFS(killed, os.DirFS(root)); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { testBeforeRename = nil }()
	o.rename("ckpt.tmp", "ckpt")
	if err := DropUnsynced(killed); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(killed, "ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != v1 && string(got) != v2 {
		t.Fatalf("after a kill mid-rename and a power loss the file holds %q, want %q or %q", got, v1, v2)
	}
	o.crash()
}
