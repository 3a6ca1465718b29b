package wal_test

import (
	"context"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// TestUploaderNudge checks the cut rule of Nudge: immediate while the
// token bucket (CutBurst cuts, one more per UploadInterval) has a token,
// else at the moment it has one, never later than UploadInterval after
// the object's first byte.
func TestUploaderNudge(t *testing.T) {
	const interval = 10 * time.Millisecond
	clock := newManualClock()
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: objstore.NewMem("fast"), Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 1,
		UploadInterval: interval, CutBurst: 4, Clock: clock, OnUpload: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(context.Background())
	off := int64(0)
	appendOne := func() {
		t.Helper()
		if err := u.Append("events", 0, 1, off, off, batch(t, off, 1, 1, 10)); err != nil {
			t.Fatalf("Append: %v", err)
		}
		off++
	}
	buffered := func() int { return u.Stats().PendingBytes }

	// A full bucket: four nudged objects are cut at once.
	for i := 1; i <= 4; i++ {
		appendOne()
		u.Nudge()
		if buffered() != 0 {
			t.Fatalf("nudge %d with a token left did not cut", i)
		}
		waitFor(t, "nudged upload", func() bool { return res.len() == i })
	}
	// The bucket is empty: the fifth waits for its interval.
	appendOne()
	u.Nudge()
	if buffered() == 0 {
		t.Fatal("nudge without a token cut")
	}
	clock.Advance(interval - time.Millisecond)
	if buffered() == 0 {
		t.Fatal("cut before the interval with no token")
	}
	clock.Advance(time.Millisecond)
	waitFor(t, "interval cut", func() bool { return res.len() == 5 && buffered() == 0 })

	// A token comes back before the next object's deadline: the nudge
	// re-arms the cut for that moment. Tokens: cuts at t=0 (×4) and t=10
	// ms leave the next token at t=20 ms... consumed by the cut below at
	// t=20, then at t=30.
	clock.Advance(interval) // t=20: a token is back
	appendOne()
	u.Nudge()
	waitFor(t, "cut with the returned token", func() bool { return res.len() == 6 && buffered() == 0 })
	clock.Advance(5 * time.Millisecond) // t=25: next token at t=30, deadline t=35
	appendOne()
	u.Nudge()
	clock.Advance(4 * time.Millisecond)
	if buffered() == 0 {
		t.Fatal("cut before the token came back")
	}
	clock.Advance(time.Millisecond) // t=30
	waitFor(t, "cut when the token came back", func() bool { return res.len() == 7 && buffered() == 0 })

	// Without a nudge, the object waits its full interval.
	clock.Advance(time.Hour) // the bucket refills
	appendOne()
	clock.Advance(interval - time.Millisecond)
	if buffered() == 0 {
		t.Fatal("an object nobody nudged was cut before its interval")
	}
	clock.Advance(time.Millisecond)
	waitFor(t, "un-nudged interval cut", func() bool { return res.len() == 8 && buffered() == 0 })
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers armed with nothing pending", n)
	}
}

// gatedStore holds every Put until the test lets it through.
type gatedStore struct {
	objstore.Store
	gate chan struct{}
}

func (g gatedStore) Put(ctx context.Context, key string, data []byte) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Put(ctx, key, data)
}

// TestUploaderWaitsForASlot: with every upload slot busy, an object whose
// cut time came keeps filling and is cut, whole, when an upload finishes.
func TestUploaderWaitsForASlot(t *testing.T) {
	const interval = 10 * time.Millisecond
	clock := newManualClock()
	var res results
	gate := make(chan struct{})
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: gatedStore{objstore.NewMem("fast"), gate}, Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 1,
		UploadInterval: interval, MaxInFlight: 1, Clock: clock, OnUpload: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(gate)
		u.Close(context.Background())
	}()
	off := int64(0)
	appendOne := func() {
		t.Helper()
		if err := u.Append("events", 0, 1, off, off, batch(t, off, 1, 1, 10)); err != nil {
			t.Fatalf("Append: %v", err)
		}
		off++
	}
	appendOne()
	u.Nudge()
	waitFor(t, "first upload in flight", func() bool { return u.Stats().InFlight == 1 })
	// The only slot is busy: nudges and the interval do not cut.
	for range 3 {
		appendOne()
		u.Nudge()
	}
	clock.Advance(3 * interval)
	if st := u.Stats(); st.PendingBytes == 0 {
		t.Fatal("an object was cut while the only upload slot was busy")
	}
	gate <- struct{}{} // the first PUT finishes
	waitFor(t, "first upload", func() bool { return res.len() == 1 })
	waitFor(t, "due object cut when the slot freed", func() bool { return u.Stats().PendingBytes == 0 && u.Stats().InFlight == 1 })
	gate <- struct{}{}
	waitFor(t, "second upload", func() bool { return res.len() == 2 })
	all := res.all()
	if got := all[1].Pointers; len(got) != 1 || got[0].BaseOffset != 1 || got[0].LastOffset != 3 {
		t.Fatalf("second object holds %v, want one chunk of offsets 1-3", got)
	}
}

// TestUploaderSetCut checks a run-time cut plan (wal.policy): objects cut
// at the plan's size and at its interval, nudges ignored when the plan
// says so, and the latency plan back.
func TestUploaderSetCut(t *testing.T) {
	clock := newManualClock()
	var res results
	u, err := wal.NewUploader(wal.UploaderConfig{
		Store: objstore.NewMem("fast"), Cluster: "demo", Zone: "zone-a", BrokerID: 1, Incarnation: 1,
		UploadInterval: 10 * time.Millisecond, Clock: clock, OnUpload: res.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(context.Background())
	off := int64(0)
	appendOne := func(size int) {
		t.Helper()
		if err := u.Append("events", 0, 1, off, off, batch(t, off, 1, 1, size)); err != nil {
			t.Fatalf("Append: %v", err)
		}
		off++
	}
	pending := func() int { return u.Stats().PendingBytes }

	// The cost plan: 100 ms, cut at 2,000 bytes, no nudges.
	u.SetCut(100*time.Millisecond, 2000, false)
	appendOne(800)
	u.Nudge()
	clock.Advance(99 * time.Millisecond)
	if pending() == 0 {
		t.Fatal("cut before the plan's interval (nudge or the config's 10 ms)")
	}
	appendOne(800)
	appendOne(800) // passes 2,000 bytes: this batch starts the next object
	waitFor(t, "size cut", func() bool { return res.len() == 1 })
	if got := res.all()[0].Bytes; got > 2000+200 {
		t.Fatalf("object of %d bytes, the plan cuts at 2000", got)
	}
	clock.Advance(100 * time.Millisecond)
	waitFor(t, "interval cut", func() bool { return res.len() == 2 && pending() == 0 })

	// Back to the latency plan: nudges cut again.
	u.SetCut(10*time.Millisecond, 0, true)
	appendOne(100)
	u.Nudge()
	waitFor(t, "nudged cut", func() bool { return res.len() == 3 && pending() == 0 })

	// A shorter interval while an object fills makes it due sooner.
	u.SetCut(100*time.Millisecond, 0, false)
	appendOne(100)
	u.SetCut(10*time.Millisecond, 0, false)
	clock.Advance(10 * time.Millisecond)
	waitFor(t, "cut at the shorter interval", func() bool { return res.len() == 4 && pending() == 0 })
}
