package replica

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openLog(t *testing.T) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.FlushInterval = -1
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func batch(t *testing.T, values ...string) []record.Batch {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v), TimestampDelta: int64(i)}
	}
	spec := record.DefaultSpec()
	spec.BaseTimestamp = time.Now().UnixMilli()
	b, err := record.Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return []record.Batch{b}
}

var tp = meta.TopicPartition{Topic: "t", Partition: 0}

// replicate runs one replica fetch of follower from leader in memory: the
// leader side as the Fetch handler does it, the follower side as the
// fetcher does it.
func replicate(t *testing.T, m *Manager, leader, follower *Partition) {
	t.Helper()
	replicateAs(t, m, leader, follower, -1)
}

// replicateAs is replicate with the follower's broker epoch (-1: none).
func replicateAs(t *testing.T, m *Manager, leader, follower *Partition, brokerEpoch int64) {
	t.Helper()
	_, epoch, ok := follower.fetchPosition()
	if !ok {
		t.Fatalf("follower %d is not fetching", follower.self)
	}
	offset, last := follower.Log.EndOffset(), follower.Log.LatestEpoch()
	div, err := m.ServeReplicaFetch(leader, follower.self, brokerEpoch, offset, last, epoch)
	res := FetchResult{Err: err, HighWatermark: leader.HighWatermark(), LogStart: leader.Log.StartOffset()}
	if div != nil {
		// Through the wire, as the Fetch handler writes DivergingEpoch
		// and the fetcher reads it.
		res.Diverging = divergenceFromWire(div.Epoch, div.EndOffset)
	}
	if err == nil && div == nil {
		rr, err := leader.Log.Read(offset, 1<<20, leader.Log.EndOffset())
		if err != nil && !errors.Is(err, log.ErrOffsetOutOfRange) {
			t.Fatal(err)
		}
		res.Records = rr.Records
	}
	if _, err := follower.applyFetch(leader.self, epoch, res, time.Millisecond); err != nil {
		t.Fatalf("apply fetch: %v", err)
	}
}

type fakeStore struct {
	mu    sync.Mutex
	state meta.PartitionState
	calls int
}

func (s *fakeStore) AlterPartition(_ context.Context, _ meta.TopicPartition, expected, proposed meta.PartitionState) (meta.PartitionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if expected.PartitionEpoch != s.state.PartitionEpoch || expected.LeaderEpoch != s.state.LeaderEpoch {
		return s.state, meta.ErrStaleState
	}
	s.state = proposed.Clone()
	s.state.PartitionEpoch++
	return s.state, nil
}

func (s *fakeStore) isr() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.ISR
}

func TestHighWatermarkAndISR(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2, 3}, PartitionEpoch: 5}
	store := &fakeStore{state: st}
	m := NewManager(Config{NodeID: 1, Store: store, LagTimeMax: time.Hour, Log: logr.Discard(), Now: clk.now})
	defer m.Close()
	leader := NewPartition(tp, openLog(t), 1, clk.now)
	f2 := NewPartition(tp, openLog(t), 2, clk.now)
	f3 := NewPartition(tp, openLog(t), 3, clk.now)
	m.Apply(leader, meta.BecomeLeader, st)
	f2.becomeFollower(st)
	f3.becomeFollower(st)

	if _, _, err := f2.AppendAsLeader(batch(t, "x")); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append on a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	res, epoch, err := leader.AppendAsLeader(batch(t, "a", "b", "c"))
	if err != nil || epoch != 3 {
		t.Fatalf("append: %v epoch %d", err, epoch)
	}
	if h := leader.HighWatermark(); h != 0 {
		t.Fatalf("HWM %d before any follower fetched, want 0", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	err = leader.WaitHighWatermark(ctx, res.LastOffset+1, epoch, 2)
	cancel()
	if !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("wait without replication: %v, want REQUEST_TIMED_OUT", err)
	}
	replicate(t, m, leader, f2) // f2 gets the data
	replicate(t, m, leader, f2) // f2 reports its LEO
	if h := leader.HighWatermark(); h != 0 {
		t.Fatalf("HWM %d with follower 3 unknown, want 0", h)
	}
	replicate(t, m, leader, f3)
	replicate(t, m, leader, f3)
	if h := leader.HighWatermark(); h != 3 {
		t.Fatalf("HWM %d after both followers caught up, want 3", h)
	}
	if err := leader.WaitHighWatermark(context.Background(), 3, epoch, 2); err != nil {
		t.Fatalf("wait: %v", err)
	}
	replicate(t, m, leader, f2) // propagates the HWM
	if h := f2.HighWatermark(); h != 3 {
		t.Fatalf("follower HWM %d, want 3", h)
	}
	if !bytes.Equal(readAll(t, leader.Log), readAll(t, f2.Log)) {
		t.Fatal("follower log differs from the leader's")
	}

	// Follower 3 stops fetching: after the lag time it leaves the ISR and
	// the HWM moves with follower 2 alone.
	if _, _, err := leader.AppendAsLeader(batch(t, "d")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, leader, f2)
	clk.add(2 * time.Hour)
	replicate(t, m, leader, f2)
	if _, proposed, ok := leader.proposeISR(time.Hour, func(int32) (int64, bool) { return 0, true }); !ok || !equal(proposed.ISR, []int32{1, 2}) {
		t.Fatalf("proposed ISR %v (ok %v), want [1 2]", proposed.ISR, ok)
	}
	leader.isrDone(false, 0)
	m.RequestISRCheck()
	waitFor(t, func() bool { return equal(leader.State().ISR, []int32{1, 2}) })
	if h := leader.HighWatermark(); h != 4 {
		t.Fatalf("HWM %d after the shrink, want 4", h)
	}
	if err := leader.CheckMinISR(3); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("CheckMinISR(3) with ISR of 2: %v", err)
	}

	// Follower 3 comes back and catches up: the ISR expands.
	replicate(t, m, leader, f3)
	replicate(t, m, leader, f3)
	waitFor(t, func() bool {
		return equal(store.isr(), []int32{1, 2, 3}) && equal(leader.State().ISR, []int32{1, 2, 3})
	})

	// Leadership moves: a parked acks=all waiter is told.
	if _, _, err := leader.AppendAsLeader(batch(t, "e")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- leader.WaitHighWatermark(context.Background(), 100, epoch, 1) }()
	next := leader.State()
	next.Leader, next.LeaderEpoch = 2, 4
	m.Apply(leader, meta.BecomeFollower, next)
	if err := <-done; !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("waiter after losing leadership: %v", err)
	}
	if err := leader.CheckLeaderEpoch(3); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	if err := leader.CheckLeaderEpoch(5); !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Fatalf("newer epoch: %v", err)
	}
}

// TestDivergenceTruncation: a deposed leader with an unreplicated tail
// truncates it to the divergence point the new leader reports, then
// replicates the new leader's records, ending byte-identical.
func TestDivergenceTruncation(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	m := NewManager(Config{NodeID: 2, LagTimeMax: time.Hour, Log: logr.Discard(), Now: clk.now})
	defer m.Close()
	oldLeader := NewPartition(tp, openLog(t), 1, clk.now)
	newLeader := NewPartition(tp, openLog(t), 2, clk.now)
	st := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}}
	oldLeader.becomeLeader(st)
	newLeader.becomeFollower(st)
	// Both have epoch 0 offsets 0-2.
	for range 3 {
		if _, _, err := oldLeader.AppendAsLeader(batch(t, "common")); err != nil {
			t.Fatal(err)
		}
	}
	replicate(t, m, oldLeader, newLeader)
	// The old leader appends two more at epoch 0 that nobody gets.
	for range 2 {
		if _, _, err := oldLeader.AppendAsLeader(batch(t, "lost")); err != nil {
			t.Fatal(err)
		}
	}
	// Failover: 2 leads at epoch 1 and appends.
	st2 := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}
	m.Apply(newLeader, meta.BecomeLeader, st2)
	oldLeader.becomeFollower(st2)
	for range 4 {
		if _, _, err := newLeader.AppendAsLeader(batch(t, "new")); err != nil {
			t.Fatal(err)
		}
	}
	if d := newLeader.CheckDivergence(oldLeader.Log.EndOffset(), oldLeader.Log.LatestEpoch()); d == nil || d.Epoch != 0 || d.EndOffset != 3 {
		t.Fatalf("divergence = %+v, want epoch 0 end 3", d)
	}
	for range 4 {
		replicate(t, m, newLeader, oldLeader)
	}
	if got, want := oldLeader.Log.EndOffset(), newLeader.Log.EndOffset(); got != want {
		t.Fatalf("old leader LEO %d, want %d", got, want)
	}
	if !bytes.Equal(readAll(t, newLeader.Log), readAll(t, oldLeader.Log)) {
		t.Fatal("logs differ after truncation and catch-up")
	}
	if e := oldLeader.Log.Epochs(); len(e) != 2 || e[1].Epoch != 1 || e[1].StartOffset != 3 {
		t.Fatalf("old leader epochs %+v, want [0@0 1@3]", e)
	}
}

// TestDivergenceNewerThanLeaderEpochs: a follower that led an epoch the
// new leader never saw (its tail appended then, acknowledged to nobody)
// meets a leader elected after it that has appended nothing in its own
// epoch (below min.insync.replicas no produce is taken). The follower
// must truncate its tail and catch up; the divergence must survive the
// wire, where (-1, -1) means none (strata chaos seed 41: both followers
// fetched past the leader's log end for minutes, the ISR stayed
// [leader]).
func TestDivergenceNewerThanLeaderEpochs(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	m := NewManager(Config{NodeID: 3, LagTimeMax: time.Hour, Log: logr.Discard(), Now: clk.now})
	defer m.Close()
	p3 := NewPartition(tp, openLog(t), 3, clk.now)
	p2 := NewPartition(tp, openLog(t), 2, clk.now)
	st := meta.PartitionState{Replicas: []int32{2, 3}, Leader: 3, LeaderEpoch: 13, ISR: []int32{2, 3}}
	p3.becomeLeader(st)
	p2.becomeFollower(st)
	for range 3 {
		if _, _, err := p3.AppendAsLeader(batch(t, "committed")); err != nil {
			t.Fatal(err)
		}
	}
	replicate(t, m, p3, p2)
	// 2 leads epoch 14 and appends a tail nobody gets.
	st14 := meta.PartitionState{Replicas: []int32{2, 3}, Leader: 2, LeaderEpoch: 14, ISR: []int32{2}}
	p2.becomeLeader(st14)
	p3.becomeFollower(st14)
	for range 2 {
		if _, _, err := p2.AppendAsLeader(batch(t, "tail")); err != nil {
			t.Fatal(err)
		}
	}
	// 3, the last ISR member of a later epoch, leads epoch 20 and appends
	// nothing.
	st20 := meta.PartitionState{Replicas: []int32{2, 3}, Leader: 3, LeaderEpoch: 20, ISR: []int32{3}}
	m.Apply(p3, meta.BecomeLeader, st20)
	p2.becomeFollower(st20)
	replicate(t, m, p3, p2)
	if got, want := p2.Log.EndOffset(), p3.Log.EndOffset(); got != want {
		t.Fatalf("follower log end %d after the leader's answer, want the leader's %d (its epoch-14 tail truncated)", got, want)
	}
	if d := p3.CheckDivergence(p2.Log.EndOffset(), p2.Log.LatestEpoch()); d != nil {
		t.Fatalf("the truncated follower still diverges: %+v", d)
	}
	if _, _, err := p3.AppendAsLeader(batch(t, "new")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, p3, p2)
	if !bytes.Equal(readAll(t, p3.Log), readAll(t, p2.Log)) {
		t.Fatal("logs differ after truncation and catch-up")
	}
}

func TestTruncationPoint(t *testing.T) {
	// Follower log: epoch 0 at 0-2, epoch 2 at 3-5.
	p := NewPartition(tp, openLog(t), 2, nil)
	for i, e := range []int32{0, 0, 0, 2, 2, 2} {
		b := batch(t, "v")
		record.SetBaseOffset(b[0], int64(i))
		record.SetPartitionLeaderEpoch(b[0], e)
		if _, err := p.Log.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	p.hwm.Store(2)
	tests := []struct {
		name string
		d    Divergence
		want int64
	}{
		{"same epoch, leader ends earlier", Divergence{Epoch: 2, EndOffset: 4}, 4},
		{"same epoch, leader ends later", Divergence{Epoch: 2, EndOffset: 9}, 6},
		{"older epoch known here", Divergence{Epoch: 0, EndOffset: 3}, 3},
		{"leader epoch unknown here (1): our end of epoch 0", Divergence{Epoch: 1, EndOffset: 5}, 3},
		{"undefined: truncate to the HWM", Divergence{Epoch: -1, EndOffset: -1}, 2},
		{"the leader's log has no epoch: its end", Divergence{Epoch: -1, EndOffset: 4}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.truncationPoint(tt.d); got != tt.want {
				t.Errorf("truncationPoint(%+v) = %d, want %d", tt.d, got, tt.want)
			}
		})
	}
}

func readAll(t *testing.T, l *log.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		rr, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr.Records...)
		off = rr.HighestOffset + 1
	}
	return out
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHWMCheckpoint(t *testing.T) {
	l := openLog(t)
	p := NewPartition(tp, l, 1, nil)
	st := meta.PartitionState{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}
	p.becomeLeader(st)
	for range 3 {
		if _, _, err := p.AppendAsLeader(batch(t, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if h := p.HighWatermark(); h != 3 {
		t.Fatalf("HWM %d with an ISR of one, want 3", h)
	}
	if fresh := NewPartition(tp, l, 1, nil); fresh.HighWatermark() != 0 {
		t.Fatalf("HWM %d before any checkpoint, want the log start 0", fresh.HighWatermark())
	}
	if err := p.CheckpointHWM(); err != nil {
		t.Fatal(err)
	}
	if fresh := NewPartition(tp, l, 1, nil); fresh.HighWatermark() != 3 {
		t.Fatalf("HWM %d after the checkpoint, want 3", fresh.HighWatermark())
	}
	// A checkpoint beyond the log (the tail was lost) is bounded by it.
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if fresh := NewPartition(tp, l, 1, nil); fresh.HighWatermark() != 2 {
		t.Fatalf("HWM %d after truncation to 2, want 2", fresh.HighWatermark())
	}
}

// TestHWMCheckpointFile: the checkpoint is written in place with a CRC;
// a file of the earlier format (the HWM alone) is read, one torn or
// corrupted by a crash is not (the replica starts from its log start),
// and a write over either leaves a valid checkpoint.
func TestHWMCheckpointFile(t *testing.T) {
	l := openLog(t)
	p := NewPartition(tp, l, 1, nil)
	p.becomeLeader(meta.PartitionState{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})
	for range 5 {
		if _, _, err := p.AppendAsLeader(batch(t, "x")); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(l.Dir(), hwmCheckpointFile)
	startsAt := func(want int64, why string) {
		t.Helper()
		if h := NewPartition(tp, l, 1, nil).HighWatermark(); h != want {
			t.Fatalf("%s: a reopened replica starts at HWM %d, want %d", why, h, want)
		}
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("4\n")
	startsAt(4, "the earlier format")
	if err := p.CheckpointHWM(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if len(raw) != hwmDigits+10 {
		t.Fatalf("checkpoint %q: want %d digits, a space, 8 hex digits and a newline", raw, hwmDigits)
	}
	startsAt(5, "written in place over the earlier format")

	good := string(formatHWMCheckpoint(3))
	for _, c := range []struct{ name, content string }{
		{"torn: new digits, old CRC", good[:hwmDigits-1] + "4" + good[hwmDigits:]},
		{"torn: cut short", good[:hwmDigits+4]},
		{"zeros", strings.Repeat("\x00", len(good))},
		{"not a number", "x" + good[1:]},
	} {
		write(c.content)
		startsAt(0, c.name)
	}
	write(good + "garbage after the line\n")
	startsAt(3, "a valid first line")

	p.checkpointed.Store(-1) // force the write
	if err := p.CheckpointHWM(); err != nil {
		t.Fatal(err)
	}
	startsAt(5, "rewritten")
	if v, err := parseHWMCheckpoint(formatHWMCheckpoint(1 << 62)); err != nil || v != 1<<62 {
		t.Fatalf("round trip of 1<<62: %d, %v", v, err)
	}
}

// TestAcksAllAfterAppend: when the ISR shrinks below min.insync.replicas
// while an acks=all append waits, the HWM reaches it (the ISR is the
// leader alone) but the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
func TestAcksAllAfterAppend(t *testing.T) {
	p := NewPartition(tp, openLog(t), 1, nil)
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 2, 3}, PartitionEpoch: 1}
	p.becomeLeader(st)
	if err := p.CheckMinISR(2); err != nil {
		t.Fatal(err)
	}
	res, epoch, err := p.AppendAsLeader(batch(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.WaitHighWatermark(context.Background(), res.LastOffset+1, epoch, 2) }()
	shrunk := st.Clone()
	shrunk.ISR, shrunk.PartitionEpoch = []int32{1}, 2
	if !p.adopt(shrunk) {
		t.Fatal("newer partition epoch not adopted")
	}
	if err := <-done; !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
		t.Fatalf("wait: %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", err)
	}
	if p.adopt(st) {
		t.Fatal("an older partition epoch was adopted")
	}
}

// TestFollowerHWMNeverFalls: a follower takes its leader's high watermark
// only when it is higher than its own (Kafka's maybeUpdateHighWatermark).
// A new leader learns the old leader's high watermark late; a follower
// that copied it served its consumers (KIP-392) a high watermark that
// fell by seconds of writes (found by `strata chaos`, seed 4, WAL).
func TestFollowerHWMNeverFalls(t *testing.T) {
	f := NewPartition(tp, openLog(t), 2, nil)
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}}
	f.becomeFollower(st)
	leaderLog := openLog(t)
	if _, err := leaderLog.AppendAsLeader(batch(t, values(10, "v")...), 1); err != nil {
		t.Fatal(err)
	}
	rr, err := leaderLog.Read(0, 1<<20, leaderLog.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.applyFetch(1, 1, FetchResult{Records: rr.Records, HighWatermark: 10}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if h := f.HighWatermark(); h != 10 {
		t.Fatalf("HWM %d after the leader's 10", h)
	}
	// A new leader (epoch 2) that has not learned the old HWM yet.
	st.Leader, st.LeaderEpoch = 3, 2
	f.becomeFollower(st)
	if _, err := f.applyFetch(3, 2, FetchResult{HighWatermark: 4}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if h := f.HighWatermark(); h != 10 {
		t.Fatalf("HWM fell to %d when the new leader answered with 4; want it kept at 10", h)
	}
	if _, err := f.applyFetch(3, 2, FetchResult{HighWatermark: 10}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if h := f.HighWatermark(); h != 10 {
		t.Fatalf("HWM %d, want 10", h)
	}
}

// TestEmptiedLogLeads: a replica whose log was emptied to start at the
// leader's log start (TruncateFullyAndStartAt: it fell behind a leader
// whose older segments were deleted, e.g. tiered) holds no epoch at all.
// Elected leader, it must still let a follower at the same end, whose last
// epoch it never saw, fetch on: without an epoch of its own it answered
// every such fetch with a divergence at its end under no epoch, which the
// follower's truncation (to that same end) never resolved, and the
// partition never got its ISR back (strata chaos seed 42, session 25).
func TestEmptiedLogLeads(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	m := NewManager(Config{NodeID: 2, LagTimeMax: time.Hour, Log: logr.Discard(), Now: clk.now})
	defer m.Close()
	oldLeader := NewPartition(tp, openLog(t), 1, clk.now)
	emptied := NewPartition(tp, openLog(t), 2, clk.now)
	st := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}}
	oldLeader.becomeLeader(st)
	emptied.becomeFollower(st)
	for range 5 {
		if _, _, err := oldLeader.AppendAsLeader(batch(t, "v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptied.Log.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	if e := emptied.Log.LatestEpoch(); e != -1 {
		t.Fatalf("setup: emptied log's latest epoch %d, want none", e)
	}

	st2 := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 1}}
	m.Apply(emptied, meta.BecomeLeader, st2)
	oldLeader.becomeFollower(st2)
	if d := emptied.CheckDivergence(oldLeader.Log.EndOffset(), oldLeader.Log.LatestEpoch()); d != nil {
		t.Fatalf("the emptied leader sees a follower at its own end (epoch %d) as diverged: %+v", oldLeader.Log.LatestEpoch(), *d)
	}
	if _, _, err := emptied.AppendAsLeader(batch(t, "after")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, emptied, oldLeader)
	if got := oldLeader.Log.EndOffset(); got != 6 {
		t.Fatalf("follower log end %d after a fetch, want 6 (it caught up)", got)
	}
	// The follower's older epoch ends where the leader's own starts.
	if e, end := emptied.Log.EndOffsetForEpoch(3); e != 3 || end != 5 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d, want 3, 5", e, end)
	}
}
