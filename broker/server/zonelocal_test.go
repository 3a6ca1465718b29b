package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/wal"
)

// gatedStore is a bucket whose PUTs can be held (hold(n): the n-th PUT,
// from 1, waits for release) or failed (fail(n)).
type gatedStore struct {
	*objstore.Mem
	mu    sync.Mutex
	puts  int
	gates map[int]chan struct{}
	fails map[int]error
}

func newGatedStore() *gatedStore {
	return &gatedStore{Mem: objstore.NewMem("wal-a"), gates: map[int]chan struct{}{}, fails: map[int]error{}}
}

// hold makes the n-th PUT wait until the returned func is called.
func (g *gatedStore) hold(n int) (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.gates[n] = ch
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (g *gatedStore) fail(n int, err error) {
	g.mu.Lock()
	g.fails[n] = err
	g.mu.Unlock()
}

func (g *gatedStore) Put(ctx context.Context, key string, data []byte) error {
	g.mu.Lock()
	g.puts++
	gate, err := g.gates[g.puts], g.fails[g.puts]
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	return g.Mem.Put(ctx, key, data)
}

func (g *gatedStore) putCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.puts
}

func newTestZoneLocal(t *testing.T, st objstore.Store, maxPuts int) *zoneLocal {
	t.Helper()
	router, err := newZLRouter(ZoneLocalPolicyBucket, cost.Default())
	if err != nil {
		t.Fatal(err)
	}
	z := newZoneLocal(&Server{log: logr.Discard()}, true, 0, router, st, func(string) (objstore.Store, error) { return st, nil }, "c", "a", maxPuts)
	t.Cleanup(z.close)
	return z
}

// waitForZL polls cond until it holds or a deadline passes.
func waitForZL(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (z *zoneLocal) queued() int {
	z.putMu.Lock()
	defer z.putMu.Unlock()
	return len(z.queue)
}

type putResult struct {
	sets [][]byte
	refs []protocol.ZoneLocalRef
	err  error
}

// putAsync calls PutRecords on its own goroutine.
func putAsync(ctx context.Context, z *zoneLocal, sets ...[]byte) <-chan putResult {
	ch := make(chan putResult, 1)
	go func() {
		refs, err := z.PutRecords(ctx, sets)
		ch <- putResult{sets, refs, err}
	}()
	return ch
}

func sets(caller, n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, bytes.Repeat([]byte(fmt.Sprintf("c%d-s%d;", caller, i)), caller+i+1))
	}
	return out
}

// TestZoneLocalGroupCommit: the calls that arrive while a forwarded PUT
// is in flight share the next object; each gets refs to its own sets in
// it, the objects are counted, and the shared object is deleted once the
// last of its callers is done.
func TestZoneLocalGroupCommit(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 1)
	release := st.hold(1)
	first := putAsync(t.Context(), z, sets(0, 2)...)
	waitForZL(t, "the first PUT", func() bool { return st.putCount() == 1 })

	const queued = 8
	var results []<-chan putResult
	for i := 1; i <= queued; i++ {
		results = append(results, putAsync(t.Context(), z, sets(i, 3)...))
	}
	waitForZL(t, "the queue", func() bool { return z.queued() == queued })
	release()

	all := []putResult{<-first}
	for _, ch := range results {
		all = append(all, <-ch)
	}
	if n := st.putCount(); n != 2 {
		t.Fatalf("%d PUTs for %d calls, want 2 (one, then the queued ones together)", n, queued+1)
	}
	keys := map[string]int{}
	for _, r := range all {
		if r.err != nil {
			t.Fatalf("PutRecords: %v", r.err)
		}
		if len(r.refs) != len(r.sets) {
			t.Fatalf("%d refs for %d sets", len(r.refs), len(r.sets))
		}
		keys[r.refs[0].Key]++
		data, errs := z.Read(t.Context(), r.refs)
		for i := range r.sets {
			if errs[i] != nil || !bytes.Equal(data[i], r.sets[i]) || protocol.ZoneLocalCRC(data[i]) != r.refs[i].CRC {
				t.Fatalf("set %d read back %q (%v), want %q", i, data[i], errs[i], r.sets[i])
			}
			if r.refs[i].Key != r.refs[0].Key {
				t.Fatalf("one call's sets in two objects: %v", r.refs)
			}
		}
	}
	if len(keys) != 2 {
		t.Fatalf("objects %v, want 2", keys)
	}
	if got := testutil.ToFloat64(z.objects); got != 2 {
		t.Errorf("strata_zonelocal_objects_total %v, want 2", got)
	}
	if got := testutil.ToFloat64(z.metrics.WithLabelValues("forwarded")); got != 2+queued*3 {
		t.Errorf("forwarded partitions %v, want %d", got, 2+queued*3)
	}

	// The shared object goes only with its last caller's Done.
	shared := all[1].refs[0].Key
	for _, r := range all[:len(all)-1] {
		z.Done(r.refs)
		z.Done(nil)
	}
	z.deleteNow(time.Time{})
	if _, err := st.Head(t.Context(), shared); err != nil {
		t.Fatalf("shared object deleted before its last caller was done: %v", err)
	}
	// Then it stays wal.zonelocal.object.keep.ms, for the leader's
	// followers to read.
	z.keep = time.Minute
	z.Done(all[len(all)-1].refs)
	z.deleteNow(time.Now())
	if _, err := st.Head(t.Context(), shared); err != nil {
		t.Fatalf("shared object deleted before its keep time: %v", err)
	}
	z.deleteNow(time.Now().Add(time.Minute))
	if _, err := st.Head(t.Context(), shared); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("shared object after every caller was done: %v, want not found", err)
	}
	if _, err := st.Head(t.Context(), all[0].refs[0].Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("first object after its caller was done: %v, want not found", err)
	}
}

// TestZoneLocalGroupCommitCap: a group stops at the object size cap; a
// call larger than the cap still goes, alone.
func TestZoneLocalGroupCommitCap(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 1)
	z.maxObjectBytes = 100
	release := st.hold(1)
	first := putAsync(t.Context(), z, []byte("x"))
	waitForZL(t, "the first PUT", func() bool { return st.putCount() == 1 })
	var results []<-chan putResult
	for i, size := range []int{60, 40, 30, 200} { // groups: 60+40, 30, 200
		results = append(results, putAsync(t.Context(), z, bytes.Repeat([]byte{byte('a' + i)}, size)))
		waitForZL(t, "the queue", func() bool { return z.queued() == i+1 })
	}
	release()
	<-first
	var keys []string
	for _, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		keys = append(keys, r.refs[0].Key)
	}
	if keys[0] != keys[1] || keys[1] == keys[2] || keys[2] == keys[3] || st.putCount() != 4 {
		t.Fatalf("objects %v in %d PUTs, want 60+40, 30 and 200 bytes in 3 after the first", keys, st.putCount())
	}
}

// TestZoneLocalGroupCommitFailure: a failed shared PUT fails every call
// in it, and nothing of it waits for deletion.
func TestZoneLocalGroupCommitFailure(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 1)
	release := st.hold(1)
	st.fail(2, errors.New("injected"))
	first := putAsync(t.Context(), z, []byte("first"))
	waitForZL(t, "the first PUT", func() bool { return st.putCount() == 1 })
	a := putAsync(t.Context(), z, []byte("a"))
	b := putAsync(t.Context(), z, []byte("b"))
	waitForZL(t, "the queue", func() bool { return z.queued() == 2 })
	release()
	if r := <-first; r.err != nil {
		t.Fatal(r.err)
	}
	for _, ch := range []<-chan putResult{a, b} {
		if r := <-ch; r.err == nil || r.refs != nil {
			t.Fatalf("call in a failed PUT: refs %v, error %v", r.refs, r.err)
		}
	}
	z.delMu.Lock()
	users := len(z.users)
	z.delMu.Unlock()
	if users != 1 || testutil.ToFloat64(z.objects) != 1 {
		t.Fatalf("%d objects awaiting Done, %v counted, want the first only", users, testutil.ToFloat64(z.objects))
	}
}

// TestZoneLocalGroupCommitCancel: a queued call whose ctx ends returns at
// once and is not written; a call whose ctx ends while its object is
// being PUT returns at once, and the object does not wait for it.
func TestZoneLocalGroupCommitCancel(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 1)
	release1 := st.hold(1)
	release2 := st.hold(2)
	defer release2()
	first := putAsync(t.Context(), z, []byte("first"))
	waitForZL(t, "the first PUT", func() bool { return st.putCount() == 1 })

	qctx, cancelQueued := context.WithCancel(t.Context())
	gone := putAsync(qctx, z, []byte("gone"))
	kept := putAsync(t.Context(), z, []byte("kept"))
	waitForZL(t, "the queue", func() bool { return z.queued() == 2 })
	cancelQueued()
	if r := <-gone; !errors.Is(r.err, context.Canceled) || r.refs != nil {
		t.Fatalf("cancelled queued call: refs %v, error %v, want context.Canceled", r.refs, r.err)
	}
	if n := z.queued(); n != 1 {
		t.Fatalf("%d calls queued after the cancel, want 1", n)
	}

	// The kept call's object: its caller leaves while it is PUT.
	wctx, cancelWriting := context.WithCancel(t.Context())
	writing := putAsync(wctx, z, []byte("writing"))
	waitForZL(t, "the queue", func() bool { return z.queued() == 2 })
	release1()
	if r := <-first; r.err != nil {
		t.Fatal(r.err)
	}
	waitForZL(t, "the second PUT", func() bool { return st.putCount() == 2 })
	cancelWriting()
	if r := <-writing; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("call cancelled during its PUT: error %v, want context.Canceled", r.err)
	}
	release2()
	r := <-kept
	if r.err != nil {
		t.Fatal(r.err)
	}
	whole, err := st.Get(t.Context(), r.refs[0].Key, 0, -1)
	if err != nil || !bytes.Equal(whole, []byte("keptwriting")) {
		t.Fatalf("shared object %q (%v), want the kept and the writing call's bytes, not the cancelled one's", whole, err)
	}
	// The writing call's caller left: the kept call alone holds the object.
	z.delMu.Lock()
	users := z.users[r.refs[0].Key]
	z.delMu.Unlock()
	if users != 1 {
		t.Fatalf("the shared object waits for %d callers, want 1 (the kept call)", users)
	}
}

// TestZoneLocalSlowPut: a PUT slower than the slow delay lets the queue go
// out beside it (wal.zonelocal.put.concurrency 2); with 1 it waits.
func TestZoneLocalSlowPut(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 2)
	release := st.hold(1)
	defer release()
	slow := putAsync(t.Context(), z, []byte("slow"))
	waitForZL(t, "the first PUT", func() bool { return st.putCount() == 1 })
	select {
	case r := <-putAsync(t.Context(), z, []byte("next")):
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call queued behind a held PUT did not get a PUT of its own")
	}
	select {
	case r := <-slow:
		t.Fatalf("the held PUT answered: %v", r.err)
	default:
	}
	release()
	if r := <-slow; r.err != nil {
		t.Fatal(r.err)
	}
}

// answerApiVersions answers one ApiVersions v3 request on nc with a
// response carrying the zone-local forms tag (nil: none, an older
// release).
func answerApiVersions(nc net.Conn, forms []byte) {
	defer nc.Close()
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil || len(body) < 8 {
		return
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if forms != nil {
		resp.UnknownTags.Set(protocol.TagZoneLocalForms, forms)
	}
	out := append([]byte(nil), body[4:8]...) // correlation ID; header v0
	out = resp.AppendTo(out)
	_, _ = nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...))
}

// TestZoneLocalCompactRefsGate: the forwarder sends the compact form of
// forwarded records only to a leader that announces it reads it; an
// older leader (mid rolling upgrade) gets the first form.
func TestZoneLocalCompactRefsGate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forms []byte
		want  bool
	}{
		{"reads both forms", []byte{protocol.ZoneLocalFormsRead}, true},
		{"older release", nil, false},
		{"first form only", []byte{1}, false},
		{"malformed tag", []byte{2, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			go answerApiVersions(server, tc.forms)
			c := newIBConn(client, "pipe", "strata-broker-1")
			defer c.close(errors.New("test over"))
			got, err := c.readsCompactRefs(t.Context())
			if err != nil || got != tc.want {
				t.Fatalf("readsCompactRefs = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestZoneLocalSharesWALObjects: with the WAL uploader shared, forwarded
// record sets ride in its objects beside the broker's own chunks (one
// PUT for both, cut by the call's nudge), read back at their refs; a shared object outlives both
// the forwarder's last Done (and keep time) and the leader's deletion
// until the second of them lets it go; an uploader that refuses (closed
// here) leaves the calls objects of their own.
func TestZoneLocalSharesWALObjects(t *testing.T) {
	st := newGatedStore()
	z := newTestZoneLocal(t, st, 0)
	up, err := wal.NewUploader(wal.UploaderConfig{
		Store: st, Cluster: "c", Zone: "a", BrokerID: 1, Incarnation: 7,
		UploadInterval: time.Hour, HedgeAfter: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	z.share(up, up.Nudge)
	if err := up.Append("orders", 0, 0, 0, 0, []byte("own batch bytes")); err != nil {
		t.Fatal(err)
	}
	// Each call's nudge cuts the object (the plan's token bucket has
	// room for three): the first takes the pending own batch with it.
	var all []putResult
	for i := range 3 {
		all = append(all, <-putAsync(t.Context(), z, sets(i, i+1)...))
	}
	keys := map[string]bool{}
	for _, r := range all {
		if r.err != nil {
			t.Fatalf("PutRecords: %v", r.err)
		}
		if _, err := wal.ParseKey(r.refs[0].Key); err != nil {
			t.Fatalf("forwarded sets in %s, not a WAL object: %v", r.refs[0].Key, err)
		}
		keys[r.refs[0].Key] = true
		data, errs := z.Read(t.Context(), r.refs)
		for i := range r.sets {
			if errs[i] != nil || !bytes.Equal(data[i], r.sets[i]) || protocol.ZoneLocalCRC(data[i]) != r.refs[i].CRC {
				t.Fatalf("set %d read back %q (%v), want %q", i, data[i], errs[i], r.sets[i])
			}
		}
	}
	if n := st.putCount(); n != 3 || len(keys) != 3 {
		t.Fatalf("%d PUTs, objects %v: want 3, one per call", n, keys)
	}
	if got := testutil.ToFloat64(z.shared); got != 1 {
		t.Errorf("strata_zonelocal_shared_objects_total %v, want 1", got)
	}
	if got := testutil.ToFloat64(z.objects); got != 3 {
		t.Errorf("strata_zonelocal_objects_total %v, want 3", got)
	}

	// The forwarder lets the shared object go first: it stays for the
	// leader's deletion, which then hands it over.
	shared, alone := all[0].refs[0].Key, all[1].refs[0].Key
	z.Done(all[0].refs)
	z.deleteNow(time.Time{})
	if _, err := st.Head(t.Context(), shared); err != nil {
		t.Fatalf("shared object deleted while the leader's deletion holds it: %v", err)
	}
	if got := up.Release([]string{shared}); len(got) != 1 {
		t.Fatalf("the leader's release handed over %v, want the shared object", got)
	}
	// The other order: the leader's deletion first, then the forwarder
	// deletes it.
	if got := up.Release([]string{alone, all[2].refs[0].Key}); len(got) != 0 {
		t.Fatalf("the leader's release handed over %v while the forwarder holds it", got)
	}
	z.Done(all[1].refs)
	z.Done(all[2].refs)
	z.deleteNow(time.Time{})
	if _, err := st.Head(t.Context(), alone); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("%s after both let it go: %v, want not found", alone, err)
	}
	if up.Holders() != 0 {
		t.Fatalf("%d objects still held", up.Holders())
	}

	// A refusing uploader: an object of the calls' own.
	if err := up.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-putAsync(t.Context(), z, sets(3, 1)...)
	if r.err != nil || !strings.Contains(r.refs[0].Key, "/zl-") {
		t.Fatalf("with the uploader closed: refs %v, %v; want an object of their own", r.refs, r.err)
	}
}
