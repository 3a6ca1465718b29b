package chaos

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Ack is a record the cluster acknowledged (acks=all) to a producer.
type Ack struct {
	TP
	Offset int64
	Value  string
}

// Observation is a record a consumer read from a broker.
type Observation struct {
	TP
	Offset int64
	Value  string
	Broker int32
}

// Rec is a record of a replica's log.
type Rec struct {
	Offset int64  `json:"o"`
	Value  string `json:"v"`
}

// ReplicaLog is one replica's final log of a partition, read from its
// data directory after a clean shutdown, up to the partition's high
// watermark.
type ReplicaLog struct {
	Broker int32
	// Bytes are the record batches up to the high watermark, as stored.
	Bytes []byte
	// Records are the records in Bytes.
	Records []Rec
	// End is the replica's log end offset.
	End int64
	// Err is why the log could not be read (it counts as divergent).
	Err string
}

// HWMRegression is a fetch response whose high watermark was below one an
// earlier response of the same broker incarnation reported.
type HWMRegression struct {
	TP
	Broker      int32
	Incarnation int
	From, To    int64
	// AtS is when the response arrived, in seconds from the start.
	AtS float64
}

// History is everything the checker judges.
type History struct {
	Acks         []Ack
	Observations []Observation
	// HWM is each partition's final high watermark.
	HWM map[TP]int64
	// Replicas are each partition's replica logs.
	Replicas       map[TP][]ReplicaLog
	HWMRegressions []HWMRegression
	// The other workloads' histories (check_workloads.go); nil: the
	// workload did not run and has no entry in the verdict.
	Groups  *GroupsHistory
	Txn     *TxnHistory
	Compact *CompactHistory
	Tier    *TierHistory
}

// Verdict is what the checker found. Findings describes the first
// problems of each kind precisely (partition, offset, replica, value).
type Verdict struct {
	Acked             int `json:"acked"`
	Lost              int `json:"lost"`
	Misplaced         int `json:"misplaced"`
	Duplicated        int `json:"duplicated"`
	OutOfOrder        int `json:"out_of_order"`
	PhantomReads      int `json:"phantom_reads"`
	DivergentReplicas int `json:"divergent_replicas"`
	OffsetGaps        int `json:"offset_gaps"`
	HWMRegressions    int `json:"hwm_regressions"`
	Consumed          int `json:"consumed"`
	// WorkloadViolations sums the violations of the groups, transactions,
	// compacted and tiered workloads (each in Result.Workloads).
	WorkloadViolations int      `json:"workload_violations"`
	Findings           []string `json:"findings,omitempty"`
	// extra are those workloads' counts, by name.
	extra map[string]WorkloadCount
}

// OK reports whether the history passed every check.
func (v Verdict) OK() bool {
	return v.Lost == 0 && v.Misplaced == 0 && v.Duplicated == 0 && v.OutOfOrder == 0 && v.PhantomReads == 0 &&
		v.DivergentReplicas == 0 && v.OffsetGaps == 0 && v.HWMRegressions == 0 && v.WorkloadViolations == 0
}

// maxFindingsPerKind bounds the findings listed per kind (counts are exact).
const maxFindingsPerKind = 10

// Check judges a history:
//
//   - lost: an acknowledged record absent from a replica's log (counted
//     once per record and replica); misplaced: present, but at another
//     offset than the one acknowledged;
//   - duplicated: a value present more than once in a replica's log;
//   - out_of_order: one producer's records of a partition not in the
//     order it sent them (values are "<producer>-<sequence>");
//   - phantom_reads: a consumer read a record that is not at that offset
//     in the final log below the high watermark;
//   - divergent_replicas: replicas whose bytes up to the high watermark
//     differ from the majority's (or whose log could not be read, or ends
//     below the high watermark);
//   - offset_gaps: offsets that do not follow each other in a log;
//   - hwm_regressions: as recorded by the consumers.
func Check(h History) Verdict {
	v := Verdict{Acked: len(h.Acks), Consumed: len(h.Observations), HWMRegressions: len(h.HWMRegressions)}
	kinds := map[string]int{}
	find := func(kind, format string, args ...any) {
		kinds[kind]++
		if kinds[kind] <= maxFindingsPerKind {
			v.Findings = append(v.Findings, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	// One finding per partition and broker incarnation: a replica stuck
	// in a loop falls many times.
	type incKey struct {
		TP
		broker int32
		inc    int
	}
	var order []incKey
	falls := map[incKey][]HWMRegression{}
	for _, r := range h.HWMRegressions {
		k := incKey{r.TP, r.Broker, r.Incarnation}
		if falls[k] == nil {
			order = append(order, k)
		}
		falls[k] = append(falls[k], r)
	}
	for _, k := range order {
		rs := falls[k]
		first, last := rs[0], rs[len(rs)-1]
		find("hwm_regression", "%s on broker %d (incarnation %d): high watermark %d after %d at t=%.1fs; fell %d times until t=%.1fs",
			k.TP, k.broker, k.inc, first.To, first.From, first.AtS, len(rs), last.AtS)
	}

	tps := make([]TP, 0, len(h.Replicas))
	for tp := range h.Replicas {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})

	// reference[tp] is the majority log: offset -> value.
	reference := map[TP]map[int64]string{}
	// where[tp][broker][value] = offsets where the value is.
	where := map[TP]map[int32]map[string][]int64{}
	for _, tp := range tps {
		logs := h.Replicas[tp]
		hwm := h.HWM[tp]
		ref := majority(logs, hwm)
		reference[tp] = map[int64]string{}
		if ref >= 0 {
			for _, r := range logs[ref].Records {
				reference[tp][r.Offset] = r.Value
			}
		}
		where[tp] = map[int32]map[string][]int64{}
		for i, l := range logs {
			switch {
			case l.Err != "":
				v.DivergentReplicas++
				find("divergent", "%s replica %d: log unreadable: %s", tp, l.Broker, l.Err)
			case l.End < hwm:
				v.DivergentReplicas++
				find("divergent", "%s replica %d: log ends at %d, below the high watermark %d", tp, l.Broker, l.End, hwm)
			case ref >= 0 && i != ref && !bytes.Equal(l.Bytes, logs[ref].Bytes):
				v.DivergentReplicas++
				find("divergent", "%s replica %d differs from replica %d below the high watermark %d: %s",
					tp, l.Broker, logs[ref].Broker, hwm, firstDifference(l.Records, logs[ref].Records))
			}
			values := map[string][]int64{}
			next := int64(-1)
			lastSeq := map[string]int64{}
			for _, r := range l.Records {
				if next >= 0 && r.Offset != next {
					v.OffsetGaps++
					find("offset_gap", "%s replica %d: offset %d follows %d", tp, l.Broker, r.Offset, next-1)
				}
				next = r.Offset + 1
				values[r.Value] = append(values[r.Value], r.Offset)
				if len(values[r.Value]) == 2 {
					v.Duplicated++
					find("duplicated", "%s replica %d: %q at offsets %v", tp, l.Broker, r.Value, values[r.Value])
				}
				if prod, seq, ok := parseValue(r.Value); ok {
					if last, seen := lastSeq[prod]; seen && seq < last {
						v.OutOfOrder++
						find("out_of_order", "%s replica %d: %q at offset %d after sequence %d", tp, l.Broker, r.Value, r.Offset, last)
					}
					lastSeq[prod] = max(lastSeq[prod], seq)
				}
			}
			where[tp][l.Broker] = values
		}
	}

	for _, a := range h.Acks {
		logs := h.Replicas[a.TP]
		if len(logs) == 0 {
			v.Lost++
			find("lost", "%s offset %d %q: no replica log of the partition", a.TP, a.Offset, a.Value)
			continue
		}
		for _, l := range logs {
			if l.Err != "" {
				continue // counted as divergent
			}
			offs := where[a.TP][l.Broker][a.Value]
			switch {
			case len(offs) == 0:
				v.Lost++
				find("lost", "%s offset %d %q (acknowledged) missing from replica %d (log end %d, high watermark %d)",
					a.TP, a.Offset, a.Value, l.Broker, l.End, h.HWM[a.TP])
			case offs[0] != a.Offset:
				v.Misplaced++
				find("misplaced", "%s %q acknowledged at offset %d, replica %d has it at %v", a.TP, a.Value, a.Offset, l.Broker, offs)
			}
		}
	}

	for _, o := range h.Observations {
		ref := reference[o.TP]
		got, ok := ref[o.Offset]
		switch {
		case !ok:
			v.PhantomReads++
			find("phantom_read", "%s offset %d %q read from broker %d: no such offset in the final log below the high watermark %d",
				o.TP, o.Offset, o.Value, o.Broker, h.HWM[o.TP])
		case got != o.Value:
			v.PhantomReads++
			find("phantom_read", "%s offset %d %q read from broker %d: the final log has %q there", o.TP, o.Offset, o.Value, o.Broker, got)
		}
	}
	for kind, n := range kinds {
		if n > maxFindingsPerKind {
			v.Findings = append(v.Findings, fmt.Sprintf("%s: %d more not listed", kind, n-maxFindingsPerKind))
		}
	}
	v.checkWorkloads(h)
	return v
}

// checkWorkloads runs the checkers of the workloads h has a history of.
func (v *Verdict) checkWorkloads(h History) {
	add := func(name string, c WorkloadCount, findings []string) {
		if v.extra == nil {
			v.extra = map[string]WorkloadCount{}
		}
		v.extra[name] = c
		v.WorkloadViolations += c.Violations
		v.Findings = append(v.Findings, findings...)
	}
	if h.Groups != nil {
		c, f := CheckGroups(*h.Groups, h.Acks, h.HWM)
		add(WorkloadGroups, c, f)
	}
	if h.Txn != nil {
		c, f := CheckTransactions(*h.Txn)
		add(WorkloadTransactions, c, f)
	}
	if h.Compact != nil {
		c, f := CheckCompacted(*h.Compact)
		add(WorkloadCompacted, c, f)
	}
	if h.Tier != nil {
		c, f := CheckTiered(*h.Tier)
		add(WorkloadTiered, c, f)
	}
}

// majority returns the index of the readable replica log ending at or
// past hwm whose bytes most replicas share (ties: the first), or -1.
func majority(logs []ReplicaLog, hwm int64) int {
	best, bestVotes := -1, 0
	for i, l := range logs {
		if l.Err != "" || l.End < hwm {
			continue
		}
		votes := 0
		for _, m := range logs {
			if m.Err == "" && bytes.Equal(l.Bytes, m.Bytes) {
				votes++
			}
		}
		if votes > bestVotes {
			best, bestVotes = i, votes
		}
	}
	if best < 0 {
		// No replica reaches the high watermark: judge against the longest.
		for i, l := range logs {
			if l.Err == "" && (best < 0 || l.End > logs[best].End) {
				best = i
			}
		}
	}
	return best
}

// firstDifference describes where two record lists first differ.
func firstDifference(a, b []Rec) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("offset %d has %q vs %q (offset %d)", a[i].Offset, a[i].Value, b[i].Value, b[i].Offset)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d vs %d records", len(a), len(b))
	}
	return "same records, different bytes (batch boundaries, epochs or headers)"
}

// recordValue is the value of a producer's seq-th record.
func recordValue(producer int, seq int64) string { return fmt.Sprintf("p%d-%d", producer, seq) }

// parseValue splits a value made by recordValue.
func parseValue(v string) (producer string, seq int64, ok bool) {
	p, s, found := strings.Cut(v, "-")
	if !found {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return p, n, err == nil
}
