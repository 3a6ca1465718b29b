package log

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
)

// BatchSyncer is an FS that can make several files durable in one call:
// OSFS with syncfs(2) on Linux, one call per file system. Logs on such an
// FS share their fsyncs through a sync group (below).
type BatchSyncer interface {
	// SyncFiles makes what each file held when it was called durable, as
	// an fsync of each would; one error covers them all.
	SyncFiles(files []File) error
}

// Sync groups. acks=all makes a leader fsync every partition it appends
// to before it acknowledges, and a follower fsync every partition a fetch
// round brought records to before it reports the round (docs/replication.md
// "Machine crashes"). With many partitions a round touches many logs:
// their fsyncs run together, and each costs a syscall, a blocked thread
// and a journal wait of its own (50 files: ~6 ms and ~3 ms of CPU a round
// on the test machine's disk, against ~1.5 ms and ~0.6 ms for one
// syncfs(2) of the file system; BenchmarkSyncGroup). A sync group gathers
// the fsyncs its logs ask for while one is running and makes a batch of
// at least minBatchSync files durable with one SyncFiles; smaller batches
// fsync each file, as before (one file's fsync is cheaper than a syncfs).
//
// syncfs(2) writes back every dirty page of the file system, the logs'
// own data that is not asked for too (acks=1 topics between their timed
// flushes). That would tie an acks=all round's latency to someone else's
// write rate, so a batch uses it only while the bytes it asks for are at
// least the group's other unsynced log bytes (or those are under
// batchSyncSlack): at most twice the writes its fsyncs would have made.
const (
	minBatchSync   = 8
	batchSyncSlack = 1 << 20
)

type syncGroup struct {
	fs BatchSyncer
	// dirty counts bytes appended to the group's logs and not yet handed
	// to a sync (prepareSync, a roll): what a syncfs would write besides a
	// batch's own bytes. Approximate (files other than segments are not
	// counted); it only chooses between the two ways of syncing.
	dirty atomic.Int64

	mu      sync.Mutex
	running bool
	queue   []*syncWaiter

	// stats, for tests and BenchmarkSyncGroup.
	batches, fileSyncs atomic.Int64
}

type syncWaiter struct {
	f     File
	bytes int64
	err   error
	done  chan struct{}
}

var syncGroups sync.Map // FS → *syncGroup

// syncGroupFor returns the sync group of fs, nil when fs cannot sync in
// batches (every log then fsyncs on its own).
func syncGroupFor(fs FS) *syncGroup {
	bs, ok := fs.(BatchSyncer)
	if !ok || !batchSyncSupported || !reflect.TypeOf(fs).Comparable() {
		return nil
	}
	if g, ok := syncGroups.Load(fs); ok {
		return g.(*syncGroup)
	}
	g, _ := syncGroups.LoadOrStore(fs, &syncGroup{fs: bs})
	return g.(*syncGroup)
}

// sync makes f durable (bytes: what it holds unsynced, for the choice
// above). The first caller to find the group idle runs the batch that
// gathers while it yields once; callers arriving while a batch runs go in
// the next one, started as the running one ends.
func (g *syncGroup) sync(f File, bytes int64) error {
	w := &syncWaiter{f: f, bytes: bytes, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.running {
		g.mu.Unlock()
		<-w.done
		return w.err
	}
	g.running = true
	g.mu.Unlock()
	// The fsyncs of a round are asked for by goroutines started together
	// (flushFetchPositions, the leader's acks=all waits): let them join.
	runtime.Gosched()
	g.runBatch()
	<-w.done
	return w.err
}

// runBatch syncs what is queued and, when more was queued meanwhile,
// hands the next batch to a goroutine of its own, so that the caller that
// ran this one is not held up by later callers.
func (g *syncGroup) runBatch() {
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()

	var asked int64
	for _, w := range batch {
		asked += w.bytes
	}
	if other := g.dirty.Load(); len(batch) >= minBatchSync && (other < batchSyncSlack || asked >= other) {
		files := make([]File, len(batch))
		for i, w := range batch {
			files[i] = w.f
		}
		err := g.fs.SyncFiles(files)
		g.batches.Add(1)
		for _, w := range batch {
			w.err = err
			close(w.done)
		}
	} else {
		var wg sync.WaitGroup
		for _, w := range batch[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.err = w.f.Sync()
				close(w.done)
			}()
		}
		batch[0].err = batch[0].f.Sync()
		close(batch[0].done)
		wg.Wait()
		g.fileSyncs.Add(int64(len(batch)))
	}

	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go g.runBatch()
}
