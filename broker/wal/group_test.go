package wal_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// timedStore makes every Put take d on the manual clock.
type timedStore struct {
	objstore.Store
	clock *manualClock
	d     time.Duration

	mu                sync.Mutex
	started, released int
}

func (s *timedStore) Put(ctx context.Context, key string, data []byte) error {
	done := make(chan struct{})
	s.clock.AfterFunc(s.d, func() {
		s.mu.Lock()
		s.released++
		s.mu.Unlock()
		close(done)
	})
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, key, data)
}

func (s *timedStore) counts() (started, released int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.released
}

// TestUploaderGroupCommit checks the group commit of the latency cut rule
// (UploaderConfig.GroupInFlight) on a manual clock, with PUTs that take
// 40 ms: a lone produce request is cut at once; at higher request rates
// the number of objects per second stays at about GroupInFlight per PUT
// duration (50/s here; the token bucket alone allows 100/s), so objects
// grow with the rate instead of their count.
func TestUploaderGroupCommit(t *testing.T) {
	const (
		interval = 10 * time.Millisecond
		putTime  = 40 * time.Millisecond
		second   = 1000 // ticks of 1 ms
	)
	// objectsPerSecond runs one second of produce requests, perMs per
	// millisecond (or one every -perMs ms when negative), each appending
	// one batch and nudging, and counts the objects cut.
	objectsPerSecond := func(t *testing.T, perMs int) (objects int, immediate bool) {
		clock := newManualClock()
		var res results
		store := &timedStore{Store: objstore.NewMem("fast"), clock: clock, d: putTime}
		u, err := wal.NewUploader(wal.UploaderConfig{
			Store: store, Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 1,
			UploadInterval: interval, MaxObjectBytes: 64 << 20, HedgeAfter: -1,
			Clock: clock, OnUpload: res.add,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			// A PUT waits for the manual clock: cancel it rather than wait.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			u.Close(ctx)
		}()
		// settle waits until every released PUT is delivered (and its
		// completion's cut done) and every cut object's PUT started.
		settle := func() {
			t.Helper()
			waitFor(t, "uploader settles", func() bool {
				started, released := store.counts()
				return released == res.len() && wal.Queued(u) == 0 && started == res.len()+u.Stats().InFlight
			})
		}
		off := int64(0)
		immediate = true
		for ms := 0; ms < second; ms++ {
			n := perMs
			if perMs < 0 {
				n = 0
				if ms%-perMs == 0 {
					n = 1
				}
			}
			for range n {
				if err := u.Append("events", 0, 1, off, off, batch(t, off, 1, 1, 100)); err != nil {
					t.Fatalf("Append: %v", err)
				}
				off++
				u.Nudge()
				if u.Stats().PendingBytes != 0 {
					immediate = false
				}
			}
			settle()
			clock.Advance(time.Millisecond)
			settle()
		}
		started, _ := store.counts()
		return started, immediate
	}

	// A lone request (one per 50 ms: no PUT in flight) is cut at once.
	if objects, immediate := objectsPerSecond(t, -50); !immediate || objects != 20 {
		t.Fatalf("one request per 50 ms: %d objects, each cut at once: %v; want 20, true", objects, immediate)
	}
	// 1,000 and 4,000 requests per second: about 2 objects per 40 ms PUT.
	limit := int(time.Second/putTime)*wal.DefaultGroupInFlight + 2
	for _, perMs := range []int{1, 4} {
		objects, _ := objectsPerSecond(t, perMs)
		t.Logf("%d requests/s: %d objects/s", perMs*1000, objects)
		if objects > limit {
			t.Fatalf("%d requests/s: %d objects/s, want at most %d (GroupInFlight per PUT duration)", perMs*1000, objects, limit)
		}
		if objects < limit/2 {
			t.Fatalf("%d requests/s: only %d objects/s: the group commit holds objects back with no PUT finishing", perMs*1000, objects)
		}
	}
}
