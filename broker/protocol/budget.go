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

// DefaultMaxInflightRequestMemory is the default memory budget of requests
// read but not yet handled, across all connections.
const DefaultMaxInflightRequestMemory = 2 << 30

// smallFrameBytes: frames up to this size are small. Small requests
// (fetches, metadata, heartbeats, small produce) may use the whole budget
// and do not queue behind large ones; large requests take turns, in
// order, in all but smallReserve of the budget. So a client that declares
// a large frame and sends it slowly holds at most the large share, and
// other clients' small requests keep being read.
const smallFrameBytes = 64 << 10

// smallReserve is the share of the budget (1/smallReserve) that large
// requests cannot take.
const smallReserve = 8

// budget is a weighted semaphore over the estimated memory of requests in
// flight. A request larger than what it may take waits until nothing else
// holds any of its share, then runs alone (capped at that share).
type budget struct {
	mu         sync.Mutex
	limit      int64 // every request
	largeLimit int64 // large requests together
	used       int64
	largeUsed  int64
	waiters    []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	large bool
	ready chan struct{}
}

func newBudget(limit int64) *budget {
	return &budget{limit: limit, largeLimit: max(limit-limit/smallReserve, 1)}
}

// acquire takes n (capped at what one request may take) or returns ctx's
// error. Large requests are granted in arrival order; a small one is
// granted as soon as it fits.
func (b *budget) acquire(ctx context.Context, n int64, large bool) (int64, error) {
	if large {
		n = min(n, b.largeLimit)
	} else {
		n = min(n, b.limit)
	}
	b.mu.Lock()
	if b.fitsLocked(n, large) && (!large || !b.largeWaitingLocked()) {
		b.takeLocked(n, large)
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, large: large, ready: make(chan struct{})}
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
			b.untakeLocked(n, large)
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
		}
		b.grantLocked()
		b.mu.Unlock()
		return 0, ctx.Err()
	}
}

func (b *budget) release(n int64, large bool) {
	b.mu.Lock()
	b.untakeLocked(n, large)
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) fitsLocked(n int64, large bool) bool {
	return b.used+n <= b.limit && (!large || b.largeUsed+n <= b.largeLimit)
}

func (b *budget) largeWaitingLocked() bool {
	for _, w := range b.waiters {
		if w.large {
			return true
		}
	}
	return false
}

func (b *budget) takeLocked(n int64, large bool) {
	b.used += n
	if large {
		b.largeUsed += n
	}
}

func (b *budget) untakeLocked(n int64, large bool) {
	b.used -= n
	if large {
		b.largeUsed -= n
	}
}

// grantLocked wakes waiters that fit: large ones strictly in order (a
// large request is not starved by smaller large ones), small ones
// whenever they fit.
func (b *budget) grantLocked() {
	blocked := false // a large waiter did not fit: later large ones wait
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if (w.large && blocked) || !b.fitsLocked(w.n, w.large) {
			blocked = blocked || w.large
			kept = append(kept, w)
			continue
		}
		b.takeLocked(w.n, w.large)
		close(w.ready)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}
