package bench

import (
	"math"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to 10 minutes with 3
// significant digits: a percentile is within 0.1% of the exact value.
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

// Histogram is a concurrency-safe latency histogram (HDR).
type Histogram struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)}
}

// Record adds one latency. Values outside the trackable range are clamped
// to it (a negative end-to-end latency from clock steps counts as the
// minimum, an hour-long stall as the maximum) so no sample is lost.
func (h *Histogram) Record(d time.Duration) {
	us := d.Microseconds()
	if us < histMinMicros {
		us = histMinMicros
	}
	if us > histMaxMicros {
		us = histMaxMicros
	}
	h.mu.Lock()
	_ = h.h.RecordValue(us) // cannot fail: the value is clamped into range
	h.mu.Unlock()
}

// Merge adds every sample of o.
func (h *Histogram) Merge(o *Histogram) {
	o.mu.Lock()
	c := o.h.Export()
	o.mu.Unlock()
	h.mu.Lock()
	h.h.Merge(hdrhistogram.Import(c))
	h.mu.Unlock()
}

// Count is the number of samples.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.TotalCount()
}

// Quantile returns the latency at quantile q in [0, 1] (0 when empty).
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.h.ValueAtQuantile(q*100)) * time.Microsecond
}

// Summary returns the figures reported for a latency.
func (h *Histogram) Summary() LatencySummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count:  h.h.TotalCount(),
		MinMs:  ms(h.h.Min()),
		MeanMs: h.h.Mean() / 1000,
		P50Ms:  ms(h.h.ValueAtQuantile(50)),
		P90Ms:  ms(h.h.ValueAtQuantile(90)),
		P99Ms:  ms(h.h.ValueAtQuantile(99)),
		P999Ms: ms(h.h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.h.Max()),
		Curve:  percentileCurve(h.h),
	}
}

// LatencySummary holds a latency distribution's figures in milliseconds.
type LatencySummary struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Curve is the percentile distribution for plots: latency at
	// quantiles spaced evenly on the 1/(1-q) log scale.
	Curve []CurvePoint `json:"curve,omitempty"`
}

// CurvePoint is one point of a percentile distribution.
type CurvePoint struct {
	Quantile float64 `json:"q"`
	Ms       float64 `json:"ms"`
}

// curveQuantiles are the quantiles plotted: 0 to 0.99999, 8 points per
// decade of 1/(1-q).
func curveQuantiles() []float64 {
	qs := []float64{0}
	const perDecade = 8
	for i := 1; i <= 5*perDecade; i++ {
		// 1-q = 10^(-i/perDecade)
		tail := math.Pow(10, -float64(i)/perDecade)
		qs = append(qs, 1-tail)
	}
	return qs
}

func percentileCurve(h *hdrhistogram.Histogram) []CurvePoint {
	var out []CurvePoint
	n := h.TotalCount()
	for _, q := range curveQuantiles() {
		// Past the last sample the curve would only repeat the max.
		if q > 0 && (1-q)*float64(n) < 0.5 {
			break
		}
		out = append(out, CurvePoint{Quantile: q, Ms: float64(h.ValueAtQuantile(q*100)) / 1000})
	}
	out = append(out, CurvePoint{Quantile: 1, Ms: float64(h.Max()) / 1000})
	return out
}
