package chaos

import (
	"strings"
	"testing"
)

// replica builds a ReplicaLog whose bytes stand for its records (the
// checker compares bytes for divergence, records for everything else).
func replica(broker int32, end int64, recs ...Rec) ReplicaLog {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.Value + ";")
	}
	return ReplicaLog{Broker: broker, Bytes: []byte(b.String()), Records: recs, End: end}
}

func recs(values ...string) []Rec {
	out := make([]Rec, len(values))
	for i, v := range values {
		out[i] = Rec{Offset: int64(i), Value: v}
	}
	return out
}

var tp0 = TP{"t", 0}

// healthy is a history every check passes: three identical replicas, two
// acknowledged records, reads of both.
func healthy() History {
	log := recs("p0-0", "p1-0", "p0-1")
	return History{
		Acks: []Ack{{tp0, 0, "p0-0"}, {tp0, 2, "p0-1"}},
		Observations: []Observation{
			{tp0, 0, "p0-0", 2}, {tp0, 1, "p1-0", 3}, {tp0, 2, "p0-1", 1},
		},
		HWM:      map[TP]int64{tp0: 3},
		Replicas: map[TP][]ReplicaLog{tp0: {replica(1, 3, log...), replica(2, 3, log...), replica(3, 3, log...)}},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *History)
		want   func(v Verdict) bool
		finds  string // a finding must contain this
	}{
		{"healthy", func(*History) {}, func(v Verdict) bool { return v.OK() && v.Acked == 2 && v.Consumed == 3 }, ""},
		{"unacknowledged record absent is fine", func(h *History) {
			// p1-0 was never acknowledged; logs without it, HWM 2.
			l := []Rec{{0, "p0-0"}, {1, "p0-1"}}
			h.Acks = []Ack{{tp0, 0, "p0-0"}, {tp0, 1, "p0-1"}}
			h.Observations = nil
			h.HWM[tp0] = 2
			h.Replicas[tp0] = []ReplicaLog{replica(1, 2, l...), replica(2, 2, l...), replica(3, 2, l...)}
		}, func(v Verdict) bool { return v.OK() }, ""},
		{"lost on one replica", func(h *History) {
			l := recs("p0-0", "p1-0")
			h.Replicas[tp0][1] = replica(2, 2, l...)
		}, func(v Verdict) bool { return v.Lost == 1 && v.DivergentReplicas == 1 && !v.OK() }, `"p0-1" (acknowledged) missing from replica 2`},
		{"lost everywhere", func(h *History) {
			l := recs("p0-0", "p1-0", "p1-1")
			h.Observations = h.Observations[:2]
			h.Replicas[tp0] = []ReplicaLog{replica(1, 3, l...), replica(2, 3, l...), replica(3, 3, l...)}
		}, func(v Verdict) bool { return v.Lost == 3 && v.DivergentReplicas == 0 }, "lost"},
		{"acknowledged at another offset", func(h *History) {
			h.Acks[1].Offset = 1
		}, func(v Verdict) bool { return v.Misplaced == 3 && !v.OK() }, "acknowledged at offset 1"},
		{"duplicated", func(h *History) {
			l := recs("p0-0", "p1-0", "p0-1", "p0-1")
			h.HWM[tp0] = 4
			h.Replicas[tp0] = []ReplicaLog{replica(1, 4, l...), replica(2, 4, l...), replica(3, 4, l...)}
		}, func(v Verdict) bool { return v.Duplicated == 3 && !v.OK() }, `"p0-1" at offsets [2 3]`},
		{"out of order", func(h *History) {
			l := recs("p0-1", "p1-0", "p0-0")
			h.Acks = nil
			h.Observations = nil
			h.Replicas[tp0] = []ReplicaLog{replica(1, 3, l...), replica(2, 3, l...), replica(3, 3, l...)}
		}, func(v Verdict) bool { return v.OutOfOrder == 3 && !v.OK() }, "after sequence 1"},
		{"phantom read: another record at that offset", func(h *History) {
			h.Observations = append(h.Observations, Observation{tp0, 1, "p2-7", 3})
		}, func(v Verdict) bool { return v.PhantomReads == 1 && !v.OK() }, `the final log has "p1-0" there`},
		{"phantom read: offset beyond the final log", func(h *History) {
			h.Observations = append(h.Observations, Observation{tp0, 3, "p2-7", 2})
		}, func(v Verdict) bool { return v.PhantomReads == 1 }, "no such offset"},
		{"divergent replica (same length)", func(h *History) {
			l := recs("p0-0", "p2-5", "p0-1")
			h.Replicas[tp0][2] = replica(3, 3, l...)
		}, func(v Verdict) bool { return v.DivergentReplicas == 1 && v.Lost == 0 && v.PhantomReads == 0 && !v.OK() },
			`replica 3 differs from replica 1 below the high watermark 3: offset 1 has "p2-5" vs "p1-0"`},
		{"divergent bytes, same records", func(h *History) {
			r := h.Replicas[tp0][0]
			r.Bytes = append([]byte("x"), r.Bytes...)
			h.Replicas[tp0][0] = r
		}, func(v Verdict) bool { return v.DivergentReplicas == 1 }, "replica 1 differs from replica 2"},
		{"short replica", func(h *History) {
			h.Replicas[tp0][0] = replica(1, 2, recs("p0-0", "p1-0")...)
		}, func(v Verdict) bool { return v.DivergentReplicas == 1 && v.Lost == 1 }, "log ends at 2, below the high watermark 3"},
		{"unreadable replica", func(h *History) {
			h.Replicas[tp0][1] = ReplicaLog{Broker: 2, Err: "corrupt"}
		}, func(v Verdict) bool { return v.DivergentReplicas == 1 && v.Lost == 0 }, "log unreadable: corrupt"},
		{"offset gap", func(h *History) {
			l := []Rec{{0, "p0-0"}, {1, "p1-0"}, {3, "p0-1"}}
			h.Acks[1].Offset = 3
			h.HWM[tp0] = 4
			h.Replicas[tp0] = []ReplicaLog{replica(1, 4, l...), replica(2, 4, l...), replica(3, 4, l...)}
			h.Observations = nil
		}, func(v Verdict) bool { return v.OffsetGaps == 3 && !v.OK() }, "offset 3 follows 1"},
		{"hwm regression", func(h *History) {
			h.HWMRegressions = []HWMRegression{{TP: tp0, Broker: 2, Incarnation: 1, From: 10, To: 7, AtS: 3}, {TP: tp0, Broker: 2, Incarnation: 1, From: 10, To: 9, AtS: 4.5}}
		}, func(v Verdict) bool { return v.HWMRegressions == 2 && len(v.Findings) == 1 && !v.OK() },
			"t/0 on broker 2 (incarnation 1): high watermark 7 after 10 at t=3.0s; fell 2 times until t=4.5s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := healthy()
			tc.mutate(&h)
			v := Check(h)
			if !tc.want(v) {
				t.Fatalf("verdict %+v", v)
			}
			if tc.finds != "" && !strings.Contains(strings.Join(v.Findings, "\n"), tc.finds) {
				t.Fatalf("no finding mentions %q:\n%s", tc.finds, strings.Join(v.Findings, "\n"))
			}
		})
	}
}

func TestDecodeRecordsRejectsCorruption(t *testing.T) {
	if _, err := decodeRecords([]byte("not a batch at all, but long enough to look like one......................")); err == nil {
		t.Fatal("garbage decoded without error")
	}
}
