package protocol

import (
	"context"
	"runtime"
	"testing"
)

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	a, err := b.acquire(ctx, 60, true)
	if err != nil || a != 60 {
		t.Fatal(a, err)
	}
	// 50 does not fit; it waits in order, and a later small one waits
	// behind it (FIFO).
	got := make(chan int64, 2)
	go func() { n, _ := b.acquire(ctx, 50, true); got <- n }()
	waitWaiters(t, b, 1)
	go func() { n, _ := b.acquire(ctx, 10, true); got <- n }()
	waitWaiters(t, b, 2)
	b.release(a, true)
	if n1, n2 := <-got, <-got; n1+n2 != 60 {
		t.Fatalf("granted %d and %d", n1, n2)
	}
	// Larger than the large share (100 - 100/8): capped, runs alone.
	b.release(50, true)
	b.release(10, true)
	if n, err := b.acquire(ctx, 1000, true); err != nil || n != 88 {
		t.Fatal(n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { _, err := b.acquire(cctx, 1, true); done <- err }()
	waitWaiters(t, b, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	b.release(88, true)
	if b.used != 0 || len(b.waiters) != 0 {
		t.Fatalf("used %d, %d waiters", b.used, len(b.waiters))
	}
}

// TestBudgetSmallReserve: large requests never take the share kept for
// small ones, and small ones do not queue behind a waiting large one: a
// client holding the large share (a huge frame sent slowly) does not stall
// other clients' fetches.
func TestBudgetSmallReserve(t *testing.T) {
	b := newBudget(800)
	ctx := context.Background()
	if n, err := b.acquire(ctx, 10_000, true); err != nil || n != 700 {
		t.Fatal(n, err)
	}
	queued := make(chan int64, 1)
	go func() { n, _ := b.acquire(ctx, 50, true); queued <- n }()
	waitWaiters(t, b, 1)
	for range 4 {
		if n, err := b.acquire(ctx, 25, false); err != nil || n != 25 {
			t.Fatal(n, err)
		}
	}
	// The reserve is full now: a small one waits, and gets in as soon as
	// a small one leaves, still ahead of the large waiter.
	small := make(chan int64, 1)
	go func() { n, _ := b.acquire(ctx, 25, false); small <- n }()
	waitWaiters(t, b, 2)
	b.release(25, false)
	if n := <-small; n != 25 {
		t.Fatal(n)
	}
	b.release(700, true)
	if n := <-queued; n != 50 {
		t.Fatal(n)
	}
}

func waitWaiters(t *testing.T, b *budget, n int) {
	t.Helper()
	for {
		b.mu.Lock()
		w := len(b.waiters)
		b.mu.Unlock()
		if w >= n {
			return
		}
		// Yield until the goroutine has queued; no timing involved.
		runtimeGosched()
	}
}

func runtimeGosched() { runtime.Gosched() }
