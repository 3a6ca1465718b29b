package quota

import "time"

// rate is Kafka's sampled rate: amounts summed in Samples windows of
// Window each; the rate is their total over the time they cover, counted
// as at least Samples−1 whole windows so that a client's first burst is
// measured over the full span, not over the few milliseconds it took.
type rate struct {
	window  time.Duration
	samples []sample
	cur     int
	last    time.Time // last record
}

type sample struct {
	start time.Time
	value float64
}

func newRate(n int, window time.Duration, now time.Time) *rate {
	r := &rate{window: window, samples: make([]sample, n), last: now}
	r.samples[0].start = now
	return r
}

func (r *rate) record(v float64, now time.Time) {
	r.last = now
	s := &r.samples[r.cur]
	if now.Sub(s.start) >= r.window {
		r.cur = (r.cur + 1) % len(r.samples)
		s = &r.samples[r.cur]
		*s = sample{start: now}
	}
	s.value += v
}

// measure returns the rate per second and the window it was measured
// over.
func (r *rate) measure(now time.Time) (float64, time.Duration) {
	span := time.Duration(len(r.samples)) * r.window
	var total float64
	oldest := now
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() {
			continue
		}
		if now.Sub(s.start) >= span {
			// Obsolete: outside every window that still counts.
			*s = sample{}
			continue
		}
		total += s.value
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	full := int(elapsed / r.window)
	if min := len(r.samples) - 1; full < min {
		elapsed += time.Duration(min-full) * r.window
	}
	if elapsed <= 0 {
		return 0, r.window
	}
	return total / elapsed.Seconds(), elapsed
}
