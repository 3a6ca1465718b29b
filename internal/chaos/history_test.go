package chaos

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// writeHistory writes h and res as a run would: every operation, then
// the final lines.
func writeHistory(t *testing.T, h History, res *Result) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := createHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range h.Acks {
		w.write(Event{Op: OpProduce, Topic: a.Topic, Partition: a.Partition, Offset: a.Offset, Value: a.Value})
	}
	w.write(Event{Op: OpProduce, Topic: "t", Value: "p9-0", Error: "NOT_ENOUGH_REPLICAS"}) // failed: not an ack
	w.write(Event{Op: OpFault, Kind: KindKill, What: "broker 2"})
	for _, o := range h.Observations {
		w.write(Event{Op: OpRead, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Value: o.Value, Broker: o.Broker, Incarnation: 1})
	}
	for _, r := range h.HWMRegressions {
		w.write(Event{T: r.AtS, Op: OpHWMRegression, Topic: r.Topic, Partition: r.Partition, Broker: r.Broker, Incarnation: r.Incarnation, From: r.From, To: r.To})
	}
	w.write(Event{Op: OpHeal, Kind: KindKill, What: "broker 2"})
	writeWorkloads(w, h)
	res.judgeHistory(h)
	if err := w.final(h, res); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeWorkloads writes the other workloads' lines as workloads.go does.
func writeWorkloads(w *historyWriter, h History) {
	if g := h.Groups; g != nil {
		for _, d := range g.Deliveries {
			w.write(d.event())
		}
		for _, c := range g.Commits {
			w.write(c.event())
		}
		for _, tp := range sortedTPs(g.Final) {
			w.write(groupFinalEvent(tp, g.Final[tp], g.FinalS))
		}
	}
	if x := h.Txn; x != nil {
		for i := range x.Txns {
			for _, e := range x.Txns[i].events() {
				w.write(e)
			}
		}
		for _, r := range x.Reads {
			w.write(r.event(OpTxnRead))
		}
		for _, r := range x.Final {
			w.write(r.event(OpTxnFinalRead))
		}
		w.write(Event{Op: OpTxnFinal, Complete: x.Complete})
		for _, e := range txnProjectedEvents(slices.Sorted(maps.Keys(x.Projected)), x.Described, x.Projected, x.ProjectedErr, x.ProjectedS) {
			w.write(e)
		}
	}
	if c := h.Compact; c != nil {
		for _, cw := range c.Writes {
			var err error
			if !cw.Acked {
				err = errors.New("REQUEST_TIMED_OUT")
			}
			w.write(cw.event(err))
		}
		for _, r := range c.Final {
			w.write(r.event())
		}
		w.write(Event{Op: OpCompactFinal, Complete: c.Complete})
	}
	if t := h.Tier; t != nil {
		for _, a := range t.Acks {
			w.write(tierProduceEvent(a))
		}
		for _, r := range t.Reads {
			w.write(r.event())
		}
		for _, tp := range sortedTPs(t.End) {
			w.write(tierEndEvent(tp, t.End[tp], t.EarliestLocal[tp]))
		}
	}
}

// withWorkloads adds the other workloads' healthy synthetic histories
// (check_workloads_test.go) to h.
func withWorkloads(h *History) {
	// The group reads healthy()'s partition, as the real one reads the
	// idempotent producers' topics.
	h.Groups = &GroupsHistory{
		Deliveries: []GroupDelivery{{"a", tp0, 0, "p0-0"}, {"a", tp0, 1, "p1-0"}, {"b", tp0, 2, "p0-1"}},
		Commits: []GroupCommit{{Member: "a", Generation: 1, TP: tp0, Offset: 2, SentS: 1, AckS: 1.1},
			{Member: "b", Generation: 2, TP: tp0, Offset: 3, SentS: 2, AckS: 2.1}},
		Final: map[TP]int64{tp0: 3}, FinalS: 10,
	}
	x, c, t := healthyTxns(), healthyCompacted(), healthyTiered()
	h.Txn, h.Compact, h.Tier = &x, &c, &t
}

// TestCheckHistory: a history file judged offline gives the run's
// verdict, ok and reason, healthy or not; a history without its result
// line is refused.
func TestCheckHistory(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *History, r *Result)
		ok     bool
	}{
		{"healthy", func(*History, *Result) {}, true},
		{"lost on one replica", func(h *History, _ *Result) { h.Replicas[tp0][1] = replica(2, 2, recs("p0-0", "p1-0")...) }, false},
		{"divergent bytes", func(h *History, _ *Result) {
			r := h.Replicas[tp0][0]
			r.Bytes = append([]byte("x"), r.Bytes...)
			h.Replicas[tp0][0] = r
		}, false},
		{"phantom read and hwm regression", func(h *History, _ *Result) {
			h.Observations = append(h.Observations, Observation{tp0, 1, "p2-7", 3})
			h.HWMRegressions = []HWMRegression{{TP: tp0, Broker: 2, Incarnation: 1, From: 10, To: 7, AtS: 3}}
		}, false},
		{"too few acknowledged", func(_ *History, r *Result) { r.MinAcked = 3 }, false},
		{"not live", func(_ *History, r *Result) { r.Live, r.LivenessError = false, "timeout" }, false},
		{"every workload, healthy", func(h *History, _ *Result) { withWorkloads(h) }, true},
		{"a group commit goes backwards", func(h *History, _ *Result) {
			withWorkloads(h)
			h.Groups.Commits = append(h.Groups.Commits, GroupCommit{Member: "c", Generation: 3, TP: tp0, Offset: 2, SentS: 3, AckS: 3.1})
		}, false},
		{"an aborted transaction read", func(h *History, _ *Result) {
			withWorkloads(h)
			h.Txn.Reads = append(h.Txn.Reads, TxnRead{xtp0, 2, "x2-0", 3.5})
		}, false},
		{"a compacted key's latest value lost", func(h *History, _ *Result) {
			withWorkloads(h)
			h.Compact.Final = h.Compact.Final[1:]
		}, false},
		{"__transaction_state behind DescribeTransactions", func(h *History, _ *Result) {
			withWorkloads(h)
			h.Txn.Projected["chaos-txn-0"] = ""
		}, false},
		{"a tier read skips", func(h *History, _ *Result) {
			withWorkloads(h)
			h.Tier.Reads = append(h.Tier.Reads[:1], h.Tier.Reads[2:]...)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := healthy()
			res := &Result{Faults: map[string]int{KindKill: 1}, FaultErrors: map[string]int{}, Schedule: []Fault{{Kind: KindKill}},
				MinAcked: 1, Live: true}
			tc.mutate(&h, res)
			path := writeHistory(t, h, res)
			want := *res
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := CheckHistory(f)
			if err != nil {
				t.Fatal(err)
			}
			if got.OK != tc.ok || got.OK != want.OK || got.Reason != want.Reason {
				t.Fatalf("offline ok %v reason %q; the run's ok %v reason %q; want ok %v", got.OK, got.Reason, want.OK, want.Reason, tc.ok)
			}
			gv, wv := got.Verdict, want.Verdict
			gv.Findings, wv.Findings = nil, nil
			if !reflect.DeepEqual(gv, wv) || !reflect.DeepEqual(got.Workloads, want.Workloads) {
				t.Fatalf("offline verdict %+v %v, the run's %+v %v", gv, got.Workloads, wv, want.Workloads)
			}
		})
	}
	t.Run("no result line", func(t *testing.T) {
		_, err := CheckHistory(strings.NewReader(`{"t":1,"op":"produce","topic":"t","offset":3,"value":"p0-1"}` + "\n"))
		if err == nil || !strings.Contains(err.Error(), "no result line") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unknown op", func(t *testing.T) {
		_, err := CheckHistory(strings.NewReader(`{"t":1,"op":"meteor"}` + "\n"))
		if err == nil || !strings.Contains(err.Error(), `unknown op "meteor"`) {
			t.Fatalf("err %v", err)
		}
	})
}
