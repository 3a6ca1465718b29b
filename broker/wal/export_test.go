package wal

import "time"

// Visits is the number of chunks and objects the tracker examined so far.
func (t *Tracker) Visits() int64 { t.mu.Lock(); defer t.mu.Unlock(); return t.visits }

// HedgeDelay exposes the hedge delay for tests.
func (d *Downloader) HedgeDelay() time.Duration { return d.hedgeDelay() }

// ObserveGet exposes the GET average for tests.
func (d *Downloader) ObserveGet(took time.Duration) { d.observeGet(took) }
