package notify

import (
	"sync"
	"sync/atomic"
)

// List is a source's subscribers. The zero List has none and is ready to
// use. Signal is called by the source, usually with its own lock held, so
// that a change and its signal are seen in the same order by every
// subscriber.
type List struct {
	n    atomic.Int32 // len(subs): Signal costs one load when nobody listens
	mu   sync.Mutex
	subs map[*sub]struct{}
}

type sub struct{ fn func() }

// Subscribe adds fn, called at each Signal until cancel is called (once
// cancel returns, fn is not called again; cancel may be called more than
// once). fn runs under the source's lock: it must be short, must not
// block and must not call back into the source (Set.Mark is such a fn).
func (l *List) Subscribe(fn func()) (cancel func()) {
	s := &sub{fn: fn}
	l.mu.Lock()
	if l.subs == nil {
		l.subs = map[*sub]struct{}{}
	}
	l.subs[s] = struct{}{}
	l.n.Store(int32(len(l.subs)))
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.subs, s)
		l.n.Store(int32(len(l.subs)))
		l.mu.Unlock()
	}
}

// Signal calls every subscriber's fn.
func (l *List) Signal() {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs {
		s.fn()
	}
}

// Len is the number of subscribers (for tests: a reader that went away
// must leave none behind).
func (l *List) Len() int { return int(l.n.Load()) }

// Set is one reader's changed keys and its one wake-up channel. Mark may
// be called from any goroutine; Take and Wake by the reader.
type Set[K comparable] struct {
	mu      sync.Mutex
	marked  map[K]struct{}
	pending []K // marked, in the order marked
	wake    chan struct{}
}

// NewSet returns an empty Set.
func NewSet[K comparable]() *Set[K] {
	return &Set[K]{marked: map[K]struct{}{}, wake: make(chan struct{}, 1)}
}

// Mark records that k changed and, with wake, signals Wake's channel (a
// change a parked reader answers: new data). Without wake the reader sees
// k at its next round, whatever starts it (a change that alone does not
// end a long poll: a moved high watermark).
func (s *Set[K]) Mark(k K, wake bool) {
	s.mu.Lock()
	if _, ok := s.marked[k]; !ok {
		s.marked[k] = struct{}{}
		s.pending = append(s.pending, k)
	}
	s.mu.Unlock()
	if wake {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Take appends the keys marked since the last Take to buf, in the order
// first marked, and clears them. A key marked after Take returns is in
// the next one (and, marked with wake, signals the channel again).
//
// Take first empties Wake's channel: a signal for keys it takes would
// otherwise wake the reader's next park for nothing (a round that reads
// nothing new). Emptied before the keys are taken, not after, so that a
// mark landing in between still wakes the reader.
func (s *Set[K]) Take(buf []K) []K {
	select {
	case <-s.wake:
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf = append(buf, s.pending...)
	clear(s.pending)
	s.pending = s.pending[:0]
	clear(s.marked)
	return buf
}

// Wake is the channel a Mark with wake signals: a reader parks on it
// (with its deadline) instead of on a channel per source. It may still
// hold a signal for keys already taken (a mark racing Take); the reader
// then finds nothing new and parks again.
func (s *Set[K]) Wake() <-chan struct{} { return s.wake }
