package internaltopic

import (
	"context"
	"time"
)

// Poll is the loop of a feed over a store without change notifications
// (a single broker's file stores): it calls read whenever version
// changed, at most every interval (default 200 ms) and at least every
// full interval (default 30 s), until ctx ends (nil) or read fails (its
// error). Reading the whole store is fine for the single broker it
// serves, whose coordinators hold the same state in memory.
func Poll(ctx context.Context, interval, full time.Duration, version func() int64, read func() error) error {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	if full <= 0 {
		full = 30 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var (
		last     int64
		lastRead time.Time
		done     bool
	)
	for {
		v := version()
		if !done || v != last || time.Since(lastRead) >= full {
			if err := read(); err != nil {
				return err
			}
			last, lastRead, done = v, time.Now(), true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
