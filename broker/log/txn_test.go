package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

// txnWriter appends transactional batches and markers for one producer,
// keeping its sequence.
type txnWriter struct {
	t     testing.TB
	l     *Log
	pid   int64
	epoch int16
	seq   int32
}

// data appends a transactional batch of keyed records "key=value".
func (w *txnWriter) data(kvs ...kv) AppendResult {
	w.t.Helper()
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = w.pid, w.epoch, w.seq, true
	res, err := w.l.AppendAsLeader([]record.Batch{keyedBatch(w.t, spec, 1000, kvs...)}, 1)
	if err != nil {
		w.t.Fatalf("producer %d: transactional append: %v", w.pid, err)
	}
	w.seq += int32(len(kvs))
	return res
}

// end appends the producer's COMMIT or ABORT marker.
func (w *txnWriter) end(commit bool) (AppendResult, error) {
	w.t.Helper()
	return w.endAt(commit, 3)
}

// endAt appends the producer's marker with a coordinator epoch.
func (w *txnWriter) endAt(commit bool, coordinatorEpoch int32) (AppendResult, error) {
	w.t.Helper()
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	b, err := record.BuildMarker(w.pid, w.epoch, record.Marker{Type: typ, CoordinatorEpoch: coordinatorEpoch}, 1000)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.l.AppendAsLeader([]record.Batch{b}, 1)
}

func (w *txnWriter) mustEnd(commit bool) int64 {
	w.t.Helper()
	res, err := w.end(commit)
	if err != nil {
		w.t.Fatalf("producer %d: marker: %v", w.pid, err)
	}
	return res.BaseOffset
}

func plain(t testing.TB, l *Log, kvs ...kv) AppendResult {
	t.Helper()
	return mustAppend(t, l, keyedBatch(t, record.DefaultSpec(), 1000, kvs...))
}

// readCommitted is what a read_committed consumer sees from offset 0:
// records below the LSO (hwm = log end), without control batches and
// without the batches of the aborted transactions the index names, with
// Kafka's consumer algorithm (a producer's batches are dropped from an
// aborted transaction's first offset until its ABORT marker).
func readCommitted(t testing.TB, l *Log) []string {
	t.Helper()
	lso := l.LastStableOffset(l.EndOffset())
	aborted := l.AbortedTxns(l.StartOffset(), lso)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	skipping := map[int64]bool{}
	var out []string
	for next := l.StartOffset(); next < lso; {
		res, err := l.Read(next, 1<<20, lso)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(res.Records) == 0 {
			break
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			h := b.Header()
			next = h.LastOffset() + 1
			for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
				skipping[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			if h.IsControl() {
				if m, err := record.ParseMarker(b); err == nil && m.Type == record.ControlAbort {
					delete(skipping, h.ProducerID)
				}
				continue
			}
			if h.IsTransactional() && skipping[h.ProducerID] {
				continue
			}
			recs, err := record.Records(b, record.MaxDecompressedBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				out = append(out, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
		}
	}
	return out
}

func wantView(t testing.TB, l *Log, want ...string) {
	t.Helper()
	if got := readCommitted(t, l); !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %v, want %v", got, want)
	}
}

func wantLSO(t testing.TB, l *Log, hwm, want int64) {
	t.Helper()
	if got := l.LastStableOffset(hwm); got != want {
		t.Fatalf("LSO at high watermark %d is %d, want %d", hwm, got, want)
	}
}

func v(key, value string) kv { return kv{key, []byte(value)} }

// Interleaved producers: the LSO is the first offset of the oldest open
// transaction, an aborted transaction enters the index with the LSO of its
// abort, and a read_committed reader sees exactly the committed records.
func TestTxnLSOAndAbortedIndex(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	a := &txnWriter{t: t, l: l, pid: 10}
	b := &txnWriter{t: t, l: l, pid: 20}

	plain(t, l, v("p", "0"))         // 0
	wantLSO(t, l, l.EndOffset(), 1)  // nothing open: the HWM
	a.data(v("a", "1"), v("a", "2")) // 1-2
	wantLSO(t, l, l.EndOffset(), 1)  // a's transaction holds it
	b.data(v("b", "3"))              // 3
	plain(t, l, v("p", "4"))         // 4
	wantLSO(t, l, l.EndOffset(), 1)  //
	wantLSO(t, l, 1, 1)              // capped by the HWM
	wantLSO(t, l, 0, 0)              //
	abortAt := a.mustEnd(false)      // 5: a aborts
	wantLSO(t, l, l.EndOffset(), 3)  // b still open
	a.data(v("a", "6"))              // 6: a's next transaction
	b.data(v("b", "7"))              // 7
	commitAt := b.mustEnd(true)      // 8: b commits
	// A marker not yet below the HWM leaves its transaction unstable
	// (Kafka's unreplicated transactions): with the HWM at b's commit
	// marker, b's transaction (from 3) is not decided for readers yet.
	wantLSO(t, l, commitAt, 3)
	wantLSO(t, l, commitAt+1, 6) // a's second transaction
	if got := l.OngoingTxns(); got != 1 {
		t.Fatalf("ongoing transactions %d, want 1", got)
	}
	a.mustEnd(true) // 9
	end := l.EndOffset()
	wantLSO(t, l, end, end)

	want := []AbortedTxn{{ProducerID: 10, FirstOffset: 1, LastOffset: abortAt, LastStableOffset: 3}}
	if got := l.AbortedTxns(0, end); !slices.Equal(got, want) {
		t.Fatalf("aborted transactions %v, want %v", got, want)
	}
	if got := l.AbortedTxns(abortAt+1, end); len(got) != 0 {
		t.Fatalf("aborted transactions after the abort marker: %v", got)
	}
	if got := l.AbortedTxns(0, 1); len(got) != 0 {
		t.Fatalf("aborted transactions below their first offset: %v", got)
	}
	wantView(t, l, "p=0", "b=3", "p=4", "a=6", "b=7")
}

// The log refuses what Kafka's producer state refuses: a marker with an
// epoch older than the producer's (a zombie coordinator or a fenced
// producer), a non-transactional batch inside a transaction; a newer
// epoch fences the old one.
func TestTxnEpochFencing(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	w := &txnWriter{t: t, l: l, pid: 7, epoch: 2}
	w.data(v("k", "1"))
	if _, err := l.AppendAsLeader([]record.Batch{pbatch(t, 7, 2, 1, 1)}, 1); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v, want ErrInvalidTxnState", err)
	}
	stale := &txnWriter{t: t, l: l, pid: 7, epoch: 1}
	if _, err := stale.end(true); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker with an older epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	wantLSO(t, l, l.EndOffset(), 0) // still open
	// The coordinator aborts with a bumped epoch (fencing the producer).
	bumped := &txnWriter{t: t, l: l, pid: 7, epoch: 3}
	bumped.mustEnd(false)
	wantLSO(t, l, l.EndOffset(), l.EndOffset())
	w.seq = 1
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 7, 2, 1, true
	if _, err := l.AppendAsLeader([]record.Batch{keyedBatch(t, spec, 1000, v("k", "late"))}, 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced producer's batch: %v, want ErrInvalidProducerEpoch", err)
	}
	wantView(t, l)
}

// TestTxnSequenceReusedAfterItsTransactionEnded: a transactional batch
// whose sequence repeats a batch of the producer's transaction that has
// since ended (a client that took that batch for unsent, then aborted
// without bumping its epoch) is out of order, not a duplicate: answered
// "duplicate, success", the record of the next transaction would be
// missing from it when it commits (strata chaos, TestChaosShort seed 2:
// committed transaction x1-3 had 1 of its 3 records). A retry within the
// open transaction is still a duplicate.
func TestTxnSequenceReusedAfterItsTransactionEnded(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	w := &txnWriter{t: t, l: l, pid: 9, epoch: 0}
	first := w.data(v("k", "aborted"))
	spec := record.DefaultSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = 9, 0, 0, true
	if res, err := l.AppendAsLeader([]record.Batch{keyedBatch(t, spec, 1000, v("k", "aborted"))}, 1); !errors.Is(err, ErrDuplicateSequence) || res.BaseOffset != first.BaseOffset {
		t.Fatalf("retry within the open transaction: %v at %d, want a duplicate of offset %d", err, res.BaseOffset, first.BaseOffset)
	}
	w.mustEnd(false)
	// The next transaction, same epoch, the sequence of the batch the
	// client took for unsent.
	if _, err := l.AppendAsLeader([]record.Batch{keyedBatch(t, spec, 1000, v("k", "next"))}, 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a sequence of the ended transaction reused: %v, want ErrOutOfOrderSequence", err)
	}
	// The transaction goes on with the next sequence (or a new epoch).
	w.data(v("k", "next"))
	w.mustEnd(true)
	wantView(t, l, "k=next")
}

// txnHistory writes transactions across several segments: committed and
// aborted ones, interleaved, and one left open at the end. It returns the
// read_committed view.
func txnHistory(t testing.TB, l *Log) []string {
	var want []string
	a := &txnWriter{t: t, l: l, pid: 1}
	b := &txnWriter{t: t, l: l, pid: 2}
	big := string(make([]byte, 300))
	for i := 0; i < 12; i++ {
		a.data(v(fmt.Sprint("a", i), big))
		b.data(v(fmt.Sprint("b", i), big))
		plain(t, l, v(fmt.Sprint("p", i), "x"))
		a.mustEnd(i%3 != 0)
		b.mustEnd(i%2 == 0)
	}
	for i := 0; i < 12; i++ {
		if i%3 != 0 {
			want = append(want, fmt.Sprintf("a%d=%s", i, big))
		}
		if i%2 == 0 {
			want = append(want, fmt.Sprintf("b%d=%s", i, big))
		}
		want = append(want, fmt.Sprintf("p%d=x", i))
	}
	// An open transaction at the end: not visible, holds the LSO.
	a.data(v("open", "1"))
	plain(t, l, v("after", "1"))
	return want
}

// Recovery after a kill mid-transaction: the open transaction and the
// aborted index come back (from the producer snapshot and a replay of the
// tail), also when a segment's .txnindex is missing or torn.
func TestTxnRecovery(t *testing.T) {
	for _, damage := range []string{"none", "missing txnindex", "torn txnindex", "clean shutdown"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			want := txnHistory(t, l)
			lso, end := l.LastStableOffset(l.EndOffset()), l.EndOffset()
			aborted := l.AbortedTxns(0, end)
			if len(l.segs) < 3 || len(aborted) < 4 {
				t.Fatalf("history too small: %d segments, %d aborted", len(l.segs), len(aborted))
			}
			wantView(t, l, want...)
			if damage == "clean shutdown" {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := l.shutdown(false); err != nil {
				t.Fatal(err)
			}
			// The first segment with an abort marker.
			var victim string
			for _, s := range l.segs {
				if len(s.txn.entries) > 0 {
					victim = s.txn.name
					break
				}
			}
			switch damage {
			case "missing txnindex":
				if err := os.Remove(victim); err != nil {
					t.Fatal(err)
				}
			case "torn txnindex":
				st, _ := os.Stat(victim)
				if err := os.Truncate(victim, st.Size()-7); err != nil {
					t.Fatal(err)
				}
			}
			l = openLog(t, dir, testConfig())
			defer l.Close()
			if l.EndOffset() != end {
				t.Fatalf("log end %d after recovery, want %d", l.EndOffset(), end)
			}
			wantLSO(t, l, end, lso)
			if got := l.AbortedTxns(0, end); !slices.Equal(got, aborted) {
				t.Fatalf("aborted transactions after recovery:\n got %v\nwant %v", got, aborted)
			}
			wantView(t, l, want...)
			if st, err := os.Stat(victim); err != nil || st.Size()%txnIndexEntrySize != 0 || st.Size() == 0 {
				t.Fatalf("%s not rewritten: %v %v", filepath.Base(victim), st, err)
			}
			// The open transaction still ends with its marker.
			w := &txnWriter{t: t, l: l, pid: 1}
			w.mustEnd(false)
			wantLSO(t, l, l.EndOffset(), l.EndOffset())
			wantView(t, l, append(want, "after=1")...)
		})
	}
}

// Retention drops the index entries with their segments; the open
// transaction keeps holding the LSO even when its first batch is gone.
func TestTxnRetention(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	txnHistory(t, l)
	before := l.AbortedTxns(0, l.EndOffset())
	lso := l.LastStableOffset(l.EndOffset())
	cut := l.segs[2].base
	if err := l.DeleteRecordsBefore(cut); err != nil {
		t.Fatal(err)
	}
	var want []AbortedTxn
	for _, e := range before {
		if e.LastOffset >= l.segs[0].base {
			want = append(want, e)
		}
	}
	if got := l.AbortedTxns(cut, l.EndOffset()); !slices.Equal(got, want) {
		t.Fatalf("aborted transactions after retention:\n got %v\nwant %v", got, want)
	}
	wantLSO(t, l, l.EndOffset(), lso)
	// Below the open transaction's start: the LSO follows the log start.
	if err := l.DeleteRecordsBefore(lso + 1); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, l, l.EndOffset(), lso+1)
}

// A follower that appends the leader's batches builds the same state, and
// truncation (to a divergence point) brings back the transaction a removed
// marker had ended.
func TestTxnFollowerAndTruncation(t *testing.T) {
	leader := openLog(t, t.TempDir(), testConfig())
	defer leader.Close()
	txnHistory(t, leader)
	w := &txnWriter{t: t, l: leader, pid: 1}
	abortAt := w.mustEnd(false)
	follower := openLog(t, t.TempDir(), testConfig())
	defer follower.Close()
	for next := int64(0); next < leader.EndOffset(); next = follower.EndOffset() {
		res, err := leader.Read(next, 700, leader.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		bs, err := splitStored(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		cp := make([]record.Batch, len(bs))
		for i, b := range bs {
			cp[i] = append(record.Batch(nil), b...)
		}
		if _, err := follower.AppendAsFollower(cp); err != nil {
			t.Fatal(err)
		}
	}
	end := leader.EndOffset()
	if a, b := leader.AbortedTxns(0, end), follower.AbortedTxns(0, end); !slices.Equal(a, b) {
		t.Fatalf("follower index differs:\n leader %v\nfollower %v", a, b)
	}
	if a, b := leader.LastStableOffset(end), follower.LastStableOffset(end); a != b {
		t.Fatalf("LSO leader %d, follower %d", a, b)
	}
	openAt := follower.LastStableOffset(abortAt) // the open transaction's start
	if err := follower.TruncateTo(abortAt); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, follower, follower.EndOffset(), openAt)
	if got := follower.AbortedTxns(abortAt, math.MaxInt64); len(got) != 0 {
		t.Fatalf("index keeps the truncated marker: %v", got)
	}
}

// Compaction keeps markers, drops aborted records instead of letting them
// shadow an older committed value of their key, and does not clean past
// the first unstable offset: an open transaction's record is not yet a
// key's latest value (it may still abort).
func TestTxnCompaction(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig())
	defer l.Close()
	a := &txnWriter{t: t, l: l, pid: 1}
	b := &txnWriter{t: t, l: l, pid: 2}
	c := &txnWriter{t: t, l: l, pid: 3}
	big := string(make([]byte, 200))
	fill := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			plain(t, l, v(fmt.Sprint(prefix, i%4), big))
		}
	}
	a.data(v("k", "committed"))
	a.mustEnd(true)
	a.data(v("m", "committed"))
	a.mustEnd(true) // a second COMMIT marker: same control key as the first
	b.data(v("k", "aborted"), v("j", big))
	b.mustEnd(false)
	fill("x", 20)
	c.data(v("m", "pending"), v("pad", big))
	fill("y", 8)
	markers := countControl(t, l)
	if st := mustClean(t, l); !st.Cleaned {
		t.Fatal("nothing cleaned")
	}
	if got := countControl(t, l); got != markers {
		t.Fatalf("%d markers after cleaning, want %d", got, markers)
	}
	for _, want := range []string{"k=committed", "m=committed"} {
		if view := readCommitted(t, l); !slices.Contains(view, want) {
			t.Fatalf("%s lost by cleaning: %v", want, view)
		}
	}
	for _, r := range readRecords(t, l) {
		if string(r.value) == "aborted" {
			t.Fatalf("aborted record kept at %d", r.offset)
		}
	}
	// The open transaction aborts: the committed m it would have shadowed
	// is still there, and survives the next clean.
	c.mustEnd(false)
	fill("z", 20)
	mustClean(t, l)
	view := readCommitted(t, l)
	if !slices.Contains(view, "m=committed") || slices.Contains(view, "m=pending") {
		t.Fatalf("after the open transaction aborted: %v", view)
	}
	if got := countControl(t, l); got != markers+1 {
		t.Fatalf("%d markers after the second clean, want %d", got, markers+1)
	}
}

func countControl(t testing.TB, l *Log) int {
	n := 0
	for _, h := range readAll(t, l) {
		if h.IsControl() {
			n++
		}
	}
	return n
}

// Completed transactions are remembered only until the high watermark
// passes their marker, also when nobody asks for the LSO (a partition
// nobody reads): the replica layer reports each HWM move.
func TestTxnCompletedForgottenBelowHWM(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	w := &txnWriter{t: t, l: l, pid: 1}
	for i := 0; i < 100; i++ {
		w.data(v("k", fmt.Sprint(i)))
		w.mustEnd(i%2 == 0)
		l.NoteHighWatermark(l.EndOffset())
	}
	l.mu.RLock()
	n := len(l.unreplicated)
	l.mu.RUnlock()
	if n > 1 {
		t.Fatalf("%d completed transactions remembered below the high watermark", n)
	}
	wantLSO(t, l, l.EndOffset(), l.EndOffset())
}

// KIP-890 part 1's verification guard: a transactional batch verified
// with the coordinator before a marker ended the producer's transaction
// is refused when it is appended after the marker (it would open a
// transaction no marker ends, pinning the LSO), and so is a batch of a
// transaction that was open when the produce began and ended before its
// append. The coordinator's answer is remembered only while the guard is
// current.
func TestTxnVerificationGuard(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	defer l.Close()
	w := &txnWriter{t: t, l: l, pid: 9}
	txnBatch := func(seq int32, val string) []record.Batch {
		spec := record.DefaultSpec()
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = w.pid, w.epoch, seq, true
		return []record.Batch{keyedBatch(t, spec, 1000, v("k", val))}
	}

	// Verified, then the transaction ends before the append.
	g := l.StartTxnVerification(w.pid, w.epoch)
	if g == nil {
		t.Fatal("no guard for a producer without an open transaction")
	}
	if again := l.StartTxnVerification(w.pid, w.epoch); again != g {
		t.Fatal("a second request of the same transaction got another guard")
	}
	w.mustEnd(false) // the coordinator timed the transaction out
	if l.TxnVerified(g) {
		t.Fatal("a stale verification answer was remembered after the marker")
	}
	if _, err := l.AppendAsLeaderVerified(txnBatch(0, "late"), 1, g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("late batch appended after the marker: %v, want ErrInvalidTxnState", err)
	}
	wantLSO(t, l, l.EndOffset(), l.EndOffset())

	// The next transaction: a new guard, its answer remembered until the
	// first batch opens the transaction.
	g2 := l.StartTxnVerification(w.pid, w.epoch)
	if g2 == nil || g2 == g {
		t.Fatalf("guard after the marker: %p, the old one %p", g2, g)
	}
	if !l.TxnVerified(g2) || !l.IsTxnVerified(g2) {
		t.Fatal("a current guard's answer is not remembered")
	}
	if _, err := l.AppendAsLeaderVerified(txnBatch(0, "1"), 1, g2); err != nil {
		t.Fatal(err)
	}
	if l.IsTxnVerified(g2) {
		t.Fatal("the guard outlived the start of its transaction")
	}
	if g3 := l.StartTxnVerification(w.pid, w.epoch); g3 != nil {
		t.Fatal("a guard for a producer with an open transaction")
	}
	// Open when the produce began (no guard), ended before its append.
	w.mustEnd(true)
	if _, err := l.AppendAsLeaderVerified(txnBatch(1, "2"), 1, nil); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("batch of an ended transaction appended without a guard: %v, want ErrInvalidTxnState", err)
	}
	wantLSO(t, l, l.EndOffset(), l.EndOffset())
	wantView(t, l, "k=1")
}

// Window 3b of issue #25: a marker whose coordinator epoch is older than
// the one of the producer's last marker in the partition is a stale
// coordinator's late retry; at the same producer epoch (KIP-890 part 1
// does not bump it per transaction) it would end the producer's next
// transaction. It is refused (ErrCoordinatorFenced), also after a
// restart (the epoch is in the producer snapshot and in the markers a
// recovery replays), and followers take whatever their leader appended.
func TestTxnCoordinatorEpochFencing(t *testing.T) {
	for _, restart := range []string{"none", "clean", "crash"} {
		t.Run(restart, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			w := &txnWriter{t: t, l: l, pid: 5, epoch: 1}
			w.data(v("k", "1"))
			if _, err := w.endAt(true, 7); err != nil { // the new coordinator's marker
				t.Fatal(err)
			}
			w.data(v("k", "2")) // the producer's next transaction
			switch restart {
			case "clean":
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = openLog(t, dir, testConfig())
			case "crash":
				if err := l.shutdown(false); err != nil {
					t.Fatal(err)
				}
				l = openLog(t, dir, testConfig())
			}
			w.l = l
			defer l.Close()
			// The old coordinator's retry of the first transaction's marker.
			if _, err := w.endAt(true, 6); !errors.Is(err, ErrCoordinatorFenced) {
				t.Fatalf("marker of an older coordinator: %v, want ErrCoordinatorFenced", err)
			}
			if got := l.OngoingTxns(); got != 1 {
				t.Fatalf("ongoing transactions %d after the stale marker, want 1 (it must not end the next transaction)", got)
			}
			if _, err := w.endAt(false, 7); err != nil {
				t.Fatalf("marker of the current coordinator: %v", err)
			}
			wantView(t, l, "k=1")
		})
	}
}

// markerHorizons maps the offset of every control batch in the log to its
// delete horizon (-1: none).
func markerHorizons(t testing.TB, l *Log) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for _, h := range readAll(t, l) {
		if h.IsControl() {
			ms, _ := h.DeleteHorizon()
			out[h.BaseOffset] = ms
		}
	}
	return out
}

// Window 3c of issue #25: the cleaner removes a transaction's marker once
// its data is gone, in two passes as Kafka does (KIP-534): the clean that
// removes the data keeps the marker, the next one stamps it with a delete
// horizon (now + delete.retention.ms) and drops the aborted-transaction
// index entry, and a clean after the horizon drops it. A marker whose
// transaction still has data stays; a reopened log (clean or crashed)
// rebuilds the same producer state without the dropped markers.
func TestTxnCompactionRemovesMarkers(t *testing.T) {
	c := newClock()
	cfg := compactConfig()
	cfg.DeleteRetention = time.Hour
	dir := t.TempDir()
	l := openLog(t, dir, cfg, WithClock(c.now))
	defer func() { l.Close() }()
	a := &txnWriter{t: t, l: l, pid: 1}
	b := &txnWriter{t: t, l: l, pid: 2}
	big := string(make([]byte, 200))
	n := 0
	fill := func(k int) {
		for i := 0; i < k; i++ {
			plain(t, l, v(fmt.Sprint("x", n%4), big))
			n++
		}
	}
	a.data(v("k", "1"))
	commit1 := a.mustEnd(true) // k=1 is superseded by a's next transaction
	b.data(v("j", big))
	abort := b.mustEnd(false) // aborted: its data goes with the first clean
	a.data(v("k", "2"))
	commit2 := a.mustEnd(true) // k=2 is k's latest value: this marker stays
	b.data(v("j2", "x"))
	commit3 := b.mustEnd(true)
	fill(20)

	mustClean(t, l) // removes k=1 and the aborted j; the markers stay
	hz := markerHorizons(t, l)
	for _, off := range []int64{commit1, abort, commit2, commit3} {
		if h, ok := hz[off]; !ok || h != -1 {
			t.Fatalf("marker at %d after the clean that removed its data: present %v, horizon %d; want present without a horizon", off, ok, h)
		}
	}
	if got := l.AbortedTxns(0, l.EndOffset()); len(got) != 1 {
		t.Fatalf("aborted transactions %v, want b's", got)
	}
	fill(8)
	mustClean(t, l) // no data left for the first two: a delete horizon each
	horizon := c.now().UnixMilli() + time.Hour.Milliseconds()
	hz = markerHorizons(t, l)
	if hz[commit1] != horizon || hz[abort] != horizon || hz[commit2] != -1 || hz[commit3] != -1 {
		t.Fatalf("horizons %v, want %d for the markers at %d and %d only", hz, horizon, commit1, abort)
	}
	if got := l.AbortedTxns(0, l.EndOffset()); len(got) != 0 {
		t.Fatalf("aborted transactions without data still indexed: %v", got)
	}
	// The horizon is in the batch: a reopened log keeps it.
	l.Close()
	l = openLog(t, dir, cfg, WithClock(c.now))
	c.advance(59 * time.Minute)
	fill(8)
	mustClean(t, l)
	if hz := markerHorizons(t, l); len(hz) != 4 {
		t.Fatalf("markers dropped before delete.retention.ms: %v", hz)
	}
	if _, due := l.DirtyRatio(math.MaxInt64); due {
		t.Fatal("due with nothing dirty and no marker horizon passed")
	}
	c.advance(2 * time.Minute)
	// Nothing new to clean, but a kept marker's horizon passed: the log is
	// due, and a clean that is not forced drops the markers.
	if _, due := l.DirtyRatio(math.MaxInt64); !due {
		t.Fatal("not due after a kept marker's delete horizon passed")
	}
	if st, err := l.Clean(context.Background(), CleanOptions{Limit: math.MaxInt64}); err != nil || !st.Cleaned {
		t.Fatalf("clean after the delete horizon: %+v, %v", st, err)
	}
	if _, due := l.DirtyRatio(math.MaxInt64); due {
		t.Fatal("still due after the markers went")
	}
	hz = markerHorizons(t, l)
	if _, ok := hz[commit1]; ok || len(hz) != 2 {
		t.Fatalf("markers after delete.retention.ms: %v, want those at %d and %d only", hz, commit2, commit3)
	}
	if _, ok := hz[abort]; ok {
		t.Fatalf("abort marker without data kept: %v", hz)
	}
	end := l.EndOffset()
	wantLSO(t, l, end, end)
	view := readCommitted(t, l)
	if !slices.Contains(view, "k=2") || !slices.Contains(view, "j2=x") || slices.Contains(view, "k=1") {
		t.Fatalf("read_committed after the markers went: %v", view)
	}
	for _, how := range []string{"clean", "crash"} {
		if how == "clean" {
			l.Close()
		} else if err := l.shutdown(false); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, dir, cfg, WithClock(c.now))
		if got := l.OngoingTxns(); got != 0 {
			t.Fatalf("%s reopen: %d transactions open", how, got)
		}
		wantLSO(t, l, end, end)
		wantView(t, l, view...)
	}
}
