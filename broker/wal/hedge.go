package wal

import (
	"sync/atomic"
	"time"
)

// hedgeAvg is the average duration of one kind of request (PUTs of the
// uploader, GETs of the downloader) and the adaptive hedge delay derived
// from it. Safe for concurrent use.
type hedgeAvg struct {
	ns atomic.Int64 // an EWMA of successful durations (0: none yet)
}

// delay is how long a request may take before it gets a twin: configured
// when set (< 0: never), else 3× the average, at least floor (100 ms
// before the first observation).
func (a *hedgeAvg) delay(configured, floor time.Duration) time.Duration {
	if configured != 0 {
		return configured
	}
	avg := time.Duration(a.ns.Load())
	if avg == 0 {
		return 100 * time.Millisecond
	}
	return max(3*avg, floor)
}

// observe feeds a successful request's duration to the average (weight
// 1/16: about the last few dozen requests).
func (a *hedgeAvg) observe(took time.Duration) {
	for {
		old := a.ns.Load()
		next := int64(took)
		if old != 0 {
			next = old + (int64(took)-old)/16
		}
		if a.ns.CompareAndSwap(old, next) {
			return
		}
	}
}
