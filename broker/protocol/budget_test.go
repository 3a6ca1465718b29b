package protocol

import (
	"context"
	"runtime"
	"testing"
)

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	a, err := b.acquire(ctx, 60)
	if err != nil || a != 60 {
		t.Fatal(a, err)
	}
	// 50 does not fit; it waits in order, and a later small one waits
	// behind it (FIFO).
	got := make(chan int64, 2)
	go func() { n, _ := b.acquire(ctx, 50); got <- n }()
	waitWaiters(t, b, 1)
	go func() { n, _ := b.acquire(ctx, 10); got <- n }()
	waitWaiters(t, b, 2)
	b.release(a)
	if n1, n2 := <-got, <-got; n1+n2 != 60 {
		t.Fatalf("granted %d and %d", n1, n2)
	}
	// Larger than the limit: capped, runs alone.
	b.release(50)
	b.release(10)
	if n, err := b.acquire(ctx, 1000); err != nil || n != 100 {
		t.Fatal(n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { _, err := b.acquire(cctx, 1); done <- err }()
	waitWaiters(t, b, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	b.release(100)
	if b.used != 0 || len(b.waiters) != 0 {
		t.Fatalf("used %d, %d waiters", b.used, len(b.waiters))
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
