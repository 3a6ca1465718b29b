package wal

// Visits is the number of chunks and objects the tracker examined so far.
func (t *Tracker) Visits() int64 { t.mu.Lock(); defer t.mu.Unlock(); return t.visits }
