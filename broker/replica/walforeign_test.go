package replica

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// TestWALForeignPointers: a forwarded range appended as forwarded gets a
// foreign pointer instead of an upload; one appended behind a range still
// being uploaded waits for it, so the index (and every follower) sees the
// pointers in offset order; a follower that does not read foreign
// pointers gets those ranges inline; an append that changed the bytes is
// uploaded.
// foreignLeader is a WAL leader of tp with a pointer index and no
// uploader, for the foreign pointer tests.
func foreignLeader(t *testing.T) (*Manager, *walRep, *Partition, *wal.PointerIndex) {
	t.Helper()
	m := &Manager{cfg: Config{NodeID: 1, Log: logr.Discard()}, parts: map[meta.TopicPartition]*Partition{}}
	w := &walRep{m: m, cfg: WALConfig{InlineAfter: time.Hour, Clock: wal.RealClock{}}, tracker: wal.NewTracker(time.Hour),
		objects: map[string][]meta.TopicPartition{}, putEnd: map[string]time.Time{}, stages: newStageMetrics(),
		foreign: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "foreign"}, []string{"outcome"})}
	m.wal = w
	p := NewPartition(tp, openLog(t), 1, nil)
	p.wal = w
	idx, err := wal.OpenPointerIndex(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	p.walIndex, p.role = idx, RoleLeader
	m.parts[tp] = p
	return m, w, p, idx
}

func TestWALForeignPointers(t *testing.T) {
	m, w, p, idx := foreignLeader(t)
	up, err := wal.NewUploader(wal.UploaderConfig{Store: objstore.NewMem("wal-a"), Cluster: "c", Zone: "a", BrokerID: 1, Incarnation: 1,
		UploadInterval: time.Hour, OnUpload: w.onUpload})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(context.Background())
	w.up = up

	own := func() {
		t.Helper()
		if _, _, err := p.AppendAsLeader([]record.Batch{epochBatch(t, 0, -1, "own")}); err != nil {
			t.Fatal(err)
		}
	}
	// forwarded appends a producer's batch read from the forwarder's
	// object at byte pos; change alters what the forwarder stored.
	forwarded := func(pos int64, change func([]byte)) {
		t.Helper()
		b := epochBatch(t, 0, -1, "forwarded")
		fwd := &Forwarded{Bucket: "zl-a", Key: fmt.Sprintf("wal/c/a/2/zl-1/%020d", pos), Offset: pos, Length: int64(len(b)),
			CRC: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), Data: bytes.Clone(b), Keep: time.Hour}
		if change != nil {
			change(fwd.Data)
		}
		if _, _, err := p.AppendForwarded([]record.Batch{b}, false, nil, fwd); err != nil {
			t.Fatal(err)
		}
	}
	pointers := func() []wal.Pointer { return idx.All() }

	own()
	forwarded(100, nil) // offset 1: behind the pending upload of 0
	if n := len(pointers()); n != 0 {
		t.Fatalf("%d pointers before the upload of offset 0; the forwarded range must wait for it", n)
	}
	if plan := m.PlanWALFetchFor(p, 1, 1<<20, true); plan.Reason != "" || plan.InlineUpTo != 1 || len(plan.Pointers) != 0 {
		t.Fatalf("queued forwarded range: plan %+v, want to wait", plan)
	}
	own()
	up.Flush()
	waitFor(t, func() bool { return len(pointers()) == 3 })
	got := pointers()
	for i, want := range []struct {
		base   int64
		rebase bool
	}{{0, false}, {1, true}, {2, false}} {
		if got[i].BaseOffset != want.base || got[i].LastOffset != want.base || got[i].Rebase != want.rebase {
			t.Fatalf("pointer %d: %v (rebase %v), want offset %d rebase %v", i, got[i], got[i].Rebase, want.base, want.rebase)
		}
	}
	if got[1].Bucket != "zl-a" || got[1].Offset != 100 || got[1].LeaderEpoch != p.state.LeaderEpoch {
		t.Fatalf("foreign pointer %v", got[1])
	}

	// With nothing pending, a forwarded range is published at once.
	forwarded(200, nil)
	if got := pointers(); len(got) != 4 || !got[3].Rebase || got[3].BaseOffset != 3 {
		t.Fatalf("forwarded range with nothing pending: pointers %v", got)
	}
	if n := testutil.ToFloat64(w.foreign.WithLabelValues(ForeignPublished)); n != 2 {
		t.Fatalf("published %v, want 2", n)
	}
	// wal.policy=auto learns these bytes are in objects already.
	if n, want := w.forwardedIn.Load(), 2*int64(len(epochBatch(t, 0, -1, "forwarded"))); n != want {
		t.Fatalf("forwarded bytes counted for the policy: %d, want %d", n, want)
	}

	// A follower that reads foreign pointers gets them all; another one
	// the own pointers before them, then the forwarded ranges inline.
	if plan := m.PlanWALFetchFor(p, 0, 1<<20, true); len(plan.Pointers) != 4 {
		t.Fatalf("foreign-reading follower: plan %+v, want 4 pointers", plan)
	}
	if plan := m.PlanWALFetch(p, 0, 1<<20); len(plan.Pointers) != 1 || plan.Pointers[0].Rebase {
		t.Fatalf("older follower at 0: plan %+v, want the own pointer only", plan)
	}
	if plan := m.PlanWALFetch(p, 1, 1<<20); len(plan.Pointers) != 0 || plan.InlineUpTo != 2 || plan.Reason != InlineForeignUnread {
		t.Fatalf("older follower at 1: plan %+v, want inline to 2 (foreign_unread)", plan)
	}
	if plan := m.PlanWALFetch(p, 3, 1<<20); len(plan.Pointers) != 0 || plan.InlineUpTo != 4 || plan.Reason != InlineForeignUnread {
		t.Fatalf("older follower at 3: plan %+v, want inline to 4 (foreign_unread)", plan)
	}

	// The wire: the flag reaches a follower beside either pointer form.
	for _, compact := range []bool{false, true} {
		var sp kmsg.FetchResponseTopicPartition
		a := NewPointerAnswer(compact)
		if err := a.Set(&sp, got); err != nil {
			t.Fatal(err)
		}
		var resp kmsg.FetchResponse
		a.Finish(&resp)
		var back []wal.Pointer
		if compact {
			objs, _, err := compactObjects(&resp)
			if err != nil {
				t.Fatal(err)
			}
			back, err = decodeCompactPointers(tagValue(&sp.UnknownTags, TagWALPointers), objs, tp.Topic, tp.Partition)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			back, err = DecodePointers(tagValue(&sp.UnknownTags, TagWALPointers))
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := markRebase(&sp, back); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if back[i] != got[i] {
				t.Fatalf("compact=%v: pointer %d came back as %v (rebase %v)", compact, i, back[i], back[i].Rebase)
			}
		}
	}

	// An append that changed more than offsets and epoch (here: the
	// forwarder's copy differs in a record byte) is uploaded.
	forwarded(300, func(b []byte) { b[len(b)-1] ^= 1 })
	if n := testutil.ToFloat64(w.foreign.WithLabelValues(ForeignReuploaded)); n != 1 {
		t.Fatalf("reuploaded %v, want 1", n)
	}
	up.Flush()
	waitFor(t, func() bool { return len(pointers()) == 5 })
	if last := pointers()[4]; last.Rebase || last.Bucket != "wal-a" || last.BaseOffset != 4 {
		t.Fatalf("changed forwarded range: pointer %v, want an upload of its own", last)
	}

	// Foreign pointers leave the index once every replica has their
	// range, or once the forwarder's keep time passed.
	offsets := func() (out []int64) {
		for _, p := range pointers() {
			out = append(out, p.BaseOffset)
		}
		return out
	}
	p.mu.Lock()
	p.state.Replicas = []int32{1, 2}
	p.followers = map[int32]*followerState{2: {leo: 2}}
	p.pruneForeignLocked(time.Now())
	p.mu.Unlock()
	if got := offsets(); len(got) != 4 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("follower at 2: pointers at %v, want the foreign one at 1 gone", got)
	}
	p.mu.Lock()
	p.pruneForeignLocked(time.Now().Add(2 * time.Hour))
	p.mu.Unlock()
	if got := offsets(); len(got) != 3 || got[1] != 2 || got[2] != 4 {
		t.Fatalf("keep time passed: pointers at %v, want the foreign one at 3 gone", got)
	}
}

// TestWALForeignPointersPaced: with a policy cut interval the forwarded
// ranges of that interval are published together when it ends (or with
// the partition's next upload), not one by one: under wal.policy=cost
// each publication was a replica fetch round across zones.
func TestWALForeignPointersPaced(t *testing.T) {
	_, w, p, idx := foreignLeader(t)
	const interval = 300 * time.Millisecond
	w.foreignWake.Store(int64(interval))

	wakes := 0
	p.mu.Lock()
	ch := p.walCh
	p.mu.Unlock()
	start := time.Now()
	for i := range 3 {
		b := epochBatch(t, 0, -1, "forwarded")
		fwd := &Forwarded{Bucket: "zl-a", Key: fmt.Sprintf("wal/c/a/2/zl-1/%020d", i), Length: int64(len(b)),
			CRC: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), Data: bytes.Clone(b), Keep: time.Hour}
		if _, _, err := p.AppendForwarded([]record.Batch{b}, false, nil, fwd); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(idx.All()); n != 0 && time.Since(start) < interval {
		t.Fatalf("%d foreign pointers published before the interval ended", n)
	}
	select {
	case <-ch:
		wakes++
	case <-time.After(5 * time.Second):
		t.Fatal("forwarded ranges never published")
	}
	if got := idx.All(); len(got) != 3 || got[0].BaseOffset != 0 || got[2].BaseOffset != 2 || !got[2].Rebase {
		t.Fatalf("after the interval: pointers %v, want the three forwarded ranges", got)
	}
	p.mu.Lock()
	ch = p.walCh
	p.mu.Unlock()
	select {
	case <-ch:
		t.Fatal("a second wake for the same interval's ranges")
	case <-time.After(2 * interval):
	}
	if wakes != 1 {
		t.Fatalf("%d wakes", wakes)
	}
}
