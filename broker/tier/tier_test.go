package tier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const bucket = "strata-tier"

func newStore(t *testing.T, srv *s3server.Server) *objstore.S3 {
	t.Helper()
	st, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: bucket, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		MaxAttempts: 1, AttemptTimeout: 2 * time.Second, CallTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// openLog opens a log whose segments roll every segBytes.
func openLog(t *testing.T, segBytes int64) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.IndexIntervalBytes = 256
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendN appends n batches of 3 records (timestamps ts0+i) as leader at
// epoch, returning the batches as stored.
func appendN(t *testing.T, l *log.Log, n int, epoch int32, ts0 int64) {
	t.Helper()
	for i := range n {
		recs := make([]record.Record, 3)
		for j := range recs {
			recs[j] = record.Record{TimestampDelta: int64(j), Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100)}
		}
		spec := record.DefaultSpec()
		spec.BaseTimestamp = ts0 + int64(i)*10
		b, err := record.Build(spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader([]record.Batch{b}, epoch); err != nil {
			t.Fatal(err)
		}
	}
}

// copyLog appends every batch of src to dst as follower (a replica with
// its own segment boundaries).
func copyLog(t *testing.T, src, dst *log.Log) {
	t.Helper()
	for off := dst.EndOffset(); off < src.EndOffset(); {
		r, err := src.Read(off, 1<<20, src.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		bs, _, err := record.Split(r.Records)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs { // batch by batch: the follower rolls at its own offsets
			if _, err := dst.AppendAsFollower([]record.Batch{b}); err != nil {
				t.Fatal(err)
			}
		}
		off = r.HighestOffset + 1
	}
}

// readAllRemote reads [from, end) from the tier, batch by batch as a
// consumer would, and returns the bytes.
func readAllRemote(t *testing.T, p *tier.Partition, from, end int64) []byte {
	t.Helper()
	var out []byte
	for from < end {
		data, err := p.Read(context.Background(), from, 700, end)
		if err != nil {
			t.Fatalf("remote read at %d: %v", from, err)
		}
		if len(data) == 0 {
			t.Fatalf("remote read at %d returned nothing (end %d)", from, end)
		}
		bs, _, err := record.Split(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data...)
		from = bs[len(bs)-1].LastOffset() + 1
	}
	return out
}

func localBytes(t *testing.T, l *log.Log, from, end int64) []byte {
	t.Helper()
	var out []byte
	for from < end {
		r, err := l.Read(from, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Records...)
		from = r.HighestOffset + 1
	}
	return out
}

// TestUploadReadAndFailover uploads a leader's sealed segments, reads them
// back byte for byte through the read-ahead cache, then has a new leader
// (another replica, different segment boundaries, a higher epoch) resume
// from the manifest: nothing is uploaded twice, nothing is missing, and
// the deposed leader is fenced.
func TestUploadReadAndFailover(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	newTier := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "c", ChunkBytes: 1024, CacheBytes: 8 << 10}, logr.Discard()).Partition("t", "id", 0)
	}

	leader := openLog(t, 2000)
	appendN(t, leader, 40, 0, 1_000)
	p0 := newTier()
	res, err := p0.Upload(ctx, leader, leader.EndOffset(), 0)
	if err != nil {
		t.Fatal(err)
	}
	segs := leader.Segments()
	if res.Segments != len(segs)-1 || res.Segments < 3 {
		t.Fatalf("uploaded %d segments, the log has %d sealed", res.Segments, len(segs)-1)
	}
	m, _ := p0.Manifest()
	if m.EndOffset != segs[len(segs)-1].Base || m.StartOffset != 0 {
		t.Fatalf("manifest [%d, %d), want [0, %d)", m.StartOffset, m.EndOffset, segs[len(segs)-1].Base)
	}
	// Idempotent: a second round uploads nothing.
	if res, err := p0.Upload(ctx, leader, leader.EndOffset(), 0); err != nil || res.Segments != 0 {
		t.Fatalf("second upload: %+v, %v; want nothing", res, err)
	}
	if got, want := readAllRemote(t, newTier(), 0, m.EndOffset), localBytes(t, leader, 0, m.EndOffset); !bytes.Equal(got, want) {
		t.Fatalf("remote bytes (%d) differ from the leader's log (%d)", len(got), len(want))
	}
	for _, s := range m.Segments {
		if err := p0.VerifySegment(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// Failover: a follower with other segment boundaries becomes leader at
	// epoch 1 and has more data.
	follower := openLog(t, 2500)
	copyLog(t, leader, follower)
	appendN(t, follower, 30, 1, 5_000)
	p1 := newTier()
	if _, err := p1.Upload(ctx, follower, follower.EndOffset(), 1); err != nil {
		t.Fatal(err)
	}
	m1, _ := p1.Manifest()
	fsegs := follower.Segments()
	straddles := false
	for _, s := range fsegs {
		straddles = straddles || s.Base < m.EndOffset && m.EndOffset < s.Next
	}
	if !straddles {
		t.Fatalf("test setup: no follower segment straddles the old leader's tier end %d: %+v", m.EndOffset, fsegs)
	}
	if m1.EndOffset != fsegs[len(fsegs)-1].Base || m1.LeaderEpoch != 1 {
		t.Fatalf("new leader's manifest ends at %d (epoch %d), want %d (epoch 1)", m1.EndOffset, m1.LeaderEpoch, fsegs[len(fsegs)-1].Base)
	}
	for i := 1; i < len(m1.Segments); i++ {
		if m1.Segments[i].BaseOffset != m1.Segments[i-1].LastOffset+1 {
			t.Fatalf("segments %d and %d leave a gap or overlap: %+v", i-1, i, m1.Segments)
		}
	}
	if got, want := readAllRemote(t, newTier(), 0, m1.EndOffset), localBytes(t, follower, 0, m1.EndOffset); !bytes.Equal(got, want) {
		t.Fatal("after failover the tier's bytes differ from the new leader's log")
	}
	// The deposed leader cannot write any more.
	appendN(t, leader, 20, 0, 9_000)
	if _, err := p0.Upload(ctx, leader, leader.EndOffset(), 0); !errors.Is(err, tier.ErrFenced) {
		t.Fatalf("deposed leader's upload: %v, want ErrFenced", err)
	}
	if mm, err := newTier().Load(ctx); err != nil || mm.LeaderEpoch != 1 || mm.EndOffset != m1.EndOffset {
		t.Fatalf("manifest after the deposed leader's attempt: epoch %d end %d, %v; want epoch 1 end %d", mm.LeaderEpoch, mm.EndOffset, err, m1.EndOffset)
	}
}

// TestBucketOutage: with the bucket failing, uploads fail and back off,
// remote reads fail (the broker answers a retriable error), nothing is
// recorded as uploaded; after recovery the next rounds catch up.
func TestBucketOutage(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	faulty := objstore.NewFaulty(newStore(t, srv))
	p := tier.New(faulty, tier.Config{Cluster: "c", RetryBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, logr.Discard()).Partition("t", "id", 0)
	l := openLog(t, 2000)
	appendN(t, l, 10, 0, 1_000)
	if _, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	before, _ := p.Manifest()

	faulty.SetFailAll(true)
	appendN(t, l, 20, 0, 2_000)
	res, err := p.Upload(ctx, l, l.EndOffset(), 0)
	if err == nil || res.Segments != 0 {
		t.Fatalf("upload during the outage: %+v, %v; want an error", res, err)
	}
	if res.Lag <= 0 {
		t.Fatalf("upload lag %d during the outage, want the pending bytes", res.Lag)
	}
	if p.EndOffset() != before.EndOffset {
		t.Fatalf("tier end moved to %d during the outage", p.EndOffset())
	}
	// A replica that has nothing cached cannot read: an error that is not
	// "out of range" (the broker answers KAFKA_STORAGE_ERROR, retriable).
	cold := tier.New(faulty, tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	if _, err := cold.Read(ctx, 0, 100, before.EndOffset); err == nil || errors.Is(err, tier.ErrOffsetOutOfRange) {
		t.Fatalf("remote read during the outage: %v, want a bucket error", err)
	}
	faulty.SetFailAll(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := p.Upload(ctx, l, l.EndOffset(), 0); err == nil && !res.Deferred {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("uploads did not recover: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // backoff of 1 ms
	}
	segs := l.Segments()
	if got := p.EndOffset(); got != segs[len(segs)-1].Base {
		t.Fatalf("after recovery the tier ends at %d, want %d", got, segs[len(segs)-1].Base)
	}
}

// TestRetentionAndDeleteRecords: DeleteRecords moves the tier's start and
// drops the segments below it (manifest first, then objects), retention.ms
// drops expired segments.
func TestRetentionAndDeleteRecords(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	now := time.UnixMilli(1_000_000)
	p := tier.New(st, tier.Config{Cluster: "c", Clock: func() time.Time { return now }}, logr.Discard()).Partition("t", "id", 0)
	l := openLog(t, 2000)
	appendN(t, l, 40, 0, 1_000)
	if _, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	m, _ := p.Manifest()
	cut := m.Segments[1].BaseOffset + 1
	if err := p.DeleteRecordsBefore(ctx, 0, cut); err != nil {
		t.Fatal(err)
	}
	m2, _ := p.Manifest()
	if m2.StartOffset != cut || m2.Segments[0].BaseOffset != m.Segments[1].BaseOffset {
		t.Fatalf("after DeleteRecords(%d): start %d, first segment %d", cut, m2.StartOffset, m2.Segments[0].BaseOffset)
	}
	if _, err := st.Head(ctx, p.Prefix()+m.Segments[0].Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("segment below the start still stored: %v", err)
	}
	if _, err := p.Read(ctx, cut-1, 100, m2.EndOffset); !errors.Is(err, tier.ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v, want ErrOffsetOutOfRange", err)
	}
	// Timestamps: batches were stamped 1000 + 10 i; retention 100 ms at
	// now = 1,000,000 expires all of them.
	n, err := p.ApplyRetention(ctx, 0, tier.RetentionPolicy{RetentionMs: 100 * time.Millisecond, RetentionBytes: -1})
	if err != nil || n != len(m2.Segments) {
		t.Fatalf("retention dropped %d segments (%v), want %d", n, err, len(m2.Segments))
	}
	if _, _, ok := p.Range(); ok {
		t.Fatal("tier still has a range after every segment expired")
	}
	// Timestamp lookups find nothing any more; a fresh tier finds them.
	l2 := openLog(t, 2000)
	appendN(t, l2, 40, 0, 1_000)
	p2 := tier.New(st, tier.Config{Cluster: "c"}, logr.Discard()).Partition("t2", "id", 0)
	if _, err := p2.Upload(ctx, l2, l2.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	off, ts, ok, err := p2.OffsetForTimestamp(ctx, 1_000+10*7+1)
	if err != nil || !ok || off != 7*3+1 || ts != 1_071 {
		t.Fatalf("OffsetForTimestamp = %d, %d, %v, %v; want 22, 1071", off, ts, ok, err)
	}
}

// appendTxn appends one transactional batch of 3 records of producer pid
// (epoch 0) as leader and returns its base offset.
func appendTxn(t *testing.T, l *log.Log, pid int64, seq int32, ts int64) int64 {
	t.Helper()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional, spec.BaseTimestamp = pid, 0, seq, true, ts
	recs := make([]record.Record, 3)
	for j := range recs {
		recs[j] = record.Record{Value: bytes.Repeat([]byte{'t'}, 100)}
	}
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendAsLeader([]record.Batch{b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

// endTxn appends pid's COMMIT or ABORT marker as leader and returns its
// offset.
func endTxn(t *testing.T, l *log.Log, pid int64, commit bool, ts int64) int64 {
	t.Helper()
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	b, err := record.BuildMarker(pid, 0, record.Marker{Type: typ, CoordinatorEpoch: 1}, ts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendAsLeader([]record.Batch{b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

// TestAbortedTxnsInTier: each uploaded segment carries the entries of the
// aborted transactions whose marker it holds (.txnindex); the tier's
// entries followed by the local log's from the tier's end on are exactly
// what the local log's index answers, for every range, also for a
// transaction whose data is in the tier and whose marker is not; retention
// and DeleteRecords delete the index objects with their segments and the
// answers stay consistent for what remains.
func TestAbortedTxnsInTier(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := newStore(t, srv)
	now := time.UnixMilli(1_000_000)
	newTier := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "c", ChunkBytes: 1024, CacheBytes: 8 << 10, Clock: func() time.Time { return now }}, logr.Discard()).Partition("t", "id", 0)
	}
	l := openLog(t, 2000)
	seqs := map[int64]int32{}
	data := func(pid int64, ts int64) int64 {
		off := appendTxn(t, l, pid, seqs[pid], ts)
		seqs[pid] += 3
		return off
	}
	// A (aborted) spans several segments, its marker after B's (aborted)
	// and C's (committed); D (aborted) is short; Z (aborted) has its data
	// below the upload bound and its marker above it (in the active
	// segment).
	data(1, 1_000)
	appendN(t, l, 6, 0, 1_000)
	data(2, 1_100)
	data(3, 1_100)
	data(1, 1_100)
	endTxn(t, l, 2, false, 1_200)
	appendN(t, l, 6, 0, 1_200)
	endTxn(t, l, 3, true, 1_300)
	endTxn(t, l, 1, false, 1_300)
	data(4, 1_400)
	endTxn(t, l, 4, false, 1_400)
	appendN(t, l, 6, 0, 1_500)
	zFirst := data(9, 1_600)
	appendN(t, l, 12, 0, 1_600)
	zMarker := endTxn(t, l, 9, false, 1_700)

	p := newTier()
	if _, err := p.Upload(ctx, l, l.LastStableOffset(l.EndOffset()), 0); err != nil {
		t.Fatal(err)
	}
	m, _ := p.Manifest()
	if m.EndOffset <= zFirst || m.EndOffset > zMarker {
		t.Fatalf("test setup: tier ends at %d, want Z's data (from %d) in it and its marker (%d) not", m.EndOffset, zFirst, zMarker)
	}
	withIndex := 0
	for _, s := range m.Segments {
		if s.TxnIndexSize%34 != 0 {
			t.Fatalf("segment %d: transaction index of %d bytes", s.BaseOffset, s.TxnIndexSize)
		}
		if s.TxnIndexSize > 0 {
			withIndex++
		}
	}
	if withIndex == 0 || withIndex == len(m.Segments) {
		t.Fatalf("test setup: %d of %d uploaded segments hold an ABORT marker, want some", withIndex, len(m.Segments))
	}

	// The tier's answer completed by the local log's is the local log's.
	check := func(p *tier.Partition, start int64) {
		t.Helper()
		for from := start; from < m.EndOffset; from++ {
			for upTo := from + 1; upTo <= l.EndOffset(); upTo++ {
				remote, end, done, err := p.AbortedTxns(ctx, from, upTo)
				if err != nil {
					t.Fatal(err)
				}
				if !done {
					remote = append(remote, l.AbortedTxns(max(from, end), upTo)...)
				}
				if want := l.AbortedTxns(from, upTo); fmt.Sprint(remote) != fmt.Sprint(want) {
					t.Fatalf("aborted transactions in [%d, %d): tier + local %v, local log %v", from, upTo, remote, want)
				}
			}
		}
	}
	check(newTier(), 0)
	if got := l.AbortedTxns(0, zFirst+1); len(got) == 0 || got[len(got)-1].ProducerID != 9 {
		t.Fatalf("test setup: the local log's aborted transactions overlapping Z's start are %v, want Z's last", got)
	}

	// DeleteRecords past the first segments: their objects go, the index
	// objects included; the answers stay those of the local log.
	cut := m.Segments[2].BaseOffset + 1
	if err := p.DeleteRecordsBefore(ctx, 0, cut); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Segments[:2] {
		for _, suffix := range []string{"", ".index", ".timeindex", ".txnindex", ".producers"} {
			if _, err := st.Head(ctx, p.Prefix()+s.Key+suffix); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("%s%s of a segment below the start still stored: %v", s.Key, suffix, err)
			}
		}
	}
	check(newTier(), cut)

	// Retention drops everything: no segment object is left.
	if n, err := p.ApplyRetention(ctx, 0, tier.RetentionPolicy{RetentionMs: 100 * time.Millisecond, RetentionBytes: -1}); err != nil || n == 0 {
		t.Fatalf("retention dropped %d segments: %v", n, err)
	}
	objs, err := st.List(ctx, p.Prefix()+"segments/")
	if err != nil || len(objs) != 0 {
		t.Fatalf("%d segment objects left after retention dropped every segment (%v)", len(objs), err)
	}
}

// listCounter counts the LIST requests a tier sends.
type listCounter struct {
	*objstore.S3
	lists atomic.Int64
}

func (c *listCounter) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	c.lists.Add(1)
	return c.S3.List(ctx, prefix)
}

// TestIdleUploadRoundsSendNoRequests: an upload round with nothing new to
// upload sends no request at all (it listed the partition's manifests
// for pruning on every round: with 1,200 tiered partitions that was most
// of an idle broker's CPU, and a priced LIST each); old manifest versions
// are still pruned after rounds that wrote some, and once after the
// partition is opened again.
func TestIdleUploadRoundsSendNoRequests(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	st := &listCounter{S3: newStore(t, srv)}
	newTier := func() *tier.Partition {
		return tier.New(st, tier.Config{Cluster: "c", ChunkBytes: 1024, CacheBytes: 8 << 10}, logr.Discard()).Partition("t", "id", 0)
	}
	manifests := func() int {
		objs, err := st.S3.List(ctx, newTier().Prefix()+"manifest/")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	l := openLog(t, 2000)
	appendN(t, l, 40, 0, 1_000)
	p := newTier()
	if res, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil || res.Segments < 4 {
		t.Fatalf("first round: %+v, %v; want 4 or more segments", res, err)
	}
	if n := manifests(); n != tier.DefaultKeepManifests {
		t.Fatalf("%d manifest versions after the first round, want %d", n, tier.DefaultKeepManifests)
	}
	for range 3 {
		before := st.lists.Load()
		if res, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil || res.Segments != 0 {
			t.Fatalf("idle round: %+v, %v", res, err)
		}
		if n := st.lists.Load() - before; n != 0 {
			t.Fatalf("an idle upload round sent %d LIST requests", n)
		}
	}
	appendN(t, l, 40, 0, 5_000)
	if res, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil || res.Segments == 0 {
		t.Fatalf("third round: %+v, %v", res, err)
	}
	if n := manifests(); n != tier.DefaultKeepManifests {
		t.Fatalf("%d manifest versions after more uploads, want %d", n, tier.DefaultKeepManifests)
	}
	// Versions left behind by another process (a failed prune, say) are
	// pruned by the first round of a partition opened again.
	reopened := newTier()
	if _, err := reopened.Load(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := reopened.Manifest()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.Put(ctx, reopened.Prefix()+fmt.Sprintf("manifest/%010d-%020d.json", 0, i), raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reopened.Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	if n := manifests(); n != tier.DefaultKeepManifests {
		t.Fatalf("%d manifest versions after the reopened partition's first round, want %d", n, tier.DefaultKeepManifests)
	}
}
