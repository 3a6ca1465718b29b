package protocol

import (
	"cmp"
	"context"
	"slices"
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
// and do not queue behind large ones; large requests share all but
// smallReserve of the budget. So a client that declares a large frame and
// sends it slowly holds at most the large share, and other clients' small
// requests keep being read.
const smallFrameBytes = 64 << 10

// smallReserve is the share of the budget (1/smallReserve) that large
// requests cannot take.
const smallReserve = 8

// fairReserve is the share of the large share (1/fairReserve) that one
// connection's request never takes: a large request is counted at most
// largeLimit − largeLimit/fairReserve, so while one connection holds the
// most it may (a 100 MiB frame sent as slowly as minFrameRate allows, for
// half a minute), other connections' large requests up to that reserve
// are still admitted in it.
const fairReserve = 4

// budget is a weighted semaphore over the estimated memory of requests in
// flight, fair between connections (owners).
//
// Small requests are granted whenever they fit. Large requests are
// granted in an order that puts connections holding no large memory
// before those that hold some (a client pipelining large frames, or
// holding one, does not keep others waiting behind its next ones), then
// by arrival. The first of them that does not fit blocks the ones after
// it (a large request is not starved by smaller ones), except that a
// request of at most the fair reserve from a connection holding no large
// memory may pass it as long as the requests let in that way hold at
// most the reserve together: the blocked one still gets in once the
// others leave, since no request takes more than largeLimit − reserve.
type budget struct {
	mu         sync.Mutex
	limit      int64 // every request
	largeLimit int64 // large requests together
	reserve    int64 // of largeLimit, never taken by one request
	used       int64
	largeUsed  int64
	passUsed   int64            // large requests let past a blocked one
	held       map[uint64]int64 // large memory by owner
	waiters    []*budgetWaiter
	seq        uint64
}

type budgetWaiter struct {
	owner uint64
	n     int64
	large bool
	seq   uint64
	pass  bool // granted past a blocked request (passUsed)
	ready chan struct{}
}

func newBudget(limit int64) *budget {
	large := max(limit-limit/smallReserve, 1)
	return &budget{limit: limit, largeLimit: large, reserve: large / fairReserve, held: map[uint64]int64{}}
}

// grant is what acquire took, for release.
type grant struct {
	owner uint64
	n     int64
	large bool
	pass  bool
}

// acquire takes n for owner (capped at what one request may take) or
// returns ctx's error.
func (b *budget) acquire(ctx context.Context, owner uint64, n int64, large bool) (grant, error) {
	if large {
		n = min(n, b.largeLimit-b.reserve)
	} else {
		n = min(n, b.limit)
	}
	w := &budgetWaiter{owner: owner, n: n, large: large, ready: make(chan struct{})}
	b.mu.Lock()
	b.seq++
	w.seq = b.seq
	if !large && b.fitsLocked(n, false) {
		b.takeLocked(w)
		b.mu.Unlock()
		return w.grant(), nil
	}
	b.waiters = append(b.waiters, w)
	b.grantLocked()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return w.grant(), nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.untakeLocked(w.grant())
		default:
			b.waiters = slices.DeleteFunc(b.waiters, func(o *budgetWaiter) bool { return o == w })
		}
		b.grantLocked()
		b.mu.Unlock()
		return grant{}, ctx.Err()
	}
}

func (w *budgetWaiter) grant() grant {
	return grant{owner: w.owner, n: w.n, large: w.large, pass: w.pass}
}

func (b *budget) release(g grant) {
	b.mu.Lock()
	b.untakeLocked(g)
	b.grantLocked()
	b.mu.Unlock()
}

func (b *budget) fitsLocked(n int64, large bool) bool {
	return b.used+n <= b.limit && (!large || b.largeUsed+n <= b.largeLimit)
}

func (b *budget) takeLocked(w *budgetWaiter) {
	b.used += w.n
	if w.large {
		b.largeUsed += w.n
		b.held[w.owner] += w.n
		if w.pass {
			b.passUsed += w.n
		}
	}
}

func (b *budget) untakeLocked(g grant) {
	b.used -= g.n
	if g.large {
		b.largeUsed -= g.n
		if b.held[g.owner] -= g.n; b.held[g.owner] <= 0 {
			delete(b.held, g.owner)
		}
		if g.pass {
			b.passUsed -= g.n
		}
	}
}

// grantLocked wakes waiters that may go (see budget).
func (b *budget) grantLocked() {
	if len(b.waiters) == 0 {
		return
	}
	// Small ones whenever they fit; large ones in the fair order.
	slices.SortStableFunc(b.waiters, func(x, y *budgetWaiter) int {
		if x.large != y.large {
			if x.large {
				return 1
			}
			return -1
		}
		if hx, hy := b.held[x.owner] > 0, b.held[y.owner] > 0; hx != hy {
			if hx {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.seq, y.seq)
	})
	blocked := false // a large waiter did not fit: later ones wait, or pass
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		ok := b.fitsLocked(w.n, w.large)
		if ok && w.large && blocked {
			// Past a blocked one: only a connection holding no large
			// memory, within the reserve.
			ok = b.held[w.owner] == 0 && b.passUsed+w.n <= b.reserve
			w.pass = ok
		}
		if !ok {
			blocked = blocked || w.large
			kept = append(kept, w)
			continue
		}
		b.takeLocked(w)
		close(w.ready)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}
