package wal_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// Raw sets in WAL objects (Uploader.AppendRaw): zone-local produce's
// forwarded records share the broker's own WAL objects.

// rawDone collects the RawUpload outcomes.
type rawDone struct {
	mu   sync.Mutex
	list []wal.RawUpload
}

func (r *rawDone) add(ru wal.RawUpload) { r.mu.Lock(); r.list = append(r.list, ru); r.mu.Unlock() }
func (r *rawDone) all() []wal.RawUpload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wal.RawUpload(nil), r.list...)
}

// of returns the outcome of the object that carried call.
func (r *rawDone) of(t *testing.T, call any) wal.RawUpload {
	t.Helper()
	var out *wal.RawUpload
	waitFor(t, "the outcome of call", func() bool {
		for _, ru := range r.all() {
			for _, c := range ru.Calls {
				if c == call {
					out = &ru
					return true
				}
			}
		}
		return false
	})
	return *out
}

// heldStore holds every PUT while held is set, until release.
type heldStore struct {
	objstore.Store
	mu      sync.Mutex
	gate    chan struct{}
	waiting int
}

func (s *heldStore) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *heldStore) release() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *heldStore) held() int { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting }

func (s *heldStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	gate := s.gate
	if gate != nil {
		s.waiting++
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}
	return s.Store.Put(ctx, key, data)
}

func rawUploader(t *testing.T, store objstore.Store, res *results, done *rawDone) *wal.Uploader {
	t.Helper()
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: store, Cluster: "demo", Zone: "zone-a", BrokerID: 5, Incarnation: 9,
		// Own chunks are cut only by the size or at Close: what goes out
		// earlier rode on the raw sets' cuts.
		MaxObjectBytes: 1 << 20, UploadInterval: time.Hour, OnUpload: res.add, HedgeAfter: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	u.SetRawDone(done.add)
	t.Cleanup(func() { u.Close(context.Background()) })
	return u
}

// checkRaw reads ru's object and checks that it decodes (chunks intact)
// and holds sets at ru's offsets for call index i.
func checkRaw(t *testing.T, store objstore.Store, ru wal.RawUpload, i int, sets [][]byte) *wal.Object {
	t.Helper()
	if ru.Err != nil {
		t.Fatalf("raw upload %s: %v", ru.Key, ru.Err)
	}
	if _, err := wal.ParseKey(ru.Key); err != nil {
		t.Fatalf("raw sets in %s, not a WAL object: %v", ru.Key, err)
	}
	data, err := store.Get(context.Background(), ru.Key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := wal.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", ru.Key, err)
	}
	for _, c := range obj.Chunks {
		if c.Err != nil {
			t.Fatalf("chunk %s-%d: %v", c.Topic, c.Partition, c.Err)
		}
	}
	if len(ru.Offsets[i]) != len(sets) {
		t.Fatalf("%d offsets for %d sets", len(ru.Offsets[i]), len(sets))
	}
	for j, s := range sets {
		off := ru.Offsets[i][j]
		if got := data[off : off+int64(len(s))]; !bytes.Equal(got, s) {
			t.Fatalf("set %d at %d: %q, want %q", j, off, got, s)
		}
	}
	return obj
}

// TestUploaderAppendRawShares: raw sets join the pending object with the
// own chunks, are cut with them by a nudge, and
// the object decodes as a WAL object whose chunk table does not name
// them; it has two holders, and Release hands it for deletion only to
// the second.
func TestUploaderAppendRawShares(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := s3Store(t, srv)
	var res results
	var done rawDone
	u := rawUploader(t, store, &res, &done)

	own := batch(t, 0, 3, 1, 100)
	if err := u.Append("orders", 0, 1, 0, 2, own); err != nil {
		t.Fatal(err)
	}
	sets := [][]byte{[]byte("forwarded-one"), []byte("forwarded-two;longer")}
	if err := u.AppendRaw(sets, "call-1"); err != nil {
		t.Fatal(err)
	}
	u.Nudge() // as the forwarder does after its call
	ru := done.of(t, "call-1")
	if !ru.Shared {
		t.Fatal("the object did not carry the pending own chunk")
	}
	obj := checkRaw(t, store, ru, 0, sets)
	if len(obj.Chunks) != 1 || obj.Chunks[0].Topic != "orders" || !bytes.Equal(obj.Chunks[0].Data, own) {
		t.Fatalf("chunks %+v, want the own batch", obj.Chunks)
	}
	waitFor(t, "the object's OnUpload", func() bool { return res.len() == 1 })
	if r := res.all()[0]; r.Key != ru.Key || len(r.Pointers) != 1 || r.Pointers[0].LastOffset != 2 || !r.FirstByte.After(time.Time{}) {
		t.Fatalf("OnUpload %+v, want the shared object's pointer to offsets 0..2", r)
	}

	// Raw sets alone: an object of the uploader's all the same.
	if err := u.AppendRaw([][]byte{[]byte("alone")}, "call-2"); err != nil {
		t.Fatal(err)
	}
	u.Nudge()
	alone := done.of(t, "call-2")
	if alone.Shared || alone.Key == ru.Key {
		t.Fatalf("second object %+v: want one of its own, not shared", alone)
	}
	if obj := checkRaw(t, store, alone, 0, [][]byte{[]byte("alone")}); len(obj.Chunks) != 0 {
		t.Fatalf("%d chunks in a raw-only object", len(obj.Chunks))
	}
	waitFor(t, "its OnUpload", func() bool { return res.len() == 2 })
	if r := res.all()[1]; len(r.Pointers) != 0 || !r.FirstByte.IsZero() {
		t.Fatalf("OnUpload %+v: no pointers, no own first byte", r)
	}

	// Two holders each: the first Release keeps an object, the second
	// hands it over; a key of no raw sets is handed over at once.
	if n := u.Holders(); n != 2 {
		t.Fatalf("%d objects held, want 2", n)
	}
	if got := u.Release([]string{ru.Key, alone.Key, "wal/other"}); len(got) != 1 || got[0] != "wal/other" {
		t.Fatalf("first release handed over %v, want only the unshared key", got)
	}
	if got := u.Release([]string{alone.Key, ru.Key}); len(got) != 2 {
		t.Fatalf("second release handed over %v, want both", got)
	}
	if n := u.Holders(); n != 0 {
		t.Fatalf("%d objects still held", n)
	}
}

// TestUploaderAppendRawFollowsPlan: raw sets are cut as the own appends
// are, by the plan: not on their own (the interval is an hour here), but
// on the caller's Nudge; and while GroupInFlight (2) uploads are busy
// they wait in the pending object with the own chunks that come
// meanwhile, and go out when one upload finishes.
func TestUploaderAppendRawFollowsPlan(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := &heldStore{Store: s3Store(t, srv)}
	var res results
	var done rawDone
	u := rawUploader(t, store, &res, &done)

	store.hold()
	if err := u.AppendRaw([][]byte{[]byte("a")}, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := store.held(); n != 0 || u.Stats().PendingBytes != 1 {
		t.Fatalf("%d PUTs, %d bytes pending: raw sets cut without a nudge", n, u.Stats().PendingBytes)
	}
	u.Nudge()
	waitFor(t, "the first PUT", func() bool { return store.held() == 1 })
	if err := u.AppendRaw([][]byte{[]byte("b")}, "b"); err != nil {
		t.Fatal(err)
	}
	u.Nudge()
	waitFor(t, "the second PUT", func() bool { return store.held() == 2 })

	if err := u.AppendRaw([][]byte{[]byte("c")}, "c"); err != nil {
		t.Fatal(err)
	}
	own := batch(t, 0, 1, 0, 50)
	if err := u.Append("orders", 3, 0, 0, 0, own); err != nil {
		t.Fatal(err)
	}
	u.Nudge()
	time.Sleep(50 * time.Millisecond)
	if n := store.held(); n != 2 {
		t.Fatalf("%d PUTs started with two busy, want the next held back", n)
	}
	if st := u.Stats(); st.PendingBytes != len(own)+1 {
		t.Fatalf("pending %d bytes, want the raw set and the own batch (%d)", st.PendingBytes, len(own)+1)
	}
	store.release()
	c := done.of(t, "c")
	if !c.Shared || len(c.Calls) != 1 {
		t.Fatalf("third object %+v: want call c with the own batch", c)
	}
	checkRaw(t, store, c, 0, [][]byte{[]byte("c")})
	for _, call := range []string{"a", "b"} {
		if ru := done.of(t, call); ru.Shared || ru.Err != nil {
			t.Fatalf("object of %s: %+v", call, ru)
		}
	}
}

// TestUploaderAppendRawFailures: a failed PUT reports the error to the raw
// calls and leaves nothing held; a degraded or closed uploader refuses
// raw sets as it refuses batches.
func TestUploaderAppendRawFailures(t *testing.T) {
	u, faulty, _, _ := breakerUploader(t)
	var done rawDone
	u.SetRawDone(done.add)
	faulty.SetFailAll(true)
	for _, call := range []string{"x", "y"} {
		if err := u.AppendRaw([][]byte{[]byte(call)}, call); err != nil {
			t.Fatalf("AppendRaw %s: %v", call, err)
		}
		u.Flush()
		if ru := done.of(t, call); ru.Err == nil || ru.Offsets[0] != nil {
			t.Fatalf("failed PUT reported %+v", ru)
		}
	}
	if n := u.Holders(); n != 0 {
		t.Fatalf("%d objects held after failed PUTs", n)
	}
	waitFor(t, "degraded", u.Degraded)
	if err := u.AppendRaw([][]byte{[]byte("z")}, "z"); !errors.Is(err, wal.ErrDegraded) {
		t.Fatalf("AppendRaw while degraded = %v, want ErrDegraded", err)
	}
	if err := u.AppendRaw(nil, "empty"); err == nil {
		t.Fatal("AppendRaw of no bytes accepted")
	}
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := u.AppendRaw([][]byte{[]byte("late")}, "late"); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("AppendRaw after Close = %v, want ErrClosed", err)
	}
}
