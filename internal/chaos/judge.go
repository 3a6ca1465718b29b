package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// WorkloadCount is what one workload's checks covered and how many
// violations they found.
type WorkloadCount struct {
	Checked    int `json:"checked"`
	Violations int `json:"violations"`
	// Info is what shows the workload did what it is for (the cleaner
	// removed records, segments left the local log...).
	Info map[string]int64 `json:"info,omitempty"`
}

// groupsMovedMinRunS is the shortest run whose groups workload must have
// moved a partition between members (commits in two generations): a
// shorter run under overlapping faults on a busy machine may spend it
// forming the group (TestChaosShort's 45 s seeds; seed 1 once had one
// generation at load 15–20). Its commits are checked all the same.
const groupsMovedMinRunS = 60

// workloads lists the workloads the checker really judges:
//
//   - idempotent: the acknowledged records of the idempotent acks=all
//     producers (and the liveness probe's), each checked in every replica
//     (lost, misplaced, duplicated, out of order);
//   - consumers: the records the per-broker consumers read (phantom reads)
//     and the high watermarks they saw (regressions);
//   - replicas: the replica logs read from disk (divergent, offset gaps);
//   - groups, transactions, compacted, tiered: as their checkers say
//     (CheckGroups, CheckTransactions, CheckCompacted, CheckTiered), when
//     the history has them.
func (v Verdict) workloads(replicaLogs int) map[string]WorkloadCount {
	m := map[string]WorkloadCount{
		"idempotent": {Checked: v.Acked, Violations: v.Lost + v.Misplaced + v.Duplicated + v.OutOfOrder},
		"consumers":  {Checked: v.Consumed, Violations: v.PhantomReads + v.HWMRegressions},
		"replicas":   {Checked: replicaLogs, Violations: v.DivergentReplicas + v.OffsetGaps},
	}
	for k, c := range v.extra {
		m[k] = c
	}
	return m
}

// judge decides OK and Reason from everything the run found: the
// checker's verdict, harness problems, and the minimums a run must reach
// to be evidence at all (enough acknowledged records, every scheduled
// fault kind applied at least once, at least one fault, the cluster
// serving produce and consume again after healing). Reason lists every
// cause, in that order; it is empty when OK.
func (r *Result) judge() {
	var why []string
	if !r.Verdict.OK() {
		var bad []string
		for _, c := range []struct {
			name string
			n    int
		}{
			{"lost", r.Lost}, {"misplaced", r.Misplaced}, {"duplicated", r.Duplicated}, {"out_of_order", r.OutOfOrder},
			{"phantom_reads", r.PhantomReads}, {"divergent_replicas", r.DivergentReplicas}, {"offset_gaps", r.OffsetGaps},
			{"hwm_regressions", r.HWMRegressions},
		} {
			if c.n > 0 {
				bad = append(bad, fmt.Sprintf("%s=%d", c.name, c.n))
			}
		}
		for _, name := range ExtraWorkloads {
			if n := r.Workloads[name].Violations; n > 0 {
				bad = append(bad, fmt.Sprintf("%s=%d", name, n))
			}
		}
		why = append(why, "checks failed: "+strings.Join(bad, " "))
	}
	if len(r.Problems) > 0 {
		why = append(why, "problems: "+strings.Join(r.Problems, "; "))
	}
	if r.Acked < r.MinAcked {
		why = append(why, fmt.Sprintf("only %d records acknowledged, fewer than the minimum %d (--min-acked)", r.Acked, r.MinAcked))
	}
	applied := 0
	for _, n := range r.Faults {
		applied += n
	}
	scheduled := map[string]int{}
	for _, f := range r.Schedule {
		scheduled[f.Kind]++
	}
	if applied == 0 {
		why = append(why, fmt.Sprintf("no fault was applied (%d scheduled, %d not applied)", len(r.Schedule), sum(r.FaultErrors)))
	} else {
		kinds := make([]string, 0, len(scheduled))
		for k := range scheduled {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			if r.Faults[k] == 0 {
				why = append(why, fmt.Sprintf("fault kind %s scheduled %d times but never applied (%d not applied)", k, scheduled[k], r.FaultErrors[k]))
			}
		}
	}
	for _, name := range r.ExpectWorkloads {
		w := r.Workloads[name]
		switch {
		case w.Checked == 0:
			why = append(why, fmt.Sprintf("workload %s checked nothing", name))
		case name == WorkloadCompacted && w.Info["read"] >= w.Info["written"]:
			why = append(why, fmt.Sprintf("workload compacted: the cleaner removed nothing (%d records read of %d acknowledged)", w.Info["read"], w.Info["written"]))
		case name == WorkloadGroups && w.Info["generations"] < 2 && r.DurationS >= groupsMovedMinRunS:
			why = append(why, fmt.Sprintf("workload groups: commits in %d generation(s): no partition moved between members", w.Info["generations"]))
		case name == WorkloadTransactions && (w.Info[TxnCommitted] == 0 || w.Info[TxnAborted] == 0):
			why = append(why, fmt.Sprintf("workload transactions: %d committed and %d aborted: both are needed", w.Info[TxnCommitted], w.Info[TxnAborted]))
		case name == WorkloadTiered && w.Info["earliest_local_max"] == 0:
			why = append(why, "workload tiered: no segment left the local log (earliest local offset 0 everywhere)")
		}
	}
	if p := r.ZoneLocal.problem(); p != "" {
		why = append(why, p)
	}
	if !r.Live {
		why = append(why, fmt.Sprintf("the cluster did not serve produce and consume within %gs after healing: %s", r.LivenessBoundS, r.LivenessError))
	}
	r.OK = len(why) == 0
	r.Reason = strings.Join(why, "; ")
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
