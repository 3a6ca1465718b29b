package wal

import "time"

// Clock is the time source of the uploader and the retention tracker;
// tests inject a manual clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d; the returned stop
	// function cancels it if it has not run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
