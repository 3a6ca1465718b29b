package protocol

import (
	"context"
	"sync"
)

// decodeAmplification bounds how much memory a decoded request takes per
// byte of its frame: arrays of tiny elements (empty topic entries in a
// Produce request) decode to structs about 20 times their wire size
// (measured with kmsg v1.15); record batches are not copied at all.
const decodeAmplification = 24

// DefaultMaxInflightRequestMemory is the default memory budget of large
// requests read but not yet handled, across all connections.
const DefaultMaxInflightRequestMemory = 2 << 30

// budgetFreeFrameBytes: frames up to this size do not take budget.
const budgetFreeFrameBytes = 1 << 20

// budget is a weighted semaphore over the estimated memory of requests in
// flight. A request larger than the whole budget waits until nothing else
// holds any of it, then runs alone.
type budget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(limit int64) *budget { return &budget{limit: limit} }

// acquire takes n (capped at the limit) or returns ctx's error.
func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.limit)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.used -= n
			b.grantLocked()
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked()
		}
		b.mu.Unlock()
		return 0, ctx.Err()
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

// grantLocked wakes waiters in order while they fit (FIFO, so a large
// request is not starved by small ones).
func (b *budget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}
