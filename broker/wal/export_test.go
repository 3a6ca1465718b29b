package wal

import "time"

// Visits is the number of chunks and objects the tracker examined so far.
func (t *Tracker) Visits() int64 { t.mu.Lock(); defer t.mu.Unlock(); return t.visits }

// HedgeDelay exposes the hedge delay for tests.
func (d *Downloader) HedgeDelay() time.Duration { return d.hedgeDelay() }

// ObserveGet exposes the GET average for tests.
func (d *Downloader) ObserveGet(took time.Duration) { d.observeGet(took) }

// PutHedgeDelay exposes the uploader's hedge delay for tests.
func PutHedgeDelay(u *Uploader) time.Duration { return u.putHedgeDelay() }

// ObservePut exposes the PUT average for tests.
func ObservePut(u *Uploader, took time.Duration) { u.observePut(took) }

// Queued is the number of cut objects waiting for an upload slot.
func Queued(u *Uploader) int { u.mu.Lock(); defer u.mu.Unlock(); return len(u.ready) }
