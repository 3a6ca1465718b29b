package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// walTestClock is a manual clock for the WAL and the Manager. Its timers
// never fire: tests cut objects with Uploader.Flush.
type walTestClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *walTestClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *walTestClock) AfterFunc(time.Duration, func()) func() bool {
	return func() bool { return true }
}
func (c *walTestClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// gatedStore holds every PUT until the test lets one through, so that a
// test decides when an upload completes.
type gatedStore struct {
	objstore.Store
	gate chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, key string, data []byte) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Put(ctx, key, data)
}

func openLogAt(t *testing.T, dir string) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.FlushInterval = -1
	l, err := log.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func values(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// TestFirstStalePointer: a pointer is good only where the log holds its
// whole range at its epoch; the index is cut at the first one that is not.
func TestFirstStalePointer(t *testing.T) {
	p := func(base, last int64, epoch int32) wal.Pointer {
		return wal.Pointer{Bucket: "b", Key: "k", BaseOffset: base, LastOffset: last, LeaderEpoch: epoch}
	}
	// Epoch 1 holds [0,5), epoch 2 [5,15); log end 15.
	epochs := []log.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 5}}
	for _, tc := range []struct {
		name  string
		ptrs  []wal.Pointer
		start int64
		want  int64
	}{
		{"all good", []wal.Pointer{p(0, 4, 1), p(5, 9, 2), p(10, 14, 2)}, 0, 15},
		{"empty", nil, 0, 15},
		{"range overwritten under a later epoch", []wal.Pointer{p(0, 4, 1), p(5, 9, 1), p(10, 14, 2)}, 0, 5},
		{"range across an epoch change", []wal.Pointer{p(3, 6, 1)}, 0, 3},
		{"epoch the log does not have", []wal.Pointer{p(0, 4, 1), p(5, 9, 4)}, 0, 5},
		{"past the log end", []wal.Pointer{p(10, 19, 2)}, 0, 10},
		{"starting past the log end", []wal.Pointer{p(15, 19, 2)}, 0, 15},
		{"below the log start is skipped", []wal.Pointer{p(0, 2, 7), p(5, 9, 2)}, 3, 15},
		{"straddling the log start", []wal.Pointer{p(0, 4, 1), p(5, 9, 2)}, 3, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := epochs
			if tc.start > 0 { // the log's truncateFromStart
				ep = []log.EpochEntry{{Epoch: 1, StartOffset: tc.start}, {Epoch: 2, StartOffset: 5}}
			}
			if got := firstStalePointer(tc.ptrs, ep, tc.start, 15); got != tc.want {
				t.Fatalf("firstStalePointer = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRestartedBrokerDropsStalePointers is issue #10 item 2: broker 1
// leads at epoch 1 and uploads [0,10), of which only [0,5) reaches broker
// 2. Broker 1 restarts; broker 2 leads at epoch 2 and writes [5,15).
// Broker 1 comes back as follower (its pointer file not open yet),
// truncates to 5 and copies epoch 2's records. When it leads again at
// epoch 3 it must not point followers at its epoch-1 upload of [5,10):
// those records are in no log any more.
func TestRestartedBrokerDropsStalePointers(t *testing.T) {
	store := objstore.NewMem("wal-a")
	walCfg := func(inc uint64) WALConfig {
		return WALConfig{Store: store, Cluster: "c", Zone: "a", Incarnation: inc, UploadInterval: time.Hour, Stores: func(string) (objstore.Store, error) { return store, nil }}
	}
	dir1 := t.TempDir()
	st1 := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}, PartitionEpoch: 1}

	// Epoch 1: broker 1 leads, broker 2 copies [0,5).
	m1 := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	if err := m1.EnableWAL(walCfg(1)); err != nil {
		t.Fatal(err)
	}
	l1 := openLogAt(t, dir1)
	p1 := NewPartition(tp, l1, 1, nil)
	m1.Apply(p1, meta.BecomeLeader, st1)
	m2 := NewManager(Config{NodeID: 2, Log: logr.Discard()})
	defer m2.Close()
	p2 := NewPartition(tp, openLog(t), 2, nil)
	p2.becomeFollower(st1)
	if _, _, err := p1.AppendAsLeader(batch(t, values(5, "a")...)); err != nil {
		t.Fatal(err)
	}
	replicate(t, m1, p1, p2)
	if _, _, err := p1.AppendAsLeader(batch(t, values(5, "lost")...)); err != nil {
		t.Fatal(err)
	}
	m1.wal.up.Flush()
	waitFor(t, func() bool { return len(m1.PlanWALFetch(p1, 0, 1<<20).Pointers) > 0 })

	// Broker 1 restarts; broker 2 leads at epoch 2 and writes [5,15).
	m1.Close()
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 2, ISR: []int32{2}, PartitionEpoch: 2}
	m2.Apply(p2, meta.BecomeLeader, st2)
	if _, _, err := p2.AppendAsLeader(batch(t, values(10, "b")...)); err != nil {
		t.Fatal(err)
	}

	// Broker 1 is back: follower first, then leader at epoch 3.
	m1b := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	defer m1b.Close()
	if err := m1b.EnableWAL(walCfg(2)); err != nil {
		t.Fatal(err)
	}
	l1b := openLogAt(t, dir1)
	defer l1b.Close()
	p1b := NewPartition(tp, l1b, 1, nil)
	m1b.Apply(p1b, meta.BecomeFollower, st2)
	if _, err := os.Stat(filepath.Join(dir1, wal.PointerFileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("pointer file of the earlier run after becoming follower: %v, want it removed", err)
	}
	for i := 0; i < 5 && p1b.Log.EndOffset() != p2.Log.EndOffset(); i++ {
		replicate(t, m2, p2, p1b)
	}
	if got, want := p1b.Log.Epochs(), []log.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 5}}; !reflect.DeepEqual(got, want) || p1b.Log.EndOffset() != 15 {
		t.Fatalf("restarted follower: epochs %v, log end %d; want %v, 15", got, p1b.Log.EndOffset(), want)
	}
	st3 := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, PartitionEpoch: 3}
	m1b.Apply(p1b, meta.BecomeLeader, st3)
	for off := int64(0); off < 15; off++ {
		for _, ptr := range m1b.PlanWALFetch(p1b, off, 1<<20).Pointers {
			if ptr.LeaderEpoch == 1 && ptr.LastOffset >= 5 {
				t.Fatalf("leader at epoch 3 answers a fetch at %d with %v: epoch 1's records at %d-%d were overwritten by epoch 2", off, ptr, ptr.BaseOffset, ptr.LastOffset)
			}
		}
	}
}

// TestLeaderChecksPointerFileOnOpen: a pointer file that was never told
// of a truncation (written by another run) is checked against the log's
// epoch cache when a leadership opens it.
func TestLeaderChecksPointerFileOnOpen(t *testing.T) {
	dir := t.TempDir()
	l := openLogAt(t, dir)
	defer l.Close()
	if _, err := l.AppendAsLeader(batch(t, values(5, "a")...), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(batch(t, values(10, "b")...), 2); err != nil {
		t.Fatal(err)
	}
	x, err := wal.OpenPointerIndex(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(base, last int64, epoch int32) wal.Pointer {
		return wal.Pointer{Bucket: "wal-a", Key: fmt.Sprintf("wal/c/a/1/1/%020d", base), Length: 1, Topic: tp.Topic, Partition: tp.Partition, BaseOffset: base, LastOffset: last, LeaderEpoch: epoch}
	}
	for _, p := range []wal.Pointer{ptr(0, 4, 1), ptr(5, 9, 1), ptr(10, 14, 2)} {
		if err := x.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	m := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	defer m.Close()
	if err := m.EnableWAL(WALConfig{Store: objstore.NewMem("wal-a"), Cluster: "c", Zone: "a", Incarnation: 2, UploadInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p := NewPartition(tp, l, 1, nil)
	m.Apply(p, meta.BecomeLeader, meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1}, PartitionEpoch: 1})
	p.mu.Lock()
	got := p.walIndex.All()
	p.mu.Unlock()
	if want := []wal.Pointer{ptr(0, 4, 1)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pointers after opening: %v, want %v (epoch 2 holds [5,15))", got, want)
	}
}

// TestWALSteadyLoadWaitsForUploads is issue #10 item 4: under sustained
// load, a follower that always waits for the upload in flight is answered
// with pointers, never inline as upload_slow (every batch is younger than
// InlineAfter when the follower asks for it), and stays in the ISR well
// past replica.lag.time.max.ms although at every fetch it lacks the
// uploads in flight. A follower stuck at one offset still leaves the ISR.
func TestWALSteadyLoadWaitsForUploads(t *testing.T) {
	const (
		step        = 100 * time.Millisecond // one produce and one upload per step
		lag         = 30 * time.Second
		inlineAfter = time.Second
	)
	clk := &walTestClock{t: time.Unix(1_750_000_000, 0)}
	store := &gatedStore{Store: objstore.NewMem("wal-a"), gate: make(chan struct{})}
	m := NewManager(Config{NodeID: 1, LagTimeMax: lag, Log: logr.Discard(), Now: clk.Now})
	defer m.Close()
	defer close(store.gate) // let the last PUTs through so that Close can flush
	if err := m.EnableWAL(WALConfig{Store: store, Cluster: "c", Zone: "a", Incarnation: 1, UploadInterval: step, InlineAfter: inlineAfter, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}, PartitionEpoch: 1}
	leader := NewPartition(tp, openLog(t), 1, clk.Now)
	m.Apply(leader, meta.BecomeLeader, st)
	follower := openLog(t) // broker 2's log, fed from the leader's as if downloaded

	produce := func(i int) {
		t.Helper()
		if _, _, err := leader.AppendAsLeader(batch(t, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)
	m.wal.up.Flush() // object 0 in flight
	steps := int((lag + 5*time.Second) / step)
	for i := 1; i <= steps; i++ {
		produce(i) // pending in the next object, behind the one in flight
		off := follower.EndOffset()
		if _, err := m.ServeReplicaFetch(leader, 2, -1, off, 1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.ServeReplicaFetch(leader, 3, -1, 0, 1, 1); err != nil { // stuck
			t.Fatal(err)
		}
		if plan := m.PlanWALFetch(leader, off, 1<<20); plan.Reason != "" || len(plan.Pointers) > 0 {
			t.Fatalf("after %v of steady load, follower fetching at %d (log end %d): plan %+v, want to wait for the upload in flight", time.Duration(i)*step, off, leader.Log.EndOffset(), plan)
		}
		store.gate <- struct{}{} // the upload in flight completes
		var plan WALServe
		waitFor(t, func() bool {
			plan = m.PlanWALFetch(leader, off, 1<<20)
			return len(plan.Pointers) > 0
		})
		to := plan.Pointers[len(plan.Pointers)-1].LastOffset + 1
		rr, err := leader.Log.Read(off, 1<<20, to)
		if err != nil {
			t.Fatal(err)
		}
		batches, err := splitBatches(rr.Records)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(batches); err != nil {
			t.Fatal(err)
		}
		m.wal.up.Flush() // the next object goes in flight
		clk.add(step)
	}
	_, proposed, changed := leader.proposeISR(lag, func(int32) (int64, bool) { return 0, true })
	if changed {
		leader.isrDone(false, 0)
	}
	if !changed || !slices.Equal(proposed.ISR, []int32{1, 2}) {
		t.Fatalf("after %v: proposed ISR %v (change %v), want [1 2]: follower 2 waited only for uploads, follower 3 fetched nothing", time.Duration(steps)*step, proposed.ISR, changed)
	}
}

// TestWALLogStartReleasesObjects: once the log start passes an object's
// chunks (retention, DeleteRecords), no follower needs it any more: it is
// deleted although its follower is down, not kept until wal.retention.ms.
func TestWALLogStartReleasesObjects(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem("wal-a")
	m := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	defer m.Close()
	if err := m.EnableWAL(WALConfig{Store: store, Cluster: "c", Zone: "a", Incarnation: 1, UploadInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	p := NewPartition(tp, openLog(t), 1, nil)
	m.Apply(p, meta.BecomeLeader, meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}, PartitionEpoch: 1})
	if _, _, err := p.AppendAsLeader(batch(t, values(10, "v")...)); err != nil {
		t.Fatal(err)
	}
	m.wal.up.Flush()
	waitFor(t, func() bool { return len(m.PlanWALFetch(p, 0, 1<<20).Pointers) > 0 })
	// Follower 2 never fetches: only the log start can release the object.
	if err := p.Log.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs, err := store.List(ctx, "wal/")
		if err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		left := p.walIndex.Len()
		p.mu.Unlock()
		if len(objs) == 0 && left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start at 10, 10 s later: %d objects in the bucket, %d pointers in the index; want none (no follower needs offsets below the log start)", len(objs), left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWALProgressResetOnLowerLEO: a follower that comes back with a
// shorter log (a restart without its unflushed tail, a truncation, or its
// first fetch of a new leadership) needs the objects again; the deletion
// tracker must not keep the higher log end it reported before.
func TestWALProgressResetOnLowerLEO(t *testing.T) {
	up, err := wal.NewUploader(wal.UploaderConfig{Store: objstore.NewMem("wal-a"), Cluster: "c", Zone: "a", BrokerID: 1, Incarnation: 1, UploadInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(context.Background())
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard(), Now: time.Now}, parts: map[meta.TopicPartition]*Partition{}}
	m.wal = &walRep{m: m, up: up, cfg: WALConfig{InlineAfter: time.Second, Clock: wal.RealClock{}}, tracker: wal.NewTracker(time.Hour), objects: map[string][]meta.TopicPartition{}}
	p := NewPartition(tp, openLog(t), 1, nil)
	st := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}, PartitionEpoch: 1}
	m.Apply(p, meta.BecomeLeader, st)
	if _, err := p.Log.AppendAsLeader(batch(t, values(10, "v")...), 1); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// newLeadership: this broker is elected again (epoch + 1) between
		// the two fetches, without following in between.
		newLeadership bool
	}{
		{"restart without the tail", false},
		{"first fetch of a new leadership", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add := func() {
				// The tracker tracks chunks of the leadership's epoch; a
				// new leadership forgets the previous one's.
				needs := []wal.ChunkNeed{{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: st.LeaderEpoch, LastOffset: 9, Replicas: []int32{2}}}
				m.wal.tracker.Add("wal-a", "obj-"+tc.name, time.Now(), needs)
			}
			if !tc.newLeadership {
				add()
			}
			if _, err := m.ServeReplicaFetch(p, 2, -1, 10, 1, st.LeaderEpoch); err != nil {
				t.Fatal(err)
			}
			if tc.newLeadership {
				st.LeaderEpoch++
				st.PartitionEpoch++
				m.Apply(p, meta.BecomeLeader, st)
				add()
			}
			if _, err := m.ServeReplicaFetch(p, 2, -1, 5, 1, st.LeaderEpoch); err != nil {
				t.Fatal(err)
			}
			if got := m.wal.tracker.Collect(time.Now()); len(got) != 0 {
				t.Fatalf("deletable: %v; follower 2 is back at offset 5 and needs offsets 5-9 again", got)
			}
			// It catches up: now the object may go.
			if _, err := m.ServeReplicaFetch(p, 2, -1, 10, 1, st.LeaderEpoch); err != nil {
				t.Fatal(err)
			}
			if got := m.wal.tracker.Collect(time.Now()); len(got) != 1 {
				t.Fatalf("deletable after follower 2 caught up: %v, want the object", got)
			}
		})
	}
}
