package bench

import (
	"math"
	"sort"
)

// metricWALStage is the brokers' per-stage latency histogram of the WAL
// path (broker/replica walstage.go), by label stage.
const metricWALStage = "strata_wal_stage_seconds"

// walStages is the stage label values in data-path order (as
// replica.Stages; listed here so that the bench reads any broker's
// exposition without importing the broker).
var walStages = []string{"cut_wait", "put", "notify", "get", "follower_append", "next_fetch", "hwm_to_produce", "hwm_to_consumer_fetch", stageAcksAllWait}

// stageAcksAllWait is not a stage but the whole round per partition as
// the leader sees it (replica.StageAcksAllWait); it is never the slowest
// stage.
const stageAcksAllWait = "acks_all_wait"

// StageFigure is one stage's latency over a window, all brokers.
type StageFigure struct {
	Stage string   `json:"stage"`
	Count uint64   `json:"count"`
	P50Ms *float64 `json:"p50_ms"`
	P99Ms *float64 `json:"p99_ms"`
}

// bucketCounts is a histogram as upper bound → cumulative count.
type bucketCounts map[float64]float64

// stageBuckets returns the cumulative bucket counts of each stage in s.
func stageBuckets(s Scrape) map[string]bucketCounts {
	f, ok := s[metricWALStage]
	if !ok {
		return nil
	}
	out := map[string]bucketCounts{}
	for _, m := range f.GetMetric() {
		stage := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "stage" {
				stage = l.GetValue()
			}
		}
		h := m.GetHistogram()
		if stage == "" || h == nil {
			continue
		}
		bc := bucketCounts{}
		for _, b := range h.GetBucket() {
			bc[b.GetUpperBound()] = float64(b.GetCumulativeCount())
		}
		bc[math.Inf(1)] = float64(h.GetSampleCount())
		out[stage] = bc
	}
	return out
}

// ComputeStages turns per-broker scrapes before and after the window
// into each stage's count, p50 and p99 (bucket deltas summed over the
// brokers, quantiles interpolated linearly inside a bucket as
// Prometheus' histogram_quantile does), and names the stage with the
// largest p99. Nil when no broker exports the histogram (classic mode,
// an older broker).
func ComputeStages(before, after []Scrape) ([]StageFigure, string) {
	n := min(len(before), len(after))
	sum := map[string]bucketCounts{}
	for i := range n {
		if after[i] == nil {
			continue
		}
		a := stageBuckets(after[i])
		var b map[string]bucketCounts
		if before[i] != nil {
			b = stageBuckets(before[i])
		}
		for stage, ac := range a {
			if sum[stage] == nil {
				sum[stage] = bucketCounts{}
			}
			for le, c := range ac {
				sum[stage][le] += c - b[stage][le]
			}
		}
	}
	if len(sum) == 0 {
		return nil, ""
	}
	var out []StageFigure
	slowest, worst := "", -1.0
	for _, stage := range walStages {
		bc, ok := sum[stage]
		if !ok {
			continue
		}
		f := StageFigure{Stage: stage, Count: uint64(bc[math.Inf(1)])}
		f.P50Ms, f.P99Ms = bucketQuantile(bc, 0.5), bucketQuantile(bc, 0.99)
		if f.P99Ms != nil && *f.P99Ms > worst && stage != stageAcksAllWait {
			slowest, worst = stage, *f.P99Ms
		}
		out = append(out, f)
	}
	return out, slowest
}

// bucketQuantile is histogram_quantile over cumulative buckets, in ms;
// nil without observations. A quantile in the +Inf bucket is the largest
// finite bound.
func bucketQuantile(bc bucketCounts, q float64) *float64 {
	bounds := make([]float64, 0, len(bc))
	for le := range bc {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	total := bc[math.Inf(1)]
	if total <= 0 {
		return nil
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := bc[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return ptr(prevBound * 1e3)
			}
			in := c - prevCount
			frac := 1.0
			if in > 0 {
				frac = (rank - prevCount) / in
			}
			return ptr((prevBound + (le-prevBound)*frac) * 1e3)
		}
		prevBound, prevCount = le, c
	}
	return ptr(prevBound * 1e3)
}

// metricSchedLatency is the Go runtime's scheduler latency histogram (time
// goroutines spent runnable before running), which brokers export
// (broker/metrics: the Go collector's scheduler metrics).
const metricSchedLatency = "go_sched_latencies_seconds"

// SchedLatency is the broker processes' Go scheduler latency in the window:
// how long goroutines waited for a CPU once runnable. Every hop of the
// WAL path (an upload finishing, a fetch woken, a GET answered) pays it,
// so on a busy CPU it is where the stages' tails come from.
type SchedLatency struct {
	Count  uint64   `json:"count"`
	P50Ms  *float64 `json:"p50_ms"`
	P99Ms  *float64 `json:"p99_ms"`
	P999Ms *float64 `json:"p999_ms"`
}

// ComputeSchedLatency is the scheduler latency over the window from
// per-broker scrapes (bucket deltas summed: brokers of one process export
// the same histogram, which changes no quantile); nil when no broker
// exports it.
func ComputeSchedLatency(before, after []Scrape) *SchedLatency {
	sum := bucketCounts{}
	for i := range min(len(before), len(after)) {
		if after[i] == nil {
			continue
		}
		a := plainHistogram(after[i], metricSchedLatency)
		var b bucketCounts
		if before[i] != nil {
			b = plainHistogram(before[i], metricSchedLatency)
		}
		for le, c := range a {
			sum[le] += c - b[le]
		}
	}
	if sum[math.Inf(1)] <= 0 {
		return nil
	}
	return &SchedLatency{Count: uint64(sum[math.Inf(1)]), P50Ms: bucketQuantile(sum, 0.5), P99Ms: bucketQuantile(sum, 0.99), P999Ms: bucketQuantile(sum, 0.999)}
}

// plainHistogram returns the cumulative buckets of an unlabeled histogram.
func plainHistogram(s Scrape, name string) bucketCounts {
	f, ok := s[name]
	if !ok || len(f.GetMetric()) == 0 || f.GetMetric()[0].GetHistogram() == nil {
		return nil
	}
	h := f.GetMetric()[0].GetHistogram()
	bc := bucketCounts{}
	for _, b := range h.GetBucket() {
		bc[b.GetUpperBound()] = float64(b.GetCumulativeCount())
	}
	bc[math.Inf(1)] = float64(h.GetSampleCount())
	return bc
}
