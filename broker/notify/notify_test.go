package notify

import (
	"slices"
	"sync"
	"testing"
)

// TestListAndSet: a signal marks every subscribed key once per Take, in
// the order first marked, and wakes the reader only for a waking mark; a
// cancelled subscription is never called again.
func TestListAndSet(t *testing.T) {
	set := NewSet[int]()
	var appends, moves [3]List
	var cancels []func()
	for k := range 3 {
		c1 := appends[k].Subscribe(func() { set.Mark(k, true) })
		c2 := moves[k].Subscribe(func() { set.Mark(k, false) })
		cancels = append(cancels, func() { c1(); c2() })
	}
	woke := func() bool {
		select {
		case <-set.Wake():
			return true
		default:
			return false
		}
	}

	moves[2].Signal()
	if woke() {
		t.Fatal("a non-waking mark signalled the channel")
	}
	appends[1].Signal()
	appends[2].Signal()
	appends[1].Signal()
	if !woke() {
		t.Fatal("a waking mark did not signal the channel")
	}
	if got := set.Take(nil); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("Take = %v, want [2 1] (each once, in the order first marked)", got)
	}
	// A signal for keys taken does not outlive the Take.
	appends[0].Signal()
	set.Take(nil)
	if woke() {
		t.Fatal("the channel still signals keys already taken")
	}
	if got := set.Take(nil); len(got) != 0 {
		t.Fatalf("second Take = %v, want none", got)
	}

	cancels[0]()
	cancels[0]() // twice is fine
	appends[0].Signal()
	if got := set.Take(nil); len(got) != 0 || woke() {
		t.Fatalf("a cancelled subscription marked %v", got)
	}
	if appends[0].Len() != 0 || moves[0].Len() != 0 || appends[1].Len() != 1 {
		t.Fatalf("subscribers after cancel: %d, %d, %d; want 0, 0, 1", appends[0].Len(), moves[0].Len(), appends[1].Len())
	}
}

// TestSetConcurrentMarks: marks from many goroutines while the reader
// takes are never lost.
func TestSetConcurrentMarks(t *testing.T) {
	set := NewSet[int]()
	const writers, marks = 4, 1000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range marks {
				set.Mark(w*marks+i, true)
			}
		}()
	}
	seen := map[int]bool{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-set.Wake():
		case <-done:
			finished = true
		}
		for _, k := range set.Take(nil) {
			seen[k] = true
		}
	}
	if len(seen) != writers*marks {
		t.Fatalf("took %d keys, want %d", len(seen), writers*marks)
	}
}
