package bench

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	tests := []struct {
		name   string
		values func(record func(time.Duration))
		want   map[float64]time.Duration // quantile → exact value
	}{
		{
			name: "uniform 1..100000 µs",
			values: func(record func(time.Duration)) {
				for i := 1; i <= 100000; i++ {
					record(time.Duration(i) * time.Microsecond)
				}
			},
			want: map[float64]time.Duration{
				0.5: 50000 * time.Microsecond, 0.99: 99000 * time.Microsecond,
				0.999: 99900 * time.Microsecond, 1: 100000 * time.Microsecond,
			},
		},
		{
			name: "bimodal: 99% at 2 ms, 1% at 300 ms",
			values: func(record func(time.Duration)) {
				for i := 0; i < 9900; i++ {
					record(2 * time.Millisecond)
				}
				for i := 0; i < 100; i++ {
					record(300 * time.Millisecond)
				}
			},
			want: map[float64]time.Duration{0.5: 2 * time.Millisecond, 0.99: 2 * time.Millisecond, 0.999: 300 * time.Millisecond},
		},
		{
			name: "out of range values are clamped, not lost",
			values: func(record func(time.Duration)) {
				record(-5 * time.Millisecond)
				record(0)
				record(time.Hour)
			},
			want: map[float64]time.Duration{0: time.Microsecond, 1: 10 * time.Minute},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			tt.values(h.Record)
			for q, want := range tt.want {
				got := h.Quantile(q)
				// 3 significant digits: within 0.1% (+1 µs of rounding).
				tol := time.Duration(float64(want)*0.001) + time.Microsecond
				if d := got - want; d < -tol || d > tol {
					t.Errorf("q%v = %v, want %v ± %v", q, got, want, tol)
				}
			}
		})
	}
}

func TestHistogramSummary(t *testing.T) {
	h := NewHistogram()
	if s := h.Summary(); s.Count != 0 || s.P50Ms != 0 || s.Curve != nil {
		t.Fatalf("empty summary = %+v, want zero", s)
	}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	s := h.Summary()
	if s.Count != 1000 {
		t.Fatalf("count %d, want 1000", s.Count)
	}
	if !(s.MinMs <= s.P50Ms && s.P50Ms <= s.P90Ms && s.P90Ms <= s.P99Ms && s.P99Ms <= s.P999Ms && s.P999Ms <= s.MaxMs) {
		t.Fatalf("percentiles not ordered: %+v", s)
	}
	if math.Abs(s.MeanMs-500.5) > 1 {
		t.Errorf("mean %v, want ≈500.5", s.MeanMs)
	}
	// The curve is monotone in both q and latency and ends at the max.
	for i := 1; i < len(s.Curve); i++ {
		if s.Curve[i].Quantile <= s.Curve[i-1].Quantile || s.Curve[i].Ms < s.Curve[i-1].Ms {
			t.Fatalf("curve not monotone at %d: %+v", i, s.Curve)
		}
	}
	if last := s.Curve[len(s.Curve)-1]; last.Quantile != 1 || last.Ms != s.MaxMs {
		t.Errorf("curve ends at %+v, want q=1 at max %v", last, s.MaxMs)
	}
	// 1000 samples resolve quantiles up to ~0.9995, not 0.99999.
	if q := s.Curve[len(s.Curve)-2].Quantile; q > 0.9995 {
		t.Errorf("curve goes to q=%v, beyond what 1000 samples resolve", q)
	}
}

func TestHistogramMergeConcurrent(t *testing.T) {
	total := NewHistogram()
	var wg sync.WaitGroup
	parts := make([]*Histogram, 4)
	for i := range parts {
		parts[i] = NewHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				parts[i].Record(time.Duration(i+1) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, p := range parts {
		total.Merge(p)
	}
	if n := total.Count(); n != 4000 {
		t.Fatalf("merged count %d, want 4000", n)
	}
	if got := total.Quantile(0.5); got < 2*time.Millisecond || got > 2*time.Millisecond+2*time.Microsecond {
		t.Errorf("merged p50 = %v, want 2ms", got)
	}
}
