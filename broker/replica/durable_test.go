package replica

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
)

// gatedFS holds every fsync of its segment files, once armed, until release:
// the leader's disk is slow, or (with fail) it fails.
type gatedFS struct {
	log.OSFS
	armed   atomic.Bool
	syncing chan struct{} // closed at the first held fsync
	started atomic.Bool
	release chan struct{}
	fail    atomic.Bool
}

func newGatedFS() *gatedFS {
	return &gatedFS{syncing: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (log.File, error) {
	f, err := g.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g, segment: strings.HasSuffix(name, ".log")}, nil
}

type gatedFile struct {
	log.File
	g       *gatedFS
	segment bool // only segment fsyncs are held (not the epoch cache's)
}

func (f *gatedFile) Sync() error {
	if f.segment && f.g.armed.Load() {
		if f.g.started.CompareAndSwap(false, true) {
			close(f.g.syncing)
		}
		<-f.g.release
		if f.g.fail.Load() {
			return &os.PathError{Op: "fsync", Path: "segment", Err: syscall.EIO}
		}
	}
	return f.File.Sync()
}

// TestAcksAllWaitsForTheLeadersFsync: the leader's fsync runs beside the
// wait for the followers, yet an acks=all answer still waits for it: with
// every follower caught up (the HWM past the batch) and the leader's fsync
// held, the waiter is not answered; when the fsync fails, it is answered
// with KAFKA_STORAGE_ERROR, never success.
func TestAcksAllWaitsForTheLeadersFsync(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "slow-disk", true: "failed-fsync"}[fail]
		t.Run(name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			st := meta.PartitionState{Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}, PartitionEpoch: 5}
			m := NewManager(Config{NodeID: 1, Store: &fakeStore{state: st}, LagTimeMax: time.Hour, Log: logr.Discard(), Now: clk.now})
			defer m.Close()
			g := newGatedFS()
			cfg := log.DefaultConfig()
			cfg.FlushInterval = -1
			ll, err := log.Open(t.TempDir(), cfg, log.WithFS(g))
			if err != nil {
				t.Fatal(err)
			}
			leader := NewPartition(tp, ll, 1, clk.now)
			f2 := NewPartition(tp, openLog(t), 2, clk.now)
			m.Apply(leader, meta.BecomeLeader, st)
			f2.becomeFollower(st)

			g.armed.Store(true)
			res, epoch, err := leader.AppendAsLeader(batch(t, "a", "b"))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- leader.WaitHighWatermark(context.Background(), res.LastOffset+1, epoch, 2) }()
			<-g.syncing // the leader's fsync has started and is held
			replicate(t, m, leader, f2)
			replicate(t, m, leader, f2)
			if h := leader.HighWatermark(); h != res.LastOffset+1 {
				t.Fatalf("HWM %d after the follower caught up, want %d", h, res.LastOffset+1)
			}
			select {
			case err := <-done:
				t.Fatalf("acks=all answered (%v) while the leader's fsync is still running", err)
			case <-time.After(200 * time.Millisecond):
			}
			g.fail.Store(fail)
			close(g.release)
			err = <-done
			switch {
			case fail && !errors.Is(err, kerr.KafkaStorageError):
				t.Fatalf("acks=all after the leader's fsync failed: %v, want KAFKA_STORAGE_ERROR", err)
			case !fail && err != nil:
				t.Fatalf("acks=all after the fsync: %v", err)
			}
			g.armed.Store(false)
			_ = ll.Close()
		})
	}
}
