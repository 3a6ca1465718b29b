package chaos

import (
	"reflect"
	"strings"
	"testing"
)

// passing is a Result every minimum and check is met by.
func passing() Result {
	return Result{
		Faults:      map[string]int{KindKill: 2, KindPause: 1},
		FaultErrors: map[string]int{KindKill: 1},
		Schedule:    []Fault{{Kind: KindKill}, {Kind: KindKill}, {Kind: KindKill}, {Kind: KindPause}},
		Verdict:     Verdict{Acked: 5000, Consumed: 9000},
		MinAcked:    1000,
		Live:        true,
	}
}

// goodWorkloads are the other workloads' counts of a run that tested
// what each is for.
func goodWorkloads() map[string]WorkloadCount {
	return map[string]WorkloadCount{
		WorkloadGroups:       {Checked: 100, Info: map[string]int64{"generations": 4}},
		WorkloadTransactions: {Checked: 100, Info: map[string]int64{TxnCommitted: 40, TxnAborted: 10}},
		WorkloadCompacted:    {Checked: 100, Info: map[string]int64{"written": 900, "read": 60}},
		WorkloadTiered:       {Checked: 100, Info: map[string]int64{"earliest_local_max": 300}},
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Result)
		ok     bool
		reason []string // each must be in Reason
	}{
		{"passing", func(*Result) {}, true, nil},
		{"lost and duplicated", func(r *Result) { r.Lost, r.Duplicated = 3, 1 }, false, []string{"checks failed: lost=3 duplicated=1"}},
		{"hwm regression alone", func(r *Result) { r.HWMRegressions = 2 }, false, []string{"hwm_regressions=2"}},
		{"harness problem", func(r *Result) { r.Problems = []string{"broker 2 did not shut down cleanly"} }, false,
			[]string{"problems: broker 2 did not shut down cleanly"}},
		{"too few acknowledged", func(r *Result) { r.Acked = 999 }, false, []string{"only 999 records acknowledged, fewer than the minimum 1000"}},
		{"exactly the minimum", func(r *Result) { r.Acked = 1000 }, true, nil},
		{"zero acknowledged", func(r *Result) { r.Acked = 0 }, false, []string{"only 0 records acknowledged"}},
		{"no fault scheduled (--faults none)", func(r *Result) {
			r.Schedule, r.Faults, r.FaultErrors = nil, map[string]int{}, map[string]int{}
		}, false, []string{"no fault was applied (0 scheduled, 0 not applied)"}},
		{"every fault failed", func(r *Result) {
			r.Faults = map[string]int{}
			r.FaultErrors = map[string]int{KindKill: 3, KindPause: 1}
		}, false, []string{"no fault was applied (4 scheduled, 4 not applied)"}},
		{"a kind scheduled never applied", func(r *Result) {
			delete(r.Faults, KindPause)
			r.FaultErrors[KindPause] = 1
		}, false, []string{"fault kind pause scheduled 1 times but never applied (1 not applied)"}},
		{"not live after healing", func(r *Result) {
			r.Live, r.LivenessBoundS, r.LivenessError = false, 60, "produce to chaos-0/1: NOT_ENOUGH_REPLICAS"
		}, false, []string{"did not serve produce and consume within 60s after healing: produce to chaos-0/1: NOT_ENOUGH_REPLICAS"}},
		{"a workload's violations", func(r *Result) {
			r.WorkloadViolations = 2
			r.Workloads = goodWorkloads()
			r.Workloads[WorkloadTransactions] = WorkloadCount{Checked: 9, Violations: 2}
		}, false, []string{"checks failed: transactions=2"}},
		{"every workload run and shown at work", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
		}, true, nil},
		{"a workload run that checked nothing", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			delete(r.Workloads, WorkloadTiered)
		}, false, []string{"workload tiered checked nothing"}},
		{"the cleaner never ran", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			r.Workloads[WorkloadCompacted].Info["read"] = 900
		}, false, []string{"workload compacted: the cleaner removed nothing (900 records read of 900 acknowledged)"}},
		{"nothing left the local log", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			r.Workloads[WorkloadTiered].Info["earliest_local_max"] = 0
		}, false, []string{"workload tiered: no segment left the local log"}},
		{"no rebalance", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			r.Workloads[WorkloadGroups].Info["generations"] = 1
			r.DurationS = 180
		}, false, []string{"workload groups: commits in 1 generation(s)"}},
		{"no rebalance in a short run", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			r.Workloads[WorkloadGroups].Info["generations"] = 1
			r.DurationS = 45
		}, true, nil},
		{"no abort", func(r *Result) {
			r.ExpectWorkloads, r.Workloads = ExtraWorkloads, goodWorkloads()
			r.Workloads[WorkloadTransactions].Info[TxnAborted] = 0
		}, false, []string{"workload transactions: 40 committed and 0 aborted: both are needed"}},
		{"zone-local producers, forwarded and appended", func(r *Result) {
			r.ZoneLocal = &ZoneLocalResult{Enabled: true, ObjectsPut: 40, ObjectsRead: 38, ForwardedPartitions: 90, AppendedPartitions: 85}
		}, true, nil},
		{"zone-local producers, forwarded through shared WAL objects", func(r *Result) {
			r.ZoneLocal = &ZoneLocalResult{Enabled: true, ForwardedObjects: 40, SharedObjects: 30, ForwardedPartitions: 90, AppendedPartitions: 85}
		}, true, nil},
		{"zone-local producers, nothing forwarded", func(r *Result) {
			r.ZoneLocal = &ZoneLocalResult{Enabled: true, MetricsScrapes: 300}
		}, false, []string{"zone-local producers: nothing was forwarded (0 objects by the metric, 0 own objects put, 0 partitions forwarded by the metric, 300 scrapes)"}},
		{"zone-local producers, objects put but the metrics never read", func(r *Result) {
			r.ZoneLocal = &ZoneLocalResult{Enabled: true, ObjectsPut: 40, ObjectsRead: 40}
		}, false, []string{"zone-local producers: nothing was forwarded (0 objects by the metric, 40 own objects put, 0 partitions forwarded by the metric, 0 scrapes)"}},
		{"zone-local producers, forwarded but never appended", func(r *Result) {
			r.ZoneLocal = &ZoneLocalResult{Enabled: true, ForwardedObjects: 40, ForwardedPartitions: 90}
		}, false, []string{"zone-local producers: no leader appended forwarded records (0 partitions appended by the metric)"}},
		{"several causes, all named", func(r *Result) {
			r.Lost, r.Acked, r.Live = 1, 10, false
		}, false, []string{"lost=1", "only 10 records", "did not serve"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := passing()
			tc.mutate(&r)
			r.judge()
			if r.OK != tc.ok {
				t.Fatalf("ok %v, want %v (reason %q)", r.OK, tc.ok, r.Reason)
			}
			if tc.ok && r.Reason != "" {
				t.Fatalf("ok with reason %q", r.Reason)
			}
			for _, want := range tc.reason {
				if !strings.Contains(r.Reason, want) {
					t.Fatalf("reason %q does not contain %q", r.Reason, want)
				}
			}
		})
	}
}

func TestWorkloads(t *testing.T) {
	v := Verdict{Acked: 10, Lost: 1, Misplaced: 2, Duplicated: 3, OutOfOrder: 4, Consumed: 20, PhantomReads: 5, HWMRegressions: 6,
		DivergentReplicas: 7, OffsetGaps: 8}
	got := v.workloads(27)
	want := map[string]WorkloadCount{"idempotent": {Checked: 10, Violations: 10}, "consumers": {Checked: 20, Violations: 11},
		"replicas": {Checked: 27, Violations: 15}}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Fatalf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("workloads %v: entries nobody checks", got)
	}
}
