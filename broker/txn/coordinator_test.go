package txn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeMarkers records written markers and every attempt; while blocked,
// attempts fail; while fenced, partitions answer
// TRANSACTION_COORDINATOR_FENCED.
type fakeMarkers struct {
	mu       sync.Mutex
	blocked  bool
	fenced   bool
	written  []Marker
	attempts []Marker
	tries    int
}

func (f *fakeMarkers) WriteMarkers(_ context.Context, m Marker) (Marker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	f.attempts = append(f.attempts, m)
	if f.fenced {
		return m, ErrCoordinatorFenced
	}
	if f.blocked {
		return m, errors.New("leader unreachable")
	}
	f.written = append(f.written, m)
	return Marker{}, nil
}

func (f *fakeMarkers) setBlocked(b bool) {
	f.mu.Lock()
	f.blocked = b
	f.mu.Unlock()
}

func (f *fakeMarkers) all() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.written)
}

func (f *fakeMarkers) tried() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.attempts)
}

type harness struct {
	c       *Coordinator
	clock   *fakeClock
	markers *fakeMarkers
	store   Store
}

var pidSeq struct {
	sync.Mutex
	n int64
}

func nextPID() (int64, error) {
	pidSeq.Lock()
	defer pidSeq.Unlock()
	pidSeq.n++
	return 1000 + pidSeq.n, nil
}

func newHarness(t *testing.T, store Store, mod ...func(*Config)) *harness {
	t.Helper()
	h := &harness{clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, markers: &fakeMarkers{}, store: store}
	cfg := Config{Store: store, Markers: h.markers, ProducerIDs: nextPID, Clock: h.clock, MarkerRetryBackoff: time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	h.c = c
	return h
}

var ctx = context.Background()

func wantErr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// waitState polls until id's record is in state st (markers are written
// by a goroutine).
func (h *harness) waitState(t *testing.T, id string, st State) Metadata {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		md, err := h.c.Describe(ctx, id)
		if err == nil && md.State == st {
			stored, serr := h.store.Get(ctx, id)
			if serr != nil {
				t.Fatal(serr)
			}
			if stored.Metadata.State != st {
				t.Fatalf("%s cached in %v but stored in %v", id, st, stored.Metadata.State)
			}
			return md
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %v (err %v), want %v", id, md.State, err, st)
		}
		time.Sleep(time.Millisecond) // poll pace
	}
}

func tps(ss ...string) []TopicPartition {
	var out []TopicPartition
	for i, s := range ss {
		out = append(out, TopicPartition{Topic: s, Partition: int32(i)})
	}
	return out
}

func TestCommitAndAbort(t *testing.T) {
	h := newHarness(t, NewMemoryStore())
	pid, epoch, err := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init", err, nil)
	if epoch != 0 {
		t.Fatalf("first epoch %d, want 0", epoch)
	}
	wantErr(t, "end without transaction", h.c.EndTxn(ctx, "app", pid, epoch, true, false), kerr.InvalidTxnState)
	wantErr(t, "add", h.c.AddPartitions(ctx, "app", pid, epoch, tps("a", "b"), false), nil)
	wantErr(t, "add offsets", h.c.AddOffsets(ctx, "app", pid, epoch, "g1", false), nil)
	md, _ := h.c.Describe(ctx, "app")
	if md.State != Ongoing || len(md.Partitions) != 2 || !slices.Equal(md.Groups, []string{"g1"}) || md.StartMillis != h.clock.Now().UnixMilli() {
		t.Fatalf("after adds: %+v", md)
	}
	res, err := h.c.Verify(ctx, "app", pid, epoch, []TopicPartition{{"a", 0}, {"c", 9}})
	wantErr(t, "verify", err, nil)
	if res[TopicPartition{"a", 0}] != nil || res[TopicPartition{"c", 9}] != kerr.InvalidTxnState {
		t.Fatalf("verify: %v", res)
	}
	wantErr(t, "commit", h.c.EndTxn(ctx, "app", pid, epoch, true, false), nil)
	h.waitState(t, "app", CompleteCommit)
	ms := h.markers.all()
	if len(ms) != 1 || !ms[0].Commit || len(ms[0].Partitions) != 2 || !slices.Equal(ms[0].Groups, []string{"g1"}) || ms[0].ProducerEpoch != epoch {
		t.Fatalf("markers %+v", ms)
	}
	// Retries of a finished EndTxn: the same outcome succeeds, the other
	// is refused.
	wantErr(t, "commit retry", h.c.EndTxn(ctx, "app", pid, epoch, true, false), nil)
	wantErr(t, "abort after commit", h.c.EndTxn(ctx, "app", pid, epoch, false, false), kerr.InvalidTxnState)
	// Verification after the end: the late produce is refused.
	res, _ = h.c.Verify(ctx, "app", pid, epoch, []TopicPartition{{"a", 0}})
	if res[TopicPartition{"a", 0}] != kerr.InvalidTxnState {
		t.Fatalf("verify after commit: %v", res)
	}

	// Next transaction, aborted, while markers cannot be written: the
	// producer is told to retry until they are.
	wantErr(t, "add 2", h.c.AddPartitions(ctx, "app", pid, epoch, tps("a"), false), nil)
	h.markers.setBlocked(true)
	wantErr(t, "abort", h.c.EndTxn(ctx, "app", pid, epoch, false, false), nil)
	wantErr(t, "add while aborting", h.c.AddPartitions(ctx, "app", pid, epoch, tps("a"), false), kerr.ConcurrentTransactions)
	wantErr(t, "abort retry while aborting", h.c.EndTxn(ctx, "app", pid, epoch, false, false), kerr.ConcurrentTransactions)
	wantErr(t, "commit while aborting", h.c.EndTxn(ctx, "app", pid, epoch, true, false), kerr.InvalidTxnState)
	h.markers.setBlocked(false)
	h.waitState(t, "app", CompleteAbort)
	if ms := h.markers.all(); len(ms) != 2 || ms[1].Commit {
		t.Fatalf("markers %+v", ms)
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t, NewMemoryStore())
	pid, e0, _ := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	pid1, e1, err := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "second init", err, nil)
	if pid1 != pid || e1 != e0+1 {
		t.Fatalf("second init: pid %d epoch %d, want %d %d", pid1, e1, pid, e0+1)
	}
	// The zombie (older epoch) is fenced, with the code its version knows.
	wantErr(t, "zombie add", h.c.AddPartitions(ctx, "app", pid, e0, tps("a"), false), kerr.ProducerFenced)
	wantErr(t, "zombie add v1", h.c.AddPartitions(ctx, "app", pid, e0, tps("a"), true), kerr.InvalidProducerEpoch)
	wantErr(t, "zombie end", h.c.EndTxn(ctx, "app", pid, e0, true, false), kerr.ProducerFenced)
	wantErr(t, "unknown producer", h.c.AddPartitions(ctx, "app", pid+1, e1, tps("a"), false), kerr.InvalidProducerIDMapping)
	wantErr(t, "unknown id", h.c.AddPartitions(ctx, "nope", pid, e1, tps("a"), false), kerr.InvalidProducerIDMapping)

	// InitProducerId while a transaction is ongoing aborts it first, with
	// the epoch bumped; the retry gets the next epoch.
	wantErr(t, "add", h.c.AddPartitions(ctx, "app", pid, e1, tps("a"), false), nil)
	_, _, err = h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init while ongoing", err, kerr.ConcurrentTransactions)
	md := h.waitState(t, "app", CompleteAbort)
	if md.ProducerEpoch != e1+1 {
		t.Fatalf("epoch after the abort %d, want %d", md.ProducerEpoch, e1+1)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != e1+1 {
		t.Fatalf("abort markers %+v", ms)
	}
	_, e3, err := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init retry", err, nil)
	if e3 != e1+2 {
		t.Fatalf("epoch %d, want %d", e3, e1+2)
	}

	// KIP-360: the current producer presenting its ID and epoch is bumped;
	// an unknown pair is fenced; a retried call (the previous epoch) gets
	// the same answer.
	_, e4, err := h.c.InitProducerID(ctx, "app", 60_000, pid, e3, false)
	wantErr(t, "kip-360 bump", err, nil)
	if e4 != e3+1 {
		t.Fatalf("kip-360 epoch %d, want %d", e4, e3+1)
	}
	_, again, err := h.c.InitProducerID(ctx, "app", 60_000, pid, e3, false)
	wantErr(t, "kip-360 retry", err, nil)
	if again != e4 {
		t.Fatalf("retried InitProducerId got epoch %d, want %d", again, e4)
	}
	_, _, err = h.c.InitProducerID(ctx, "app", 60_000, pid, e0, false)
	wantErr(t, "kip-360 stale epoch", err, kerr.ProducerFenced)
	_, _, err = h.c.InitProducerID(ctx, "app", 60_000, pid, e0, true)
	wantErr(t, "kip-360 stale epoch v3", err, kerr.InvalidProducerEpoch)
}

func TestEpochExhaustionAllocatesNewProducerID(t *testing.T) {
	store := NewMemoryStore()
	h := newHarness(t, store)
	pid, _, _ := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	st, _ := store.Get(ctx, "app")
	md := st.Metadata
	md.ProducerEpoch = 32766
	if _, err := store.Put(ctx, md, st.Revision); err != nil {
		t.Fatal(err)
	}
	h.c.mu.Lock()
	h.c.entries["app"].epoch = ^uint64(0) // make it read the store again
	h.c.mu.Unlock()
	pid2, e, err := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init", err, nil)
	if pid2 == pid || e != 0 {
		t.Fatalf("after epoch 32766: pid %d epoch %d, want a new producer ID with epoch 0", pid2, e)
	}
}

func TestTimeouts(t *testing.T) {
	h := newHarness(t, NewMemoryStore(), func(c *Config) { c.MaxTimeout = time.Minute; c.IDExpiration = time.Hour })
	for _, ms := range []int32{0, -5, 60_001} {
		_, _, err := h.c.InitProducerID(ctx, "app", ms, -1, -1, false)
		wantErr(t, "timeout", err, kerr.InvalidTransactionTimeout)
	}
	pid, epoch, _ := h.c.InitProducerID(ctx, "app", 10_000, -1, -1, false)
	wantErr(t, "add", h.c.AddPartitions(ctx, "app", pid, epoch, tps("a"), false), nil)
	h.clock.Advance(10 * time.Second)
	if n := h.c.AbortTimedOut(ctx); n != 0 {
		t.Fatalf("aborted %d transactions at exactly their timeout", n)
	}
	h.clock.Advance(time.Millisecond)
	if n := h.c.AbortTimedOut(ctx); n != 1 {
		t.Fatalf("aborted %d timed-out transactions, want 1", n)
	}
	md := h.waitState(t, "app", CompleteAbort)
	if md.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch after timeout %d, want %d (the producer is fenced)", md.ProducerEpoch, epoch+1)
	}
	wantErr(t, "commit after timeout", h.c.EndTxn(ctx, "app", pid, epoch, true, false), kerr.ProducerFenced)

	// An idle ID expires after transactional.id.expiration.ms.
	h.clock.Advance(59 * time.Minute)
	if n := h.c.ExpireIdle(ctx); n != 0 {
		t.Fatalf("expired %d before the expiration", n)
	}
	h.clock.Advance(2 * time.Minute)
	if n := h.c.ExpireIdle(ctx); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if _, err := h.c.Describe(ctx, "app"); err != kerr.TransactionalIDNotFound {
		t.Fatalf("describe after expiry: %v", err)
	}
	if st, _ := h.store.Get(ctx, "app"); st.Revision != 0 {
		t.Fatalf("expired ID still stored: %+v", st)
	}
}

// A coordinator that dies after persisting PrepareCommit, before the
// markers: the broker taking the ID over writes them and completes.
func TestFailoverMidCommit(t *testing.T) {
	store := NewMemoryStore()
	var ownerMu sync.Mutex
	owner, epoch := "a", uint64(1)
	ownedBy := func(name string) func(*Config) {
		return func(c *Config) {
			c.Owns = func(string) bool { ownerMu.Lock(); defer ownerMu.Unlock(); return owner == name }
			c.OwnershipEpoch = func() uint64 { ownerMu.Lock(); defer ownerMu.Unlock(); return epoch }
		}
	}
	a := newHarness(t, store, ownedBy("a"))
	b := newHarness(t, store, ownedBy("a"+"b"))
	pid, pe, _ := a.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "add", a.c.AddPartitions(ctx, "app", pid, pe, tps("a", "b", "c"), false), nil)
	a.markers.setBlocked(true)
	wantErr(t, "commit", a.c.EndTxn(ctx, "app", pid, pe, true, false), nil)
	a.c.Close() // dies mid-commit

	_, err := b.c.Describe(ctx, "app")
	wantErr(t, "describe at a non-coordinator", err, kerr.NotCoordinator)
	ownerMu.Lock()
	owner, epoch = "ab", 2
	ownerMu.Unlock()
	if err := b.c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitState(t, "app", CompleteCommit)
	ms := b.markers.all()
	if len(ms) != 1 || !ms[0].Commit || len(ms[0].Partitions) != 3 || ms[0].ProducerID != pid {
		t.Fatalf("markers written by the new coordinator: %+v", ms)
	}
	// The producer's retried EndTxn succeeds at the new coordinator.
	wantErr(t, "commit retry", b.c.EndTxn(ctx, "app", pid, pe, true, false), nil)
	// Window 3b of issue #25: the new coordinator's markers carry a
	// coordinator epoch above the dead one's, so that a partition refuses
	// the old one's late marker after the producer's next transaction
	// began (same producer epoch), and the epoch is stored.
	old := a.markers.tried()
	if len(old) == 0 {
		t.Fatal("the first coordinator attempted no marker")
	}
	if ms[0].CoordinatorEpoch <= old[0].CoordinatorEpoch {
		t.Fatalf("coordinator epoch of the takeover's markers %d, of the dead coordinator's %d: want it higher", ms[0].CoordinatorEpoch, old[0].CoordinatorEpoch)
	}
	if st, _ := store.Get(ctx, "app"); st.Metadata.CoordinatorEpoch != ms[0].CoordinatorEpoch {
		t.Fatalf("stored coordinator epoch %d, markers carried %d", st.Metadata.CoordinatorEpoch, ms[0].CoordinatorEpoch)
	}
	// The next transaction at the new coordinator: same epoch, no bump.
	wantErr(t, "add 2", b.c.AddPartitions(ctx, "app", pid, pe, tps("a"), false), nil)
	wantErr(t, "commit 2", b.c.EndTxn(ctx, "app", pid, pe, true, false), nil)
	b.waitState(t, "app", CompleteCommit)
	if ms := b.markers.all(); len(ms) != 2 || ms[1].CoordinatorEpoch != ms[0].CoordinatorEpoch {
		t.Fatalf("markers of the new coordinator's second transaction: %+v", ms)
	}
}

// A coordinator whose markers a partition refuses with
// TRANSACTION_COORDINATOR_FENCED (a newer coordinator wrote there) stops
// writing them and leaves the transaction to the newer one.
func TestFencedCoordinatorStopsMarkers(t *testing.T) {
	h := newHarness(t, NewMemoryStore())
	pid, pe, _ := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "add", h.c.AddPartitions(ctx, "app", pid, pe, tps("a"), false), nil)
	h.markers.mu.Lock()
	h.markers.fenced = true
	h.markers.mu.Unlock()
	wantErr(t, "commit", h.c.EndTxn(ctx, "app", pid, pe, true, false), nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.c.mu.Lock()
		e := h.c.entries["app"]
		h.c.mu.Unlock()
		e.mu.Lock()
		done := !e.completing
		e.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fenced coordinator still writes markers")
		}
		time.Sleep(time.Millisecond) // poll pace
	}
	if n := len(h.markers.tried()); n != 1 {
		t.Fatalf("%d marker attempts after TRANSACTION_COORDINATOR_FENCED, want 1", n)
	}
	if st, _ := h.store.Get(ctx, "app"); st.Metadata.State != PrepareCommit {
		t.Fatalf("stored state %v: the fenced coordinator must not complete the transaction", st.Metadata.State)
	}
}

// Two brokers that both believe they coordinate an ID (their views
// differ): the one with a stale cache reads the record before answering
// (refreshLocked), so the fenced epoch is refused as PRODUCER_FENCED, as
// the record says, and the current epoch is served; a write from a
// stale record still loses the compare-and-swap (NOT_COORDINATOR).
func TestStaleCoordinatorLosesCAS(t *testing.T) {
	store := NewMemoryStore()
	a := newHarness(t, store)
	b := newHarness(t, store)
	pid, e, _ := a.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	_, _ = b.c.Describe(ctx, "app") // b caches epoch e
	_, e2, _ := a.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "stale add", b.c.AddPartitions(ctx, "app", pid, e, tps("a"), false), kerr.ProducerFenced)
	wantErr(t, "add with the current epoch", b.c.AddPartitions(ctx, "app", pid, e2, tps("a"), false), nil)
}

// Two brokers that both believe they coordinate an ID: b initialised the
// producer (its cache holds the Empty record), a added a partition to
// the transaction. A KIP-890 verification asked of b must see the
// partition in the transaction, not b's cached record (a produce was
// refused INVALID_TXN_STATE by it in TestTieredTxnLeaderFailover and
// TestExactlyOnceAcrossBrokerKill under load).
func TestStaleCoordinatorVerifiesFromStore(t *testing.T) {
	store := NewMemoryStore()
	a := newHarness(t, store)
	b := newHarness(t, store)
	pid, e, kerr0 := b.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init", kerr0, nil)
	wantErr(t, "add at the other coordinator", a.c.AddPartitions(ctx, "app", pid, e, tps("out"), false), nil)
	res, verr := b.c.Verify(ctx, "app", pid, e, tps("out"))
	wantErr(t, "verify", verr, nil)
	if got := res[tps("out")[0]]; got != nil {
		t.Fatalf("verify at the coordinator with the older record: %v, want the partition in the ongoing transaction", got)
	}
	res, verr = b.c.Verify(ctx, "app", pid, e, tps("x", "other"))
	wantErr(t, "verify", verr, nil)
	if got := res[tps("x", "other")[1]]; got != kerr.InvalidTxnState {
		t.Fatalf("verify of a partition not in the transaction: %v, want INVALID_TXN_STATE", got)
	}
}

func TestLoadInProgress(t *testing.T) {
	c, err := New(ctx, Config{Markers: &fakeMarkers{}, ProducerIDs: nextPID})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, kerrr := c.InitProducerID(ctx, "app", 1000, -1, -1, false)
	wantErr(t, "before load", kerrr, kerr.CoordinatorLoadInProgress)
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	md := Metadata{TransactionalID: "a/b", ProducerID: 7, ProducerEpoch: 3, LastProducerEpoch: 2, TimeoutMillis: 100, State: PrepareCommit,
		Partitions: tps("x", "y"), Groups: []string{"g"}, StartMillis: 5, UpdateMillis: 6}
	rev, err := s.Put(ctx, md, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, md, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	other := Metadata{TransactionalID: "other", State: Empty, ProducerEpoch: 0, LastProducerEpoch: -1, StartMillis: -1}
	orev, err := s.Put(ctx, other, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "other", orev+5); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete with a wrong revision: %v", err)
	}
	if err := s.Delete(ctx, "other", orev); err != nil {
		t.Fatal(err)
	}
	// A crash during a write leaves a temp file; it is ignored.
	if err := os.WriteFile(filepath.Join(dir, fileStoreName+".tmp"), []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision <= rev {
		t.Fatalf("revision after reopen %d, want above %d (revisions never repeat)", got.Revision, rev)
	}
	if got.Metadata.State != PrepareCommit || !slices.Equal(got.Metadata.Partitions, md.Partitions) || !slices.Equal(got.Metadata.Groups, md.Groups) ||
		got.Metadata.ProducerEpoch != 3 || got.Metadata.LastProducerEpoch != 2 || got.Metadata.StartMillis != 5 {
		t.Fatalf("round trip: %+v", got.Metadata)
	}
	if all, _ := s2.List(ctx); len(all) != 1 {
		t.Fatalf("list after reopen: %+v", all)
	}
	// A damaged document is an error, not an empty state.
	if err := os.WriteFile(filepath.Join(dir, fileStoreName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStore(dir); err == nil {
		t.Fatal("OpenFileStore accepted a corrupt state file")
	}
}

// A restarted standalone broker finishes what its previous run prepared.
func TestRestartCompletesPrepared(t *testing.T) {
	dir := t.TempDir()
	fs, _ := OpenFileStore(dir)
	h := newHarness(t, fs)
	pid, e, _ := h.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "add", h.c.AddPartitions(ctx, "app", pid, e, tps("a"), false), nil)
	h.markers.setBlocked(true)
	wantErr(t, "abort", h.c.EndTxn(ctx, "app", pid, e, false, false), nil)
	h.c.Close()

	fs2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, fs2)
	h2.waitState(t, "app", CompleteAbort)
	if ms := h2.markers.all(); len(ms) != 1 || ms[0].Commit {
		t.Fatalf("markers after restart %+v", ms)
	}
}

// TestStaleCoordinatorEndTxn: while two brokers both place an ID on
// themselves, coordinator b still caches the previous transaction's
// CompleteAbort when the client's next transaction was begun at a. The
// client's abort of that transaction, sent to b, must abort it (markers
// for its partition), not be answered as a retry of the finished abort
// with no markers (strata chaos seed 3: the records of an aborted
// transaction were read as committed).
func TestStaleCoordinatorEndTxn(t *testing.T) {
	store := NewMemoryStore()
	a := newHarness(t, store)
	b := newHarness(t, store)
	pid, e, kerr0 := b.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init", kerr0, nil)
	wantErr(t, "add", b.c.AddPartitions(ctx, "app", pid, e, tps("first"), false), nil)
	wantErr(t, "abort the first transaction", b.c.EndTxn(ctx, "app", pid, e, false, false), nil)
	b.waitState(t, "app", CompleteAbort)

	wantErr(t, "add at the other coordinator", a.c.AddPartitions(ctx, "app", pid, e, tps("second"), false), nil)
	wantErr(t, "abort the second transaction at b", b.c.EndTxn(ctx, "app", pid, e, false, false), nil)
	b.waitState(t, "app", CompleteAbort)
	var aborted bool
	for _, m := range b.markers.all() {
		if !m.Commit && slices.Equal(m.Partitions, tps("second")) {
			aborted = true
		}
	}
	if !aborted {
		t.Fatalf("markers written by b: %+v; want an abort marker for the second transaction's partition", b.markers.all())
	}

	// A commit sent to a coordinator whose cache is one transaction
	// behind is not refused as INVALID_TXN_STATE either.
	wantErr(t, "add at a", a.c.AddPartitions(ctx, "app", pid, e, tps("third"), false), nil)
	wantErr(t, "commit the third at b", b.c.EndTxn(ctx, "app", pid, e, true, false), nil)
	b.waitState(t, "app", CompleteCommit)
}

// staleList is a Store whose List, while stale is set, returns it: a
// list read before later writes (a takeover's read that requests
// overtake).
type staleList struct {
	Store
	mu    sync.Mutex
	stale []Stored
}

func (s *staleList) List(ctx context.Context) ([]Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale != nil {
		return s.stale, nil
	}
	return s.Store.List(ctx)
}

// A takeover that read a transaction in PrepareAbort completes it only if
// that is still the record: between the read and the completion, the
// abort finished elsewhere and the producer began its next transaction
// here. Completing the record the cache held by then wrote ABORT markers
// for the new, ongoing transaction and stored CompleteAbort over it (chaos
// seed 41: that transaction ended committed on two partitions and aborted
// on the third). A list older than the cache also does not replace it.
func TestTakeoverOfAReadThatRequestsOvertook(t *testing.T) {
	store := NewMemoryStore()
	lister := &staleList{Store: store}
	b := newHarness(t, lister) // loaded before the transaction exists
	a := newHarness(t, store)
	pid, pe, kerr0 := a.c.InitProducerID(ctx, "app", 60_000, -1, -1, false)
	wantErr(t, "init", kerr0, nil)
	wantErr(t, "add", a.c.AddPartitions(ctx, "app", pid, pe, tps("a", "b", "c"), false), nil)
	a.markers.setBlocked(true)
	wantErr(t, "abort", a.c.EndTxn(ctx, "app", pid, pe, false, false), nil)
	stale, err := store.List(ctx)
	if err != nil || len(stale) != 1 || stale[0].Metadata.State != PrepareAbort {
		t.Fatalf("list during the abort: %+v %v", stale, err)
	}
	a.markers.setBlocked(false)
	a.waitState(t, "app", CompleteAbort)

	lister.mu.Lock()
	lister.stale = stale
	lister.mu.Unlock()
	toComplete, err := b.c.loadRecords(ctx)
	if err != nil || len(toComplete) != 1 {
		t.Fatalf("b's load of the stale list: %d to complete, %v", len(toComplete), err)
	}
	// The producer's next transaction, at b, before b completes what it
	// read.
	wantErr(t, "add of the next transaction", b.c.AddPartitions(ctx, "app", pid, pe, tps("a"), false), nil)
	b.c.takeOver(toComplete)
	wantErr(t, "commit of the next transaction", b.c.EndTxn(ctx, "app", pid, pe, true, false), nil)
	b.waitState(t, "app", CompleteCommit)
	if ms := b.markers.tried(); len(ms) != 1 || !ms[0].Commit || len(ms[0].Partitions) != 1 {
		t.Fatalf("markers b wrote: %+v, want the next transaction's COMMIT on its one partition only", ms)
	}

	// Load again from the stale list: the cached, newer record stays.
	if _, err := b.c.loadRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if md, _ := b.c.Describe(ctx, "app"); md.State != CompleteCommit {
		t.Fatalf("cached state after loading an older list: %v, want CompleteCommit", md.State)
	}
}
