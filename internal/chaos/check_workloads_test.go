package chaos

import (
	"cmp"
	"slices"
	"strings"
	"testing"
)

// Each checker gets a healthy synthetic history it must pass, then one
// mutation per violation it must catch, with the finding naming it.

var gtp = TP{"chaos-0", 0}

// healthyGroups: offsets 0-3 acknowledged; member a read 0-1 and
// committed 2, left; member b started at 2, read 2-3, committed 4; the
// final committed offset is 4.
func healthyGroups() (GroupsHistory, []Ack, map[TP]int64) {
	acks := []Ack{{gtp, 0, "p0-0"}, {gtp, 1, "p1-0"}, {gtp, 2, "p0-1"}, {gtp, 3, "p1-1"}}
	g := GroupsHistory{
		Deliveries: []GroupDelivery{{"a", gtp, 0, "p0-0"}, {"a", gtp, 1, "p1-0"}, {"b", gtp, 2, "p0-1"}, {"b", gtp, 3, "p1-1"},
			{"b", gtp, 3, "p1-1"}}, // delivered twice: at least once allows it
		Commits: []GroupCommit{
			{Member: "a", Generation: 1, TP: gtp, Offset: 2, SentS: 1, AckS: 1.1},
			{Member: "b", Generation: 2, TP: gtp, Offset: 4, SentS: 2, AckS: 2.1},
		},
		Final:      map[TP]int64{gtp: 4},
		FinalS:     10,
		Projected:  map[TP]int64{gtp: 4},
		ProjectedS: 11,
	}
	return g, acks, map[TP]int64{gtp: 4}
}

func TestCheckGroups(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(g *GroupsHistory, acks *[]Ack, hwm map[TP]int64)
		want   string // "" : healthy
	}{
		{"healthy", func(*GroupsHistory, *[]Ack, map[TP]int64) {}, ""},
		{"concurrent commits may land in any order", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			// b's commit was sent before a's was acknowledged: no order.
			g.Commits[1].SentS = 1.05
			g.Commits[0], g.Commits[1] = g.Commits[1], g.Commits[0]
			g.Commits[0].Offset, g.Commits[1].Offset = 2, 2
		}, ""},
		{"commit goes backwards", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Commits = append(g.Commits, GroupCommit{Member: "c", Generation: 3, TP: gtp, Offset: 2, SentS: 3, AckS: 3.1})
		}, "committed 2 at t=3.00s after b (generation 2) had 4 acknowledged"},
		{"final offset below an acknowledged commit (lost commit)", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Final[gtp] = 2
		}, "final offset fetch (generation -1) committed 2"},
		{"commit past the high watermark", func(g *GroupsHistory, _ *[]Ack, hwm map[TP]int64) {
			hwm[gtp] = 3
		}, "past the final high watermark 3"},
		{"commit of what nobody consumed", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Deliveries = g.Deliveries[:3]
		}, "committed 4, but offset 3 was delivered to no member"},
		{"acknowledged record below the commit never delivered (gap)", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Deliveries = g.Deliveries[1:]
		}, `offset 0 "p0-0" (acknowledged) is below the committed offset 4 but was delivered to no member`},
		{"another value delivered at an acknowledged offset", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Deliveries[2].Value = "p9-9"
		}, `offset 2: delivered [p9-9], acknowledged "p0-1"`},
		{"no projection read (nothing committed, or an older history)", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Projected = nil
		}, ""},
		{"__consumer_offsets holds a stale offset", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Projected[gtp] = 2
		}, "__consumer_offsets holds 2 for the group at t=11.00s (-1: nothing), its committed offset is 4"},
		{"__consumer_offsets lacks a partition", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Projected[gtp] = -1
		}, "__consumer_offsets holds -1"},
		{"__consumer_offsets holds a partition the group has no offset for", func(g *GroupsHistory, _ *[]Ack, _ map[TP]int64) {
			g.Projected[TP{"chaos-1", 0}] = 7
		}, "chaos-1/0: __consumer_offsets holds 7 for the group at t=11.00s (-1: nothing), its committed offset is -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, acks, hwm := healthyGroups()
			tc.mutate(&g, &acks, hwm)
			c, findings := CheckGroups(g, acks, hwm)
			expect(t, c, findings, tc.want)
		})
	}
	if c, _ := CheckGroups(healthyGroups()); c.Checked != 2+4+1 {
		t.Fatalf("checked %d, want the 2 commits, the 4 records below the committed offset and the projected partition", c.Checked)
	}
}

// expect checks one checker's outcome: no violation when want is "",
// else at least one finding containing want.
func expect(t *testing.T, c WorkloadCount, findings []string, want string) {
	t.Helper()
	if want == "" {
		if c.Violations != 0 || len(findings) != 0 {
			t.Fatalf("healthy history: %d violations: %v", c.Violations, findings)
		}
		return
	}
	if c.Violations == 0 {
		t.Fatalf("violation not caught (want %q)", want)
	}
	for _, f := range findings {
		if strings.Contains(f, want) {
			return
		}
	}
	t.Fatalf("findings %q do not name %q", findings, want)
}

var (
	xtp0 = TP{txnTopic, 0}
	xtp1 = TP{txnTopic, 1}
)

// healthyTxns: x1 committed on two partitions, x2 aborted, x3 unknown and
// (as it turned out) not committed; the fence committed; the reads saw
// x1 after its commit was sent, and the final read has x1 and the fence.
func healthyTxns() TxnHistory {
	return TxnHistory{
		Txns: []Txn{
			{ID: "x1", Outcome: TxnCommitted, Values: []string{"x1-0", "x1-1"}, Acks: []Ack{{xtp0, 0, "x1-0"}, {xtp1, 0, "x1-1"}}, EndS: 2},
			{ID: "x2", Outcome: TxnAborted, Values: []string{"x2-0", "x2-1"}, Acks: []Ack{{xtp0, 2, "x2-0"}, {xtp1, 2, "x2-1"}}, EndS: 3},
			{ID: "x3", Outcome: TxnUnknown, Values: []string{"x3-0", "x3-1"}, EndS: 4},
			{ID: "fence-0", Outcome: TxnCommitted, Values: []string{"fence-0-0", "fence-0-1"}, Acks: []Ack{{xtp0, 6, "fence-0-0"}, {xtp1, 6, "fence-0-1"}}, EndS: 9},
		},
		Reads: []TxnRead{{xtp0, 0, "x1-0", 2.5}, {xtp1, 0, "x1-1", 2.6}},
		Final: []TxnRead{{xtp0, 0, "x1-0", 10}, {xtp0, 6, "fence-0-0", 10}, {xtp1, 0, "x1-1", 10}, {xtp1, 6, "fence-0-1", 10}},
		// Complete: the final read reached the fence.
		Complete: true,
		// __transaction_state agrees with DescribeTransactions.
		Described:  map[string]string{"chaos-txn-0": "CompleteCommit pid=5 epoch=2", "chaos-txn-1": ""},
		Projected:  map[string]string{"chaos-txn-0": "CompleteCommit pid=5 epoch=2", "chaos-txn-1": ""},
		ProjectedS: 12,
	}
}

func TestCheckTransactions(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *TxnHistory)
		want   string
	}{
		{"healthy", func(*TxnHistory) {}, ""},
		{"unknown outcome that committed, whole", func(h *TxnHistory) {
			h.Final = append(h.Final, TxnRead{xtp0, 4, "x3-0", 10}, TxnRead{xtp1, 4, "x3-1", 10})
			sortReads(h.Final)
		}, ""},
		{"aborted record read during the run", func(h *TxnHistory) {
			h.Reads = append(h.Reads, TxnRead{xtp0, 2, "x2-0", 3.5})
		}, `read_committed read "x2-0" of aborted transaction x2`},
		{"aborted record in the final read", func(h *TxnHistory) {
			h.Final = append(h.Final, TxnRead{xtp1, 2, "x2-1", 10})
			sortReads(h.Final)
		}, `read_committed read "x2-1" of aborted transaction x2`},
		{"committed record missing", func(h *TxnHistory) {
			h.Final = h.Final[1:]
		}, `"x1-0" of committed transaction x1 missing from the final read`},
		{"committed record at another offset", func(h *TxnHistory) {
			h.Final[0].Offset = 1
		}, `"x1-0" of committed transaction x1 acknowledged at chaos-txn/0 offset 0, read at chaos-txn/0 offset 1`},
		{"not all or nothing", func(h *TxnHistory) {
			h.Final = append(h.Final, TxnRead{xtp0, 4, "x3-0", 10})
			sortReads(h.Final)
		}, "transaction x3 (unknown): 1 of its 2 records in the final read"},
		{"read before the commit was sent (past the LSO)", func(h *TxnHistory) {
			h.Reads[0].S = 1.5
		}, "before transaction x1 was ended at t=2.00s"},
		{"read during the run of a transaction that never committed", func(h *TxnHistory) {
			h.Reads = append(h.Reads, TxnRead{xtp0, 4, "x3-0", 5})
		}, `read "x3-0" of transaction x3 (unknown) during the run, absent from the final read`},
		{"fence never reached (hanging transaction)", func(h *TxnHistory) {
			h.Complete = false
			h.Final = h.Final[:1]
		}, "did not reach the fence"},
		{"record read twice", func(h *TxnHistory) {
			h.Final = append(h.Final, TxnRead{xtp1, 7, "x1-1", 10})
		}, `"x1-1" read twice`},
		{"__transaction_state behind the store", func(h *TxnHistory) {
			h.Projected["chaos-txn-0"] = "Ongoing pid=5 epoch=2"
		}, `chaos-txn-0: __transaction_state holds "Ongoing pid=5 epoch=2" at t=12.00s, DescribeTransactions answers "CompleteCommit pid=5 epoch=2"`},
		{"__transaction_state missing an id", func(h *TxnHistory) {
			h.Projected["chaos-txn-0"] = ""
		}, `chaos-txn-0: __transaction_state holds ""`},
		{"__transaction_state holding an id the store does not", func(h *TxnHistory) {
			h.Projected["chaos-txn-1"] = "Empty pid=9 epoch=0"
		}, `chaos-txn-1: __transaction_state holds "Empty pid=9 epoch=0"`},
		{"phantom record", func(h *TxnHistory) {
			h.Reads = append(h.Reads, TxnRead{xtp0, 9, "zz", 5})
		}, `read "zz", which no transaction wrote`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := healthyTxns()
			tc.mutate(&h)
			c, findings := CheckTransactions(h)
			expect(t, c, findings, tc.want)
		})
	}
}

// sortReads orders reads by partition and offset, as a final read has them.
func sortReads(rs []TxnRead) {
	slices.SortFunc(rs, func(a, b TxnRead) int {
		if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
			return c
		}
		return cmp.Compare(a.Offset, b.Offset)
	})
}

var ctp = TP{compactTopic, 0}

// healthyCompacted: key a written 3 times (the last acknowledged c2),
// key b twice (c3 acknowledged, c4 sent later and not acknowledged, and
// it landed); the cleaner removed c0 and c1.
func healthyCompacted() CompactHistory {
	return CompactHistory{
		Writes: []CompactWrite{
			{ctp, "a", "c0", 0, true, 0}, {ctp, "a", "c1", 1, true, 1}, {ctp, "a", "c2", 2, true, 2},
			{ctp, "b", "c3", 3, true, 3}, {ctp, "b", "c4", 4, false, 0},
		},
		Final:    []CompactRead{{ctp, 2, "a", "c2"}, {ctp, 3, "b", "c3"}, {ctp, 4, "b", "c4"}},
		Complete: true,
	}
}

func TestCheckCompacted(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *CompactHistory)
		want   string
	}{
		{"healthy", func(*CompactHistory) {}, ""},
		{"the unacknowledged later write never landed", func(h *CompactHistory) { h.Final = h.Final[:2] }, ""},
		{"latest acknowledged value lost (an older one survives)", func(h *CompactHistory) {
			h.Final = []CompactRead{{ctp, 1, "a", "c1"}, {ctp, 3, "b", "c3"}}
		}, `key "a": the final read ends with "c1" (offset 1), not its last acknowledged value "c2" (offset 2)`},
		{"key lost", func(h *CompactHistory) { h.Final = h.Final[1:] }, `key "a": absent from the final read`},
		{"offsets not increasing", func(h *CompactHistory) {
			h.Final[1], h.Final[2] = h.Final[2], h.Final[1]
		}, "offset 3 after 4"},
		{"acknowledged record at another offset", func(h *CompactHistory) { h.Final[0].Offset = 1 }, `"c2" acknowledged at offset 2, read at 1`},
		{"phantom value", func(h *CompactHistory) {
			h.Final = append(h.Final, CompactRead{ctp, 5, "a", "c99"})
		}, `key "a" value "c99" was never written there`},
		{"value read twice", func(h *CompactHistory) {
			h.Final = append(h.Final, CompactRead{ctp, 6, "b", "c4"})
		}, `"c4" read twice`},
		{"final read incomplete", func(h *CompactHistory) { h.Complete = false }, "did not reach the high watermark"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := healthyCompacted()
			tc.mutate(&h)
			c, findings := CheckCompacted(h)
			expect(t, c, findings, tc.want)
		})
	}
	c, _ := CheckCompacted(healthyCompacted())
	if c.Info["written"] != 4 || c.Info["read"] != 3 {
		t.Fatalf("info %v: want 4 acknowledged written, 3 read", c.Info)
	}
}

var (
	ttp0 = TP{tieredTopic, 0}
	ttp1 = TP{tieredTopic, 1}
)

// healthyTiered: two partitions of 3 records each (offset 2 of ttp1 not
// acknowledged), a pass during the run that read ttp0 whole and ttp1's
// first record, and the final read.
func healthyTiered() TierHistory {
	h := TierHistory{
		Acks:          []Ack{{ttp0, 0, "y0"}, {ttp0, 1, "y2"}, {ttp0, 2, "y4"}, {ttp1, 0, "y1"}, {ttp1, 1, "y3"}},
		End:           map[TP]int64{ttp0: 3, ttp1: 3},
		EarliestLocal: map[TP]int64{ttp0: 2, ttp1: 0},
	}
	h.Reads = []TierRead{{0, ttp0, 0, "y0"}, {0, ttp0, 1, "y2"}, {0, ttp0, 2, "y4"}, {0, ttp1, 0, "y1"},
		{-1, ttp0, 0, "y0"}, {-1, ttp0, 1, "y2"}, {-1, ttp0, 2, "y4"}, {-1, ttp1, 0, "y1"}, {-1, ttp1, 1, "y3"}, {-1, ttp1, 2, "y5"}}
	return h
}

func TestCheckTiered(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *TierHistory)
		want   string
	}{
		{"healthy", func(*TierHistory) {}, ""},
		{"a pass starts past offset 0 (earliest hid the tier)", func(h *TierHistory) {
			h.Reads = append([]TierRead{{1, ttp0, 2, "y4"}}, h.Reads...)
		}, "(pass 1): offset 2 where 0 was next"},
		{"a tier read skips offsets", func(h *TierHistory) {
			h.Reads = append(h.Reads[:1], h.Reads[2:]...)
		}, "(pass 0): offset 2 where 1 was next"},
		{"the final read skips an acknowledged record", func(h *TierHistory) {
			h.Reads = append(h.Reads[:5], h.Reads[6:]...)
		}, `offset 1 "y2" (acknowledged) read 0 times`},
		{"the final read repeats a record", func(h *TierHistory) {
			h.Reads = append(h.Reads, TierRead{-1, ttp1, 1, "y3"})
		}, `offset 1 "y3" (acknowledged) read 2 times`},
		{"the final read stops short", func(h *TierHistory) {
			h.Reads = h.Reads[:len(h.Reads)-1]
		}, "ended at 2, the high watermark is 3"},
		{"another value at an acknowledged offset", func(h *TierHistory) {
			h.Reads[3].Value = "y9"
		}, `read "y9", acknowledged "y1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := healthyTiered()
			tc.mutate(&h)
			c, findings := CheckTiered(h)
			expect(t, c, findings, tc.want)
		})
	}
	if c, _ := CheckTiered(healthyTiered()); c.Info["earliest_local_max"] != 2 {
		t.Fatalf("info %v: want earliest_local_max 2", c.Info)
	}
}
