package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

const testBucket = "wal-zone-a"

func s3Store(t testing.TB, srv *s3server.Server) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: testBucket, Region: srv.Region, Zone: "zone-a", Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials:    &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		MaxBackoff:     10 * time.Millisecond,
		AttemptTimeout: 5 * time.Second, CallTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// results collects OnUpload calls.
type results struct {
	mu   sync.Mutex
	list []wal.UploadResult
}

func (r *results) add(res wal.UploadResult) { r.mu.Lock(); r.list = append(r.list, res); r.mu.Unlock() }
func (r *results) len() int                 { r.mu.Lock(); defer r.mu.Unlock(); return len(r.list) }
func (r *results) all() []wal.UploadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wal.UploadResult(nil), r.list...)
}

type appended struct {
	topic     string
	partition int32
	base      int64
	data      []byte
}

// checkUploaded verifies the delivered results: sequences in order, every
// partition's pointers contiguous in offset order, and the objects in the
// store decode back to exactly the appended batches.
func checkUploaded(t *testing.T, store objstore.Store, res []wal.UploadResult, appends []appended) {
	t.Helper()
	want := map[string][]byte{}
	for _, a := range appends {
		k := fmt.Sprintf("%s-%d", a.topic, a.partition)
		want[k] = append(want[k], a.data...)
	}
	got := map[string][]byte{}
	next := map[string]int64{}
	for i, r := range res {
		if i > 0 && r.Sequence != res[i-1].Sequence+1 {
			t.Fatalf("result %d has sequence %d after %d", i, r.Sequence, res[i-1].Sequence)
		}
		if r.Err != nil {
			t.Fatalf("upload %s: %v", r.Key, r.Err)
		}
		obj, err := store.Get(context.Background(), r.Key, 0, -1)
		if err != nil {
			t.Fatalf("get %s: %v", r.Key, err)
		}
		dec, err := wal.Decode(obj)
		if err != nil {
			t.Fatalf("decode %s: %v", r.Key, err)
		}
		if dec.Header.Sequence != r.Sequence || len(dec.Chunks) != len(r.Pointers) {
			t.Fatalf("object %s: header %+v, %d chunks; result has %d pointers", r.Key, dec.Header, len(dec.Chunks), len(r.Pointers))
		}
		for j, p := range r.Pointers {
			c := dec.Chunks[j]
			if c.Err != nil || p != wal.PointerTo(testBucket, r.Key, c.ChunkInfo) {
				t.Fatalf("object %s chunk %d: %v; pointer %v", r.Key, j, c.Err, p)
			}
			k := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
			if n, ok := next[k]; ok && p.BaseOffset != n {
				t.Fatalf("%s: pointer %v does not follow offset %d", k, p, n-1)
			}
			next[k] = p.LastOffset + 1
			if _, err := wal.SplitBatches(c.ChunkInfo, c.Data); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			got[k] = append(got[k], c.Data...)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d partitions uploaded, want %d", len(got), len(want))
	}
	for k := range want {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("%s: uploaded %d bytes differ from the %d appended", k, len(got[k]), len(want[k]))
		}
	}
}

func TestUploaderSizeAndTimeCut(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := s3Store(t, srv)
	clock := newManualClock()
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: store, Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 9,
		MaxObjectBytes: 8 << 10, UploadInterval: 10 * time.Millisecond, MaxInFlight: 3,
		Clock: clock, OnUpload: res.add,
		ReplicaSetKey: func(topic string, p int32) string { return fmt.Sprint(p % 3) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(context.Background())

	// 40 partitions × 6 batches of ~200 bytes ≈ 48 KiB: size cuts only.
	var appends []appended
	offsets := map[int32]int64{}
	appendRound := func(rounds int) {
		for r := 0; r < rounds; r++ {
			for p := int32(0); p < 40; p++ {
				b := batch(t, offsets[p], 3, 2, 40)
				if err := u.Append("events", p, 2, offsets[p], offsets[p]+2, b); err != nil {
					t.Fatalf("Append: %v", err)
				}
				appends = append(appends, appended{"events", p, offsets[p], b})
				offsets[p] += 3
			}
		}
	}
	appendRound(6)
	// The cut rule: a batch that would overflow the pending object starts
	// the next one; reaching the limit cuts at once.
	sizeCuts, pending := 0, 0
	for _, a := range appends {
		if pending > 0 && pending+len(a.data) > 8<<10 {
			sizeCuts, pending = sizeCuts+1, 0
		}
		if pending += len(a.data); pending >= 8<<10 {
			sizeCuts, pending = sizeCuts+1, 0
		}
	}
	if sizeCuts < 3 || pending == 0 {
		t.Fatalf("test data gives %d size cuts and %d bytes left over", sizeCuts, pending)
	}
	waitFor(t, "size-cut uploads", func() bool { return res.len() == sizeCuts })
	// The remainder is pending until the interval passes.
	if got := u.Stats().BufferedBytes; got != pending {
		t.Fatalf("%d bytes buffered after the size cuts, want %d", got, pending)
	}
	before := res.len()
	clock.Advance(9 * time.Millisecond)
	if u.Stats().BufferedBytes == 0 {
		t.Fatal("cut before the interval passed")
	}
	clock.Advance(time.Millisecond)
	waitFor(t, "time-cut upload", func() bool { return res.len() == before+1 && u.Stats().BufferedBytes == 0 })
	if clock.Pending() != 0 {
		t.Fatalf("%d timers armed with nothing pending", clock.Pending())
	}

	// A partition's batches keep going into the next object.
	appendRound(1)
	if err := u.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := u.Append("events", 0, 2, offsets[0], offsets[0], batch(t, offsets[0], 1, 2, 1)); !errors.Is(err, wal.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	all := res.all()
	checkUploaded(t, store, all, appends)
	for _, r := range all[:sizeCuts] {
		if r.Bytes < 7<<10 {
			t.Fatalf("size-cut object %s has %d bytes, far below the 8 KiB cut", r.Key, r.Bytes)
		}
	}
	// Chunks of one object are grouped by replica-set key.
	for _, r := range all {
		last := ""
		for _, p := range r.Pointers {
			k := fmt.Sprint(p.Partition % 3)
			if k < last {
				t.Fatalf("object %s: chunks not grouped by replica set: %v", r.Key, r.Pointers)
			}
			last = k
		}
	}
	if st := u.Stats(); st.Objects != uint64(len(all)) || st.Failed != 0 || st.Degraded {
		t.Fatalf("stats = %+v", st)
	}
}

// reorderingStore makes even-numbered puts slower than odd ones, so that
// pipelined uploads finish out of order, and records peak concurrency.
type reorderingStore struct {
	objstore.Store
	n, active, peak atomic.Int32
}

func (s *reorderingStore) Put(ctx context.Context, key string, data []byte) error {
	a := s.active.Add(1)
	defer s.active.Add(-1)
	for {
		p := s.peak.Load()
		if a <= p || s.peak.CompareAndSwap(p, a) {
			break
		}
	}
	if s.n.Add(1)%2 == 1 {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Put(ctx, key, data)
}

func TestUploaderPipelinedOrder(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	store := &reorderingStore{Store: s3Store(t, srv)}
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: store, Cluster: "demo", Zone: "zone-a", BrokerID: 2, Incarnation: 1,
		MaxObjectBytes: 2 << 10, UploadInterval: time.Hour, MaxInFlight: 4, OnUpload: res.add,
		HedgeAfter: -1, // twins come on top of MaxInFlight (TestUploaderHedgesStuckPut)
	})
	if err != nil {
		t.Fatal(err)
	}
	var appends []appended
	offsets := map[int32]int64{}
	for i := 0; i < 400; i++ {
		p := int32(i % 7)
		b := batch(t, offsets[p], 2, 0, 30)
		if err := u.Append("t", p, 0, offsets[p], offsets[p]+1, b); err != nil {
			t.Fatalf("Append: %v", err)
		}
		appends = append(appends, appended{"t", p, offsets[p], b})
		offsets[p] += 2
	}
	if err := u.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkUploaded(t, store, res.all(), appends)
	if store.peak.Load() < 2 {
		t.Fatalf("peak concurrent PUTs = %d, want pipelining", store.peak.Load())
	}
	if store.peak.Load() > 4 {
		t.Fatalf("peak concurrent PUTs = %d, above MaxInFlight 4", store.peak.Load())
	}
}

// breakerUploader is an uploader for the breaker tests: a faulty store
// over the S3 server, a manual clock, FailureThreshold 2, RetryAfter 1 s,
// objects of at most 1 KiB; closed when the test ends.
func breakerUploader(t *testing.T) (*wal.Uploader, *objstore.Faulty, *manualClock, *results) {
	t.Helper()
	srv := s3server.Start(t, testBucket)
	faulty := objstore.NewFaulty(s3Store(t, srv))
	clock := newManualClock()
	res := &results{}
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: faulty, Cluster: "demo", Zone: "zone-a", BrokerID: 3,
		MaxObjectBytes: 1 << 10, UploadInterval: time.Millisecond, FailureThreshold: 2, RetryAfter: time.Second,
		Clock: clock, OnUpload: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(context.Background()) })
	return u, faulty, clock, res
}

// TestUploaderIdleProbe: a degraded uploader that gets no data probes its
// bucket itself, so an idle broker whose bucket came back does not stay
// degraded (strata_wal_degraded, the operator's zone WAL state) until the
// next produce. Without the probe the last check times out.
func TestUploaderIdleProbe(t *testing.T) {
	u, faulty, clock, res := breakerUploader(t)
	faulty.SetFailAll(true)
	for i := range int64(2) {
		if err := u.Append("t", 0, 0, i, i, batch(t, i, 1, 0, 2000)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	waitFor(t, "two failed uploads", func() bool { return res.len() == 2 })
	if !u.Degraded() {
		t.Fatal("not degraded after FailureThreshold failures")
	}
	// The bucket is still down: the probe fails and the uploader stays
	// degraded.
	clock.Advance(time.Second)
	waitFor(t, "a failed idle probe", func() bool { return u.Stats().IdleProbes == 1 })
	if !u.Degraded() {
		t.Fatal("not degraded after a failed idle probe")
	}
	// The bucket is back; no data comes, the next probe finds it.
	faulty.SetFailAll(false)
	heads := faulty.Calls(objstore.OpHead)
	clock.Advance(time.Second)
	waitFor(t, "the uploader taking data again with no data to probe with", func() bool { return !u.Degraded() })
	if got := faulty.Calls(objstore.OpHead); got != heads+1 {
		t.Fatalf("%d HEADs for the second probe, want 1", got-heads)
	}
	if err := u.Append("t", 0, 0, 2, 2, batch(t, 2, 1, 0, 2000)); err != nil {
		t.Fatalf("Append after the probe: %v", err)
	}
	waitFor(t, "the upload after the probe", func() bool { return res.len() == 3 })
	if r := res.all()[2]; r.Err != nil {
		t.Fatalf("upload after the probe: %v", r.Err)
	}
	// Healthy: no more probes.
	clock.Advance(5 * time.Second)
	if st := u.Stats(); st.IdleProbes != 2 || st.Degraded {
		t.Fatalf("stats %+v, want 2 idle probes and not degraded", st)
	}
}

func TestUploaderDegraded(t *testing.T) {
	u, faulty, clock, res := breakerUploader(t)
	off := int64(0)
	appendOne := func() error {
		b := batch(t, off, 1, 0, 2000) // over MaxObjectBytes: one object per append
		err := u.Append("t", 0, 0, off, off, b)
		if err == nil {
			off++
		}
		return err
	}

	faulty.SetFailAll(true)
	for i := 0; i < 2; i++ {
		if err := appendOne(); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	waitFor(t, "two failed uploads", func() bool { return res.len() == 2 })
	for _, r := range res.all() {
		if !errors.Is(r.Err, objstore.ErrInjected) || len(r.Pointers) != 1 {
			t.Fatalf("result %+v, want the injected error and the failed range", r)
		}
	}
	if !u.Degraded() {
		t.Fatal("not degraded after FailureThreshold failures")
	}
	if err := appendOne(); !errors.Is(err, wal.ErrDegraded) {
		t.Fatalf("Append while degraded = %v, want ErrDegraded", err)
	}
	// After RetryAfter one probe goes through; it fails: degraded again.
	clock.Advance(time.Second)
	if err := appendOne(); err != nil {
		t.Fatalf("probe Append: %v", err)
	}
	waitFor(t, "failed probe", func() bool { return res.len() == 3 })
	if err := appendOne(); !errors.Is(err, wal.ErrDegraded) {
		t.Fatalf("Append after a failed probe = %v, want ErrDegraded", err)
	}
	// The bucket recovers: the next probe succeeds and the uploader heals.
	faulty.SetFailAll(false)
	clock.Advance(time.Second)
	if err := appendOne(); err != nil {
		t.Fatalf("probe Append: %v", err)
	}
	waitFor(t, "successful probe", func() bool { return res.len() == 4 })
	if u.Degraded() {
		t.Fatal("still degraded after a successful upload")
	}
	if err := appendOne(); err != nil {
		t.Fatalf("Append after recovery: %v", err)
	}
	st := u.Stats()
	if st.Failed != 3 || st.Objects != 1 || st.RejectedDegraded != 2 {
		t.Fatalf("stats = %+v, want 3 failed, 1 uploaded, 2 rejected", st)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(wal.NewUploaderCollector(u))
	want := `
# HELP strata_wal_appends_rejected_total Batches the uploader refused, by reason (buffer_full, degraded).
# TYPE strata_wal_appends_rejected_total counter
strata_wal_appends_rejected_total{reason="buffer_full"} 0
strata_wal_appends_rejected_total{reason="degraded"} 2
# HELP strata_wal_uploads_failed_total WAL object uploads that failed (their ranges are replicated inline).
# TYPE strata_wal_uploads_failed_total counter
strata_wal_uploads_failed_total 3
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "strata_wal_appends_rejected_total", "strata_wal_uploads_failed_total"); err != nil {
		t.Fatal(err)
	}
}

// TestUploaderBufferFull: with the store hanging, appends fill the bounded
// buffer and then fail fast; Close with a deadline cancels the hung PUTs.
func TestUploaderBufferFull(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	faulty := objstore.NewFaulty(s3Store(t, srv))
	faulty.SetPutLatency(time.Hour)
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: faulty, Cluster: "demo", Zone: "zone-a", BrokerID: 4,
		MaxObjectBytes: 1 << 10, MaxInFlight: 2, MaxBufferedBytes: 16 << 10, OnUpload: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		off := int64(0)
		for i := 0; i < 1000; i++ {
			err := u.Append("t", 0, 0, off, off, batch(t, off, 1, 0, 900))
			if errors.Is(err, wal.ErrBufferFull) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			off++
		}
		done <- errors.New("1000 appends never filled the buffer")
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Append blocked while the store hangs")
	}
	waitFor(t, "two uploads in flight", func() bool { return u.Stats().InFlight == 2 })
	st := u.Stats()
	if st.InFlight != 2 || st.BufferedBytes > 16<<10 || st.RejectedFull != 1 {
		t.Fatalf("stats = %+v, want 2 in flight, at most 16 KiB buffered, 1 rejected", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := u.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline", err)
	}
	all := res.all()
	if len(all) == 0 {
		t.Fatal("no results after Close")
	}
	for _, r := range all {
		if r.Err == nil {
			t.Fatalf("upload %s succeeded against a hanging store", r.Key)
		}
	}
}
