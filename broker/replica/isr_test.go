package replica

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/meta"
)

// hookStore is a fakeStore whose compare-and-swap can be held (before) and
// whose answer can be lost after the write committed (after).
type hookStore struct {
	fakeStore
	before func()
	after  func() error
}

func (s *hookStore) AlterPartition(ctx context.Context, tp meta.TopicPartition, expected, proposed meta.PartitionState) (meta.PartitionState, error) {
	if s.before != nil {
		s.before()
	}
	st, err := s.fakeStore.AlterPartition(ctx, tp, expected, proposed)
	if s.after != nil {
		if lost := s.after(); lost != nil {
			return meta.PartitionState{}, lost
		}
	}
	return st, err
}

func (s *hookStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// expansionSetup: leader 1 with ISR [1 2] and HWM 2; follower 3 has
// replicated offsets 0-1 and reported them, which asks for an ISR
// expansion to [1 2 3].
func expansionSetup(t *testing.T, store *hookStore, backoff time.Duration) (m *Manager, leader, f2, f3 *Partition) {
	t.Helper()
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}, PartitionEpoch: 1}
	store.state = st
	m = NewManager(Config{NodeID: 1, Store: store, LagTimeMax: time.Hour, Backoff: backoff, Log: logr.Discard()})
	t.Cleanup(m.Close)
	leader = NewPartition(tp, openLog(t), 1, nil)
	f2 = NewPartition(tp, openLog(t), 2, nil)
	f3 = NewPartition(tp, openLog(t), 3, nil)
	m.Apply(leader, meta.BecomeLeader, st)
	f2.becomeFollower(st)
	f3.becomeFollower(st)
	if _, _, err := leader.AppendAsLeader(batch(t, "a", "b")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, leader, f2)
	replicate(t, m, leader, f2)
	if h := leader.HighWatermark(); h != 2 {
		t.Fatalf("HWM %d with ISR [1 2] caught up, want 2", h)
	}
	replicate(t, m, leader, f3) // gets 0-1
	replicate(t, m, leader, f3) // reports LEO 2: caught up, the ISR expands
	return m, leader, f2, f3
}

// TestHWMCountsPendingISRAddition (issue #10 item 1): while the
// compare-and-swap that adds follower 3 to the ISR is in flight, the HWM is
// computed over the ISR plus 3 (Kafka's maximal ISR): once the write lands
// 3 is in the ISR, may be elected, and must have every offset below the
// HWM.
func TestHWMCountsPendingISRAddition(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	store := &hookStore{}
	store.before = func() {
		entered <- struct{}{}
		<-release
	}
	m, leader, f2, f3 := expansionSetup(t, store, time.Millisecond)
	<-entered // the expansion is in flight, held
	if _, _, err := leader.AppendAsLeader(batch(t, "c")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, leader, f2)
	replicate(t, m, leader, f2) // follower 2 reports LEO 3
	if h, leo3 := leader.HighWatermark(), leader.FollowerLEO(3); h > leo3 {
		close(release)
		t.Fatalf("HWM %d passed the LEO %d of follower 3 while its ISR addition was in flight", h, leo3)
	}
	close(release)
	waitFor(t, func() bool { return equal(leader.State().ISR, []int32{1, 2, 3}) })
	replicate(t, m, leader, f3)
	replicate(t, m, leader, f3)
	if h := leader.HighWatermark(); h != 3 {
		t.Fatalf("HWM %d after follower 3 caught up, want 3", h)
	}
}

// TestISRAdditionAnswerLost (issue #10 item 1): the compare-and-swap adding
// follower 3 commits but its answer is lost (an etcd timeout after the
// commit). The leader must not forget the change: the HWM keeps counting
// follower 3, and the change is asked again, which re-reads the record and
// adopts the ISR that has 3, once the retry backoff has passed. (The
// backoff is long so that the HWM is checked before the retry and checks
// asked for in between are seen not to retry early; the test then ends
// the backoff and asks.)
func TestISRAdditionAnswerLost(t *testing.T) {
	store := &hookStore{}
	lost := true
	store.after = func() error {
		if lost {
			lost = false
			return context.DeadlineExceeded
		}
		return nil
	}
	m, leader, f2, _ := expansionSetup(t, store, time.Hour)
	// Wait until the leader has the lost answer.
	waitFor(t, func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		return store.callCount() == 1 && (leader.pendingISR == nil || !leader.pendingISR.inFlight)
	})
	if got := store.isr(); !equal(got, []int32{1, 2, 3}) {
		t.Fatalf("ISR in the store %v, want the committed [1 2 3]", got)
	}
	if _, _, err := leader.AppendAsLeader(batch(t, "c")); err != nil {
		t.Fatal(err)
	}
	replicate(t, m, leader, f2)
	replicate(t, m, leader, f2) // follower 2 reports LEO 3
	if h, leo3 := leader.HighWatermark(), leader.FollowerLEO(3); h > leo3 {
		t.Fatalf("HWM %d passed the LEO %d of follower 3, which the ISR in etcd %v holds", h, leo3, store.isr())
	}
	// The fetches above asked for ISR checks: within the backoff they must
	// not ask the store again.
	m.RequestISRCheck()
	if n := store.callCount(); n != 1 {
		t.Fatalf("%d AlterPartition calls within the backoff, want only the lost one", n)
	}
	// The backoff passes.
	leader.mu.Lock()
	leader.pendingISR.retryAt = time.Time{}
	leader.mu.Unlock()
	m.RequestISRCheck()
	waitFor(t, func() bool { return equal(leader.State().ISR, []int32{1, 2, 3}) })
	if n := store.callCount(); n != 2 {
		t.Fatalf("%d AlterPartition calls, want the lost one asked again once", n)
	}
}

// TestRestartedFollowerLeavesISR (issue #10 item 7, KIP-903): an ISR
// member whose fetches carry a new broker epoch restarted and may have lost
// an unflushed tail; the leader removes it from the ISR and admits it again
// (under its new epoch) only once it caught up.
func TestRestartedFollowerLeavesISR(t *testing.T) {
	st := meta.PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}, PartitionEpoch: 1,
		ISREpochs: map[int32]int64{1: 10, 2: 20, 3: 30}}
	store := &fakeStore{state: st}
	m := NewManager(Config{NodeID: 1, Store: store, LagTimeMax: time.Hour, Backoff: time.Millisecond, Log: logr.Discard()})
	defer m.Close()
	registered := func(e3 int64) {
		m.SetBrokers(map[int32]meta.BrokerInfo{1: {ID: 1, Epoch: 10}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: e3}})
	}
	registered(30)
	leader := NewPartition(tp, openLog(t), 1, nil)
	f2 := NewPartition(tp, openLog(t), 2, nil)
	f3 := NewPartition(tp, openLog(t), 3, nil)
	m.Apply(leader, meta.BecomeLeader, st)
	f2.becomeFollower(st)
	f3.becomeFollower(st)
	fetch := func(f *Partition, brokerEpoch int64) {
		t.Helper()
		replicateAs(t, m, leader, f, brokerEpoch)
	}
	for _, v := range []string{"a", "b", "c"} {
		if _, _, err := leader.AppendAsLeader(batch(t, v)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		fetch(f2, 20)
		fetch(f3, 30)
	}
	if h := leader.HighWatermark(); h != 3 {
		t.Fatalf("HWM %d, want 3", h)
	}
	// Follower 3 restarts, having lost its tail, and registers under 31.
	if err := f3.Log.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	registered(31)
	if _, _, err := leader.AppendAsLeader(batch(t, "d")); err != nil {
		t.Fatal(err)
	}
	fetch(f3, 31) // reports LEO 1, gets 1-3
	waitFor(t, func() bool { return equal(store.isr(), []int32{1, 2}) })
	// Caught up again: back in, under its new epoch (each fetch asks for
	// the expansion once the removal is settled).
	waitFor(t, func() bool {
		fetch(f3, 31)
		return equal(store.isr(), []int32{1, 2, 3})
	})
	store.mu.Lock()
	e3 := store.state.ISREpochs[3]
	store.mu.Unlock()
	if e3 != 31 {
		t.Fatalf("follower 3 rejoined the ISR under epoch %d, want 31", e3)
	}
	// Both changes were the leader's: strata_isr_shrinks_total and
	// strata_isr_expands_total (docs/monitoring.md) count one each.
	if s, e := testutil.ToFloat64(m.isrShrinks), testutil.ToFloat64(m.isrExpands); s != 1 || e != 1 {
		t.Fatalf("ISR shrinks %v, expands %v counted; want 1 and 1", s, e)
	}
}

// TestCheckReplicaFetcher (issue #10 item 8, issue #26): replica fetches
// are served only for registered brokers with their current broker epoch
// and, when the registration has one, its fetch token; a broker registered
// without FetchEpoch or FetchToken (an older version, rolling upgrade) may
// fetch without them. Refusals are NOT_LEADER_OR_FOLLOWER and counted.
func TestCheckReplicaFetcher(t *testing.T) {
	m := NewManager(Config{NodeID: 1, Log: logr.Discard()})
	defer m.Close()
	tok2, tok5 := bytes.Repeat([]byte{0xa2}, 16), bytes.Repeat([]byte{0xa5}, 16)
	m.SetBrokers(map[int32]meta.BrokerInfo{
		2: {ID: 2, Epoch: 20, FetchEpoch: true},
		3: {ID: 3, Epoch: 30}, // an older broker
		5: {ID: 5, Epoch: 50, FetchEpoch: true, FetchToken: hex.EncodeToString(tok5)},
	})
	tests := []struct {
		replica int32
		epoch   int64
		token   []byte
		reason  string
	}{
		{2, 20, nil, ""},
		{2, -1, nil, RefusedNoEpoch},
		{2, 19, nil, RefusedStaleEpoch},
		{2, 21, nil, RefusedUnknownEpoch},
		{3, -1, nil, ""},
		{3, 30, nil, ""},
		{3, 29, nil, RefusedStaleEpoch},
		{4, -1, nil, RefusedUnregistered},
		// A broker registered with a fetch token: its epoch alone (which
		// anyone can guess) is not enough, nor another broker's token.
		{5, 50, tok5, ""},
		{5, 50, nil, RefusedBadToken},
		{5, 50, tok2, RefusedBadToken},
		{5, 50, tok5[:15], RefusedBadToken},
		{5, 49, tok5, RefusedStaleEpoch},
	}
	for _, tt := range tests {
		err := m.CheckReplicaFetcher(tt.replica, tt.epoch, tt.token)
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("replica %d epoch %d token %x refused: %v", tt.replica, tt.epoch, tt.token, err)
		case tt.reason != "" && !errors.Is(err, kerr.NotLeaderForPartition):
			t.Errorf("replica %d epoch %d token %x: %v, want NOT_LEADER_OR_FOLLOWER (%s)", tt.replica, tt.epoch, tt.token, err, tt.reason)
		case tt.reason != "" && !strings.Contains(err.Error(), tt.reason):
			t.Errorf("replica %d epoch %d token %x: %v, want reason %s", tt.replica, tt.epoch, tt.token, err, tt.reason)
		}
	}
	for _, reason := range []string{RefusedNoEpoch, RefusedStaleEpoch, RefusedUnknownEpoch, RefusedUnregistered, RefusedBadToken} {
		want := 1.0
		switch reason {
		case RefusedStaleEpoch:
			want = 3
		case RefusedBadToken:
			want = 3
		}
		if got := testutil.ToFloat64(m.refused.WithLabelValues(reason)); got != want {
			t.Errorf("refusals counted as %s: %v, want %v", reason, got, want)
		}
	}
}

// TestPeriodicHWMCheckpoint: the ISR loop writes a moved HWM to the
// partition's checkpoint every HWMCheckpointInterval (without fsync: the
// checkpoint is a lower bound, hwmCheckpointFile), so a replica opened on
// the same log afterwards starts from it; Close writes the latest one.
func TestPeriodicHWMCheckpoint(t *testing.T) {
	st := meta.PartitionState{Replicas: []int32{1}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1}, PartitionEpoch: 1}
	m := NewManager(Config{NodeID: 1, Store: &fakeStore{state: st}, LagTimeMax: time.Hour, HWMCheckpointInterval: 10 * time.Millisecond, Log: logr.Discard()})
	l := openLog(t)
	leader := NewPartition(tp, l, 1, nil)
	m.Apply(leader, meta.BecomeLeader, st)
	for _, v := range []string{"a", "b"} {
		if _, _, err := leader.AppendAsLeader(batch(t, v)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return NewPartition(tp, l, 1, nil).HighWatermark() == 2 })
	if _, _, err := leader.AppendAsLeader(batch(t, "c")); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if h := NewPartition(tp, l, 1, nil).HighWatermark(); h != 3 {
		t.Fatalf("HWM %d from the checkpoint after Close, want 3", h)
	}
}
