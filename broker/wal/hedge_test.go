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

// stalling holds the first stall requests of one kind until their
// context ends (a request stuck in a real store) and counts them and the
// cancelled ones; later requests go to the real store.
type stalling struct {
	mu                      sync.Mutex
	stall, calls, cancelled int
}

// hold reports the request's context error if it was held.
func (s *stalling) hold(ctx context.Context) error {
	s.mu.Lock()
	s.calls++
	stall := s.stall > 0
	if stall {
		s.stall--
	}
	s.mu.Unlock()
	if !stall {
		return nil
	}
	<-ctx.Done()
	s.mu.Lock()
	s.cancelled++
	s.mu.Unlock()
	return ctx.Err()
}

func (s *stalling) counts() (calls, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.cancelled
}

// stallingStore stalls GETs.
type stallingStore struct {
	objstore.Store
	stalling
}

func (s *stallingStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.hold(ctx); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key, offset, length)
}

// TestDownloaderHedgesStuckGet (issue #18 item 3): a GET stuck in the
// store gets a twin after the hedge delay; the twin's bytes are used and
// the stuck GET is cancelled, long before the download budget (30 s
// here). Without hedging the range waited out the whole budget and came
// back as ErrDownloadTimeout (replicated inline).
func TestDownloaderHedgesStuckGet(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	st := &stallingStore{Store: s3Store(t, srv), stalling: stalling{stall: 1}}
	c := chunk(t, "t", 0, 1, 0, 2, 3)
	ptrs := putObject(t, st, 1, []wal.ChunkInput{c}, nil)
	d := wal.NewDownloader(wal.DownloaderConfig{
		Store:      func(string) (objstore.Store, error) { return st, nil },
		Timeout:    30 * time.Second,
		HedgeAfter: 10 * time.Millisecond,
	})
	got := d.Fetch(context.Background(), ptrs)
	if len(got) != 1 || got[0].Err != nil {
		t.Fatalf("fetch: %+v", got)
	}
	if !bytes.Equal(bytes.Join(toBytes(got[0].Batches), nil), bytes.Join(c.Batches, nil)) {
		t.Fatal("hedged GET returned other bytes than uploaded")
	}
	s := d.Stats()
	st.mu.Lock()
	cancelled := st.cancelled
	st.mu.Unlock()
	if s.Hedged != 1 || s.Gets != 2 || s.TimedOut != 0 || cancelled != 1 {
		t.Fatalf("stats %+v, stuck GETs cancelled %d; want 1 hedge, 2 GETs, no timeout, the stuck GET cancelled", s, cancelled)
	}

	// Both stuck: the budget ends both, the range fails as a timeout
	// (inline), and nothing is left running.
	st.mu.Lock()
	st.stall = 2
	st.mu.Unlock()
	d2 := wal.NewDownloader(wal.DownloaderConfig{
		Store:      func(string) (objstore.Store, error) { return st, nil },
		Timeout:    200 * time.Millisecond,
		HedgeAfter: 10 * time.Millisecond,
	})
	got = d2.Fetch(context.Background(), ptrs)
	if len(got) != 1 || !errors.Is(got[0].Err, wal.ErrDownloadTimeout) {
		t.Fatalf("both GETs stuck: %+v, want ErrDownloadTimeout", got)
	}
	if s := d2.Stats(); s.Hedged != 1 || s.TimedOut != 1 {
		t.Fatalf("both GETs stuck: stats %+v", s)
	}

	// HedgeAfter < 0: no twin, the budget decides.
	st.mu.Lock()
	st.stall = 1
	st.mu.Unlock()
	d3 := wal.NewDownloader(wal.DownloaderConfig{
		Store:      func(string) (objstore.Store, error) { return st, nil },
		Timeout:    200 * time.Millisecond,
		HedgeAfter: -1,
	})
	got = d3.Fetch(context.Background(), ptrs)
	if len(got) != 1 || !errors.Is(got[0].Err, wal.ErrDownloadTimeout) || d3.Stats().Hedged != 0 {
		t.Fatalf("hedging off: %+v, stats %+v", got, d3.Stats())
	}
}

func toBytes[B ~[]byte](bs []B) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = b
	}
	return out
}

// TestHedgeDelayAdaptive: without HedgeAfter the delay is three times the
// recent GETs' average, at least MinHedgeDelay, 100 ms before any GET.
func TestHedgeDelayAdaptive(t *testing.T) {
	d := wal.NewDownloader(wal.DownloaderConfig{})
	if got := d.HedgeDelay(); got != 100*time.Millisecond {
		t.Fatalf("before any GET: %v", got)
	}
	d.ObserveGet(10 * time.Millisecond)
	if got := d.HedgeDelay(); got != 30*time.Millisecond {
		t.Fatalf("after a 10 ms GET: %v, want 30ms", got)
	}
	for range 200 {
		d.ObserveGet(time.Millisecond)
	}
	if got := d.HedgeDelay(); got != wal.MinHedgeDelay {
		t.Fatalf("after many 1 ms GETs: %v, want %v", got, wal.MinHedgeDelay)
	}
	if got := wal.NewDownloader(wal.DownloaderConfig{HedgeAfter: 7 * time.Millisecond}).HedgeDelay(); got != 7*time.Millisecond {
		t.Fatalf("fixed: %v", got)
	}
}

// stallingPutStore stalls PUTs.
type stallingPutStore struct {
	objstore.Store
	stalling
}

func (s *stallingPutStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.hold(ctx); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, data)
}

// TestUploaderHedgesStuckPut (issue #18 item 2): a PUT stuck in the store
// gets a twin of the same key and bytes after the hedge delay; the twin
// stores the object, the upload is reported as done (with the object's
// pointers, decoding to the appended batches) and the stuck PUT is
// cancelled. Without hedging the object — and every acks=all produce in
// it — waited for the stuck request as long as the store's call timeout.
// With hedging off the stuck PUT holds the upload until Close.
func TestUploaderHedgesStuckPut(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	st := &stallingPutStore{Store: s3Store(t, srv), stalling: stalling{stall: 1}}
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: st, Cluster: "demo", Zone: "zone-a", BrokerID: 4,
		OnUpload: res.add, HedgeAfter: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := batch(t, 0, 3, 0, 100)
	if err := u.Append("t", 0, 0, 0, 2, b); err != nil {
		t.Fatal(err)
	}
	u.Flush()
	waitFor(t, "the hedged upload's result", func() bool { return res.len() == 1 })
	checkUploaded(t, st.Store, res.all(), []appended{{"t", 0, 0, b}})
	puts, cancelled := st.counts()
	if s := u.Stats(); s.Hedged != 1 || puts != 2 || cancelled != 1 || s.Objects != 1 || s.Failed != 0 {
		t.Fatalf("stats %+v, %d PUTs, %d cancelled; want 1 hedge, 2 PUTs, the stuck one cancelled, 1 object stored", s, puts, cancelled)
	}
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Hedging off: the stuck PUT holds its object until Close cancels it.
	st2 := &stallingPutStore{Store: st.Store, stalling: stalling{stall: 1}}
	var res2 results
	u2, err := wal.NewUploader(wal.UploaderConfig{
		Store: st2, Cluster: "demo", Zone: "zone-a", BrokerID: 5,
		OnUpload: res2.add, HedgeAfter: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := u2.Append("t", 0, 0, 0, 2, b); err != nil {
		t.Fatal(err)
	}
	u2.Flush()
	waitFor(t, "the PUT in flight", func() bool { p, _ := st2.counts(); return p == 1 })
	if res2.len() != 0 {
		t.Fatal("an upload whose only PUT is stuck was reported done")
	}
	// What a produce request does meanwhile (Append, then Nudge) must not
	// wait for the stuck PUT (issue #18 item 1: acks=1 answers after the
	// append).
	appended := make(chan error, 1)
	go func() {
		b2 := batch(t, 3, 2, 0, 100)
		err := u2.Append("t", 0, 0, 3, 4, b2)
		u2.Nudge()
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("Append while a PUT is stuck: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Append or Nudge waited for a stuck PUT")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := u2.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline", err)
	}
	// The stuck object fails at Close; the one appended meanwhile had
	// a PUT of its own and is delivered after it, in order.
	if all := res2.all(); len(all) == 0 || all[0].Sequence != 0 || all[0].Err == nil || u2.Stats().Hedged != 0 {
		t.Fatalf("results %+v, hedges %d; want the stuck object first and failed, no hedge", all, u2.Stats().Hedged)
	}
}

// TestPutHedgeDelayAdaptive: without HedgeAfter the delay is 100 ms
// before the first PUT, then three times the recent average, at least
// MinPutHedgeDelay.
func TestPutHedgeDelayAdaptive(t *testing.T) {
	u, err := wal.NewUploader(wal.UploaderConfig{Store: objstore.NewMem("b"), Cluster: "demo", Zone: "zone-a", BrokerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = u.Close(context.Background()) }()
	if d := wal.PutHedgeDelay(u); d != 100*time.Millisecond {
		t.Fatalf("before any PUT: %v, want 100ms", d)
	}
	wal.ObservePut(u, 20*time.Millisecond)
	if d := wal.PutHedgeDelay(u); d != 60*time.Millisecond {
		t.Fatalf("after a 20 ms PUT: %v, want 60ms", d)
	}
	for range 200 {
		wal.ObservePut(u, time.Millisecond)
	}
	if d := wal.PutHedgeDelay(u); d != wal.MinPutHedgeDelay {
		t.Fatalf("after fast PUTs: %v, want the floor %v", d, wal.MinPutHedgeDelay)
	}
}
