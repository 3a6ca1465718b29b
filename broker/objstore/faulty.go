package objstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Faulty wraps a Store and injects latency, failures and corruption. The
// zero knobs pass every call through unchanged. It is safe for concurrent
// use and the knobs may change while calls run. Benchmarks use it to
// emulate S3 Express latency (`strata bench --s3-put-latency`), fault tests
// to fail or corrupt the bucket.
type Faulty struct {
	inner Store

	mu            sync.Mutex
	putLatency    time.Duration
	getLatency    time.Duration
	failNext      int
	failAll       bool
	corruptOnRead bool
	floor         bool
	calls         map[Op]int
}

var _ Store = (*Faulty)(nil)

// NewFaulty wraps inner.
func NewFaulty(inner Store) *Faulty {
	return &Faulty{inner: inner, calls: map[Op]int{}}
}

// SetPutLatency delays every Put by d before it reaches the inner store.
func (f *Faulty) SetPutLatency(d time.Duration) { f.mu.Lock(); f.putLatency = d; f.mu.Unlock() }

// SetGetLatency delays every Get and Head by d.
func (f *Faulty) SetGetLatency(d time.Duration) { f.mu.Lock(); f.getLatency = d; f.mu.Unlock() }

// SetLatencyFloor switches how the injected latencies apply: off (the
// default) delays every call by the latency before it reaches the inner
// store; on makes the latency the call's minimum total duration, the
// inner store's own time counted toward it (a call that already took
// longer is not delayed). strata bench uses the floor to emulate a store
// whose latency is the given one, so that the local test server's time
// is not added on top.
func (f *Faulty) SetLatencyFloor(on bool) { f.mu.Lock(); f.floor = on; f.mu.Unlock() }

// FailNext makes the next n calls (any operation) fail with ErrInjected.
func (f *Faulty) FailNext(n int) { f.mu.Lock(); f.failNext = n; f.mu.Unlock() }

// SetFailAll makes every call fail with ErrInjected while on.
func (f *Faulty) SetFailAll(on bool) { f.mu.Lock(); f.failAll = on; f.mu.Unlock() }

// SetCorruptOnRead flips one bit in the middle of every Get result while on.
func (f *Faulty) SetCorruptOnRead(on bool) { f.mu.Lock(); f.corruptOnRead = on; f.mu.Unlock() }

// Calls returns how many calls of op reached the wrapper (injected
// failures included).
func (f *Faulty) Calls(op Op) int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls[op] }

// before counts the call and decides its fate: the latency to wait and
// whether to fail it. With the latency floor on, the wait is left to
// after, which gets the floor as a deadline.
func (f *Faulty) before(op Op) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.floor {
		return 0, f.injectLocked(op)
	}
	var delay time.Duration
	switch op {
	case OpPut:
		delay = f.putLatency
	case OpGet, OpHead:
		delay = f.getLatency
	}
	return delay, f.injectLocked(op)
}

func (f *Faulty) injectLocked(op Op) error {
	if f.failAll {
		return fmt.Errorf("objstore: %s: %w (fail-all)", op, ErrInjected)
	}
	if f.failNext > 0 {
		f.failNext--
		return fmt.Errorf("objstore: %s: %w (fail-next)", op, ErrInjected)
	}
	return nil
}

// floorDeadline returns when a call of op that started at start may
// return, with the latency floor on; the zero time otherwise.
func (f *Faulty) floorDeadline(op Op, start time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.floor {
		return time.Time{}
	}
	switch op {
	case OpPut:
		return start.Add(f.putLatency)
	case OpGet, OpHead:
		return start.Add(f.getLatency)
	}
	return time.Time{}
}

// after waits until the latency floor of a call that started at start
// (nothing without the floor), keeping err.
func (f *Faulty) after(ctx context.Context, op Op, start time.Time, err error) error {
	d := f.floorDeadline(op, start)
	if d.IsZero() {
		return err
	}
	if werr := wait(ctx, time.Until(d)); werr != nil && err == nil {
		return fmt.Errorf("objstore: %s: %w", op, werr)
	}
	return err
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Faulty) enter(ctx context.Context, op Op) error {
	d, injected := f.before(op)
	if err := wait(ctx, d); err != nil {
		return fmt.Errorf("objstore: %s: %w", op, err)
	}
	return injected
}

// Bucket implements Store.
func (f *Faulty) Bucket() string { return f.inner.Bucket() }

// Put implements Store.
func (f *Faulty) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	if err := f.enter(ctx, OpPut); err != nil {
		return f.after(ctx, OpPut, start, err)
	}
	return f.after(ctx, OpPut, start, f.inner.Put(ctx, key, data))
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	start := time.Now()
	if err := f.enter(ctx, OpGet); err != nil {
		return nil, f.after(ctx, OpGet, start, err)
	}
	b, err := f.inner.Get(ctx, key, offset, length)
	if err = f.after(ctx, OpGet, start, err); err != nil || len(b) == 0 {
		return b, err
	}
	f.mu.Lock()
	corrupt := f.corruptOnRead
	f.mu.Unlock()
	if corrupt {
		b[len(b)/2] ^= 0x10
	}
	return b, nil
}

// Head implements Store.
func (f *Faulty) Head(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	if err := f.enter(ctx, OpHead); err != nil {
		return ObjectInfo{}, f.after(ctx, OpHead, start, err)
	}
	info, err := f.inner.Head(ctx, key)
	return info, f.after(ctx, OpHead, start, err)
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	if err := f.enter(ctx, OpDelete); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

// DeleteMany implements BatchDeleter (one call, as the inner store's
// DeleteAll would make).
func (f *Faulty) DeleteMany(ctx context.Context, keys []string) error {
	if err := f.enter(ctx, OpDeleteMany); err != nil {
		return err
	}
	return DeleteAll(ctx, f.inner, keys)
}

// List implements Store.
func (f *Faulty) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := f.enter(ctx, OpList); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}
