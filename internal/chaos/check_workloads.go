package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// The workloads beside the idempotent producers (workloads.go runs them),
// each with its history and its checker. A checker returns what it
// covered and how many violations it found; findings name the first ones
// precisely. Each is pure: `strata chaos check` runs it again on the
// history file.
const (
	WorkloadGroups       = "groups"
	WorkloadTransactions = "transactions"
	WorkloadCompacted    = "compacted"
	WorkloadTiered       = "tiered"
)

// ExtraWorkloads are the workloads a run must check (each needs
// checked > 0 to pass).
var ExtraWorkloads = []string{WorkloadGroups, WorkloadTransactions, WorkloadCompacted, WorkloadTiered}

// finder records findings of one workload, at most maxFindingsPerKind
// listed.
type finder struct {
	name     string
	n        int
	findings []string
}

func (f *finder) find(format string, args ...any) {
	f.n++
	if f.n <= maxFindingsPerKind {
		f.findings = append(f.findings, f.name+": "+fmt.Sprintf(format, args...))
	}
}

func (f *finder) done() []string {
	if f.n > maxFindingsPerKind {
		f.findings = append(f.findings, fmt.Sprintf("%s: %d more not listed", f.name, f.n-maxFindingsPerKind))
	}
	return f.findings
}

// GroupDelivery is a record a consumer-group member's poll returned.
type GroupDelivery struct {
	Member string
	TP
	Offset int64
	Value  string
}

// GroupCommit is one partition of an OffsetCommit the group coordinator
// acknowledged (the partition's error code 0): the member, its generation,
// the offset, and when the request was sent and its answer came (seconds
// from the start, one clock).
type GroupCommit struct {
	Member     string
	Generation int32
	TP
	Offset      int64
	SentS, AckS float64
}

// GroupsHistory is what the consumer-group workload saw. The group reads
// the idempotent producers' topics, so History.Acks and History.HWM
// describe its partitions.
type GroupsHistory struct {
	Deliveries []GroupDelivery
	Commits    []GroupCommit
	// Final are the group's committed offsets after its members left and
	// the cluster healed (OffsetFetch), per partition the group consumed;
	// FinalS is when they were read.
	Final  map[TP]int64
	FinalS float64
	// Projected are the group's offsets read back from __consumer_offsets
	// (the brokers' projection of the group store) after Final, per
	// partition of either (-1: none there); nil when not read (nothing
	// committed, or a history from before the projection).
	Projected  map[TP]int64
	ProjectedS float64
}

// CheckGroups judges the consumer groups:
//
//   - no committed offset goes backwards: a commit sent after another
//     was acknowledged (real-time order) has an offset at least as high,
//     and so has the final committed offset (a lost commit is one case);
//   - a committed offset never passes the log: it is at most the final
//     high watermark, and the record before it was delivered to a member
//     (nothing committed that nobody consumed);
//   - at least once: every acknowledged record below the final committed
//     offset of its partition was delivered to some member, with the
//     value acknowledged at that offset.
//   - the projection: after the run, __consumer_offsets holds exactly the
//     final committed offsets (no partition missing, stale or extra).
//
// checked counts the acknowledged commits and the acknowledged records
// below the final committed offsets. Info: commits, deliveries, and the
// generations and members that committed (several generations: the
// partitions really moved between members).
func CheckGroups(g GroupsHistory, acks []Ack, hwm map[TP]int64) (WorkloadCount, []string) {
	f := &finder{name: "groups"}
	checked := len(g.Commits)
	type to struct {
		TP
		off int64
	}
	delivered := map[to]map[string]bool{}
	for _, d := range g.Deliveries {
		k := to{d.TP, d.Offset}
		if delivered[k] == nil {
			delivered[k] = map[string]bool{}
		}
		delivered[k][d.Value] = true
	}
	byTP := map[TP][]GroupCommit{}
	for _, c := range g.Commits {
		byTP[c.TP] = append(byTP[c.TP], c)
	}
	for tp, off := range g.Final {
		byTP[tp] = append(byTP[tp], GroupCommit{Member: "final offset fetch", Generation: -1, TP: tp, Offset: off, SentS: g.FinalS, AckS: g.FinalS})
	}
	for _, tp := range sortedTPs(byTP) {
		cs := byTP[tp]
		// Monotonic: walk the commits in order of sending; before each,
		// take in every commit acknowledged earlier.
		bySent := slices.Clone(cs)
		slices.SortStableFunc(bySent, func(a, b GroupCommit) int { return cmp.Compare(a.SentS, b.SentS) })
		byAck := slices.Clone(cs)
		slices.SortStableFunc(byAck, func(a, b GroupCommit) int { return cmp.Compare(a.AckS, b.AckS) })
		i := 0
		var high *GroupCommit
		for _, c := range bySent {
			for ; i < len(byAck) && byAck[i].AckS < c.SentS; i++ {
				if high == nil || byAck[i].Offset > high.Offset {
					high = &byAck[i]
				}
			}
			if high != nil && c.Offset < high.Offset {
				f.find("%s: %s (generation %d) committed %d at t=%.2fs after %s (generation %d) had %d acknowledged at t=%.2fs",
					tp, c.Member, c.Generation, c.Offset, c.SentS, high.Member, high.Generation, high.Offset, high.AckS)
			}
		}
		for _, c := range cs {
			if end, ok := hwm[tp]; ok && c.Offset > end {
				f.find("%s: %s committed %d, past the final high watermark %d", tp, c.Member, c.Offset, end)
			}
			if c.Offset > 0 && len(delivered[to{tp, c.Offset - 1}]) == 0 && c.Generation >= 0 {
				f.find("%s: %s (generation %d) committed %d, but offset %d was delivered to no member", tp, c.Member, c.Generation, c.Offset, c.Offset-1)
			}
		}
	}
	if g.Projected != nil {
		for _, tp := range sortedTPs(g.Projected) {
			checked++
			final, ok := g.Final[tp]
			if !ok {
				final = -1
			}
			if got := g.Projected[tp]; got != final {
				f.find("%s: %s holds %d for the group at t=%.2fs (-1: nothing), its committed offset is %d", tp, "__consumer_offsets", got, g.ProjectedS, final)
			}
		}
	}
	for _, a := range acks {
		end, ok := g.Final[a.TP]
		if !ok || a.Offset >= end {
			continue
		}
		checked++
		got := delivered[to{a.TP, a.Offset}]
		switch {
		case len(got) == 0:
			f.find("%s offset %d %q (acknowledged) is below the committed offset %d but was delivered to no member", a.TP, a.Offset, a.Value, end)
		case !got[a.Value] || len(got) > 1:
			f.find("%s offset %d: delivered %v, acknowledged %q", a.TP, a.Offset, keys(got), a.Value)
		}
	}
	gens, members := map[int32]bool{}, map[string]bool{}
	for _, c := range g.Commits {
		gens[c.Generation], members[c.Member] = true, true
	}
	return WorkloadCount{Checked: checked, Violations: f.n, Info: map[string]int64{
		"commits": int64(len(g.Commits)), "deliveries": int64(len(g.Deliveries)), "generations": int64(len(gens)), "members": int64(len(members)),
	}}, f.done()
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Transaction outcomes (Txn.Outcome).
const (
	TxnCommitted = "committed" // EndTransaction(commit) answered success
	TxnAborted   = "aborted"   // EndTransaction(abort) answered success
	TxnUnknown   = "unknown"   // the end failed or was never answered
)

// Txn is one transaction of a transactional producer: its records'
// values (each unique in the run), the offsets the acknowledged ones got,
// the outcome, and when EndTransaction was sent (seconds from the start).
type Txn struct {
	ID      string
	Outcome string
	Values  []string
	Acks    []Ack
	EndS    float64
}

// TxnRead is a record a read_committed consumer read, and when.
type TxnRead struct {
	TP
	Offset int64
	Value  string
	S      float64
}

// TxnHistory is what the transactions workload saw: the transactions, the
// reads during the run, and the final read from offset 0 up to a fence
// (one more committed transaction, on every partition, after all the
// others ended); Complete is whether it reached the fence everywhere.
type TxnHistory struct {
	Txns     []Txn
	Reads    []TxnRead
	Final    []TxnRead
	Complete bool
	// Described is each transactional id's state after the run as
	// DescribeTransactions answers it, Projected as __transaction_state
	// holds it (read at ProjectedS; "": no record): "State pid=N
	// epoch=E".
	Described, Projected map[string]string
	ProjectedS           float64
	// ProjectedErr is why the last read of either failed ("": it did
	// not).
	ProjectedErr string
}

// CheckTransactions judges the transactional producers and read_committed
// consumers:
//
//   - the final read reached the fence on every partition (else a
//     transaction hangs open and pins the last stable offset);
//   - no record of an aborted transaction is read, ever;
//   - every record of a committed transaction is in the final read, at
//     the offset its produce was acknowledged with;
//   - atomicity: the final read has all of a transaction's records or
//     none (whatever its outcome, unknown included);
//   - no read past the last stable offset: no record read before its
//     transaction's EndTransaction was sent, and no record read during
//     the run that the final read does not have (its transaction did not
//     commit);
//   - the final read has each record once, offsets increasing.
//
// checked counts the transactions and the records read. Info: how many
// transactions committed, aborted, or ended unknown.
func CheckTransactions(h TxnHistory) (WorkloadCount, []string) {
	f := &finder{name: "transactions"}
	of := map[string]*Txn{}
	for i := range h.Txns {
		for _, v := range h.Txns[i].Values {
			of[v] = &h.Txns[i]
		}
	}
	if !h.Complete {
		f.find("the final read_committed read did not reach the fence transaction on every partition (a transaction hangs open, or the last stable offset is stuck)")
	}
	final := map[string]TxnRead{}
	last := map[TP]int64{}
	for _, r := range h.Final {
		if prev, ok := last[r.TP]; ok && r.Offset <= prev {
			f.find("%s: the final read has offset %d after %d", r.TP, r.Offset, prev)
		}
		last[r.TP] = r.Offset
		if _, dup := final[r.Value]; dup {
			f.find("%s: %q read twice in the final read (offsets %d and %d)", r.TP, r.Value, final[r.Value].Offset, r.Offset)
		}
		final[r.Value] = r
	}
	for _, r := range append(slices.Clone(h.Reads), h.Final...) {
		t := of[r.Value]
		switch {
		case t == nil:
			f.find("%s offset %d: read %q, which no transaction wrote", r.TP, r.Offset, r.Value)
		case t.Outcome == TxnAborted:
			f.find("%s offset %d: read_committed read %q of aborted transaction %s", r.TP, r.Offset, r.Value, t.ID)
		case t.EndS > 0 && r.S < t.EndS:
			f.find("%s offset %d: read %q at t=%.2fs, before transaction %s was ended at t=%.2fs (read past the last stable offset)",
				r.TP, r.Offset, r.Value, r.S, t.ID, t.EndS)
		}
	}
	if h.Complete {
		for _, r := range h.Reads {
			if t := of[r.Value]; t != nil && t.Outcome != TxnAborted {
				if _, ok := final[r.Value]; !ok {
					f.find("%s offset %d: read %q of transaction %s (%s) during the run, absent from the final read", r.TP, r.Offset, r.Value, t.ID, t.Outcome)
				}
			}
		}
	}
	for _, t := range h.Txns {
		n := 0
		for _, v := range t.Values {
			if _, ok := final[v]; ok {
				n++
			}
		}
		if n != 0 && n != len(t.Values) {
			f.find("transaction %s (%s): %d of its %d records in the final read (not all or nothing)", t.ID, t.Outcome, n, len(t.Values))
		}
		if t.Outcome != TxnCommitted {
			continue
		}
		for _, a := range t.Acks {
			r, ok := final[a.Value]
			switch {
			case !ok && h.Complete:
				f.find("%s offset %d %q of committed transaction %s missing from the final read", a.TP, a.Offset, a.Value, t.ID)
			case ok && (r.TP != a.TP || r.Offset != a.Offset):
				f.find("%q of committed transaction %s acknowledged at %s offset %d, read at %s offset %d", a.Value, t.ID, a.TP, a.Offset, r.TP, r.Offset)
			}
		}
	}
	ids := slices.Sorted(maps.Keys(h.Projected))
	for _, id := range ids {
		if got, want := h.Projected[id], h.Described[id]; got != want {
			why := ""
			if h.ProjectedErr != "" {
				why = " (the last read failed: " + h.ProjectedErr + ")"
			}
			f.find("%s: __transaction_state holds %q at t=%.2fs, DescribeTransactions answers %q%s", id, got, h.ProjectedS, want, why)
		}
	}
	outcomes := map[string]int64{TxnCommitted: 0, TxnAborted: 0, TxnUnknown: 0}
	for _, t := range h.Txns {
		outcomes[t.Outcome]++
	}
	return WorkloadCount{Checked: len(h.Txns) + len(h.Reads) + len(h.Final) + len(ids), Violations: f.n, Info: outcomes}, f.done()
}

// CompactWrite is one record sent to the compacted topic: its key, its
// value, the order it was sent in (Seq, over the one producer), and the
// offset if it was acknowledged.
type CompactWrite struct {
	TP
	Key, Value string
	Seq        int64
	Acked      bool
	Offset     int64
}

// CompactRead is a record of the final read of the compacted topic.
type CompactRead struct {
	TP
	Offset     int64
	Key, Value string
}

// CompactHistory is what the compacted-topic workload saw: every write,
// and the final read of every partition from its start to its high
// watermark (Complete: it got there).
type CompactHistory struct {
	Writes   []CompactWrite
	Final    []CompactRead
	Complete bool
}

// CheckCompacted judges the compacted topic:
//
//   - the final read got to every partition's high watermark, offsets
//     strictly increasing, each value once;
//   - each record read is a write of that key (at its acknowledged
//     offset, if acknowledged);
//   - for every key with an acknowledged write, the final read ends with
//     the last acknowledged value of the key, or with one sent later
//     (whose acknowledgement was lost): no acknowledged latest value is
//     lost to the cleaner or to a fault.
//
// checked counts the keys with an acknowledged write and the records
// read. Info: written (acknowledged writes) and read (records in the
// final read): fewer read than written shows the cleaner ran.
func CheckCompacted(h CompactHistory) (WorkloadCount, []string) {
	f := &finder{name: "compacted"}
	if !h.Complete {
		f.find("the final read did not reach the high watermark of every partition")
	}
	byValue := map[string]CompactWrite{}
	lastAcked := map[string]CompactWrite{}
	acked := 0
	for _, w := range h.Writes {
		byValue[w.Value] = w
		if w.Acked {
			acked++
			if l, ok := lastAcked[w.Key]; !ok || w.Seq > l.Seq {
				lastAcked[w.Key] = w
			}
		}
	}
	seen := map[string]bool{}
	last := map[TP]int64{}
	latest := map[string]CompactRead{}
	for _, r := range h.Final {
		if prev, ok := last[r.TP]; ok && r.Offset <= prev {
			f.find("%s: offset %d after %d", r.TP, r.Offset, prev)
		}
		last[r.TP] = r.Offset
		if seen[r.Value] {
			f.find("%s offset %d: %q read twice", r.TP, r.Offset, r.Value)
		}
		seen[r.Value] = true
		w, ok := byValue[r.Value]
		switch {
		case !ok || w.Key != r.Key || w.TP != r.TP:
			f.find("%s offset %d: key %q value %q was never written there", r.TP, r.Offset, r.Key, r.Value)
		case w.Acked && w.Offset != r.Offset:
			f.find("%s: %q acknowledged at offset %d, read at %d", r.TP, r.Value, w.Offset, r.Offset)
		}
		latest[r.Key] = r
	}
	ks := make([]string, 0, len(lastAcked))
	for k := range lastAcked {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		la := lastAcked[k]
		r, ok := latest[k]
		if !ok {
			f.find("key %q: absent from the final read; its last acknowledged value %q (offset %d)", k, la.Value, la.Offset)
			continue
		}
		if r.Value == la.Value {
			continue
		}
		if w, ok := byValue[r.Value]; ok && w.Key == k && w.Seq > la.Seq && !w.Acked {
			continue // sent later, its acknowledgement lost: it may win
		}
		f.find("key %q: the final read ends with %q (offset %d), not its last acknowledged value %q (offset %d)", k, r.Value, r.Offset, la.Value, la.Offset)
	}
	return WorkloadCount{Checked: len(lastAcked) + len(h.Final), Violations: f.n,
		Info: map[string]int64{"written": int64(acked), "read": int64(len(h.Final))}}, f.done()
}

// TierRead is a record of a read of the tiered topic from offset 0; Pass
// numbers the reads (each a new consumer from the earliest offset), -1
// is the final read after healing.
type TierRead struct {
	Pass int
	TP
	Offset int64
	Value  string
}

// TierHistory is what the tiered-topic workload saw: the acknowledged
// records, the reads from offset 0 (during the run and the final one),
// the final high watermarks, and each partition's earliest local offset
// at the end (above 0: segments left the broker's disk for the tier).
type TierHistory struct {
	Acks          []Ack
	Reads         []TierRead
	End           map[TP]int64
	EarliestLocal map[TP]int64
}

// CheckTiered judges the tiered topic (no compaction, no transactions:
// offsets are contiguous from 0):
//
//   - every read from offset 0, during the run and at the end, starts at
//     offset 0 and goes on offset by offset (a tier read or an "earliest"
//     that skips offsets is caught), with the acknowledged value at each
//     acknowledged offset;
//   - the final read reaches the final high watermark and has every
//     acknowledged record, at its offset, exactly once.
//
// checked counts the records read and the acknowledged records checked
// against the final read. Info: earliest_local_max, the highest earliest
// local offset at the end (0: nothing left the local log), and passes,
// the reads from offset 0 during the run.
func CheckTiered(h TierHistory) (WorkloadCount, []string) {
	f := &finder{name: "tiered"}
	ackAt := map[TP]map[int64]string{}
	for _, a := range h.Acks {
		if ackAt[a.TP] == nil {
			ackAt[a.TP] = map[int64]string{}
		}
		ackAt[a.TP][a.Offset] = a.Value
	}
	type passTP struct {
		pass int
		TP
	}
	next := map[passTP]int64{}
	finalAt := map[TP]map[int64]int{}
	for _, r := range h.Reads {
		k := passTP{r.Pass, r.TP}
		want, started := next[k]
		if !started {
			want = 0
		}
		if r.Offset != want {
			what := "read"
			if r.Pass < 0 {
				what = "final read"
			}
			f.find("%s %s (pass %d): offset %d where %d was next (skipped or repeated)", r.TP, what, r.Pass, r.Offset, want)
		}
		next[k] = r.Offset + 1
		if v, ok := ackAt[r.TP][r.Offset]; ok && v != r.Value {
			f.find("%s offset %d (pass %d): read %q, acknowledged %q", r.TP, r.Offset, r.Pass, r.Value, v)
		}
		if r.Pass < 0 {
			if finalAt[r.TP] == nil {
				finalAt[r.TP] = map[int64]int{}
			}
			finalAt[r.TP][r.Offset]++
		}
	}
	for _, tp := range sortedTPs(h.End) {
		if got := next[passTP{-1, tp}]; got < h.End[tp] {
			f.find("%s: the final read from offset 0 ended at %d, the high watermark is %d", tp, got, h.End[tp])
		}
	}
	for _, a := range h.Acks {
		if n := finalAt[a.TP][a.Offset]; n != 1 {
			f.find("%s offset %d %q (acknowledged) read %d times by the final read from offset 0", a.TP, a.Offset, a.Value, n)
		}
	}
	var local int64
	for _, o := range h.EarliestLocal {
		local = max(local, o)
	}
	passes := map[int]bool{}
	for _, r := range h.Reads {
		if r.Pass >= 0 {
			passes[r.Pass] = true
		}
	}
	return WorkloadCount{Checked: len(h.Reads) + len(h.Acks), Violations: f.n,
		Info: map[string]int64{"earliest_local_max": local, "passes": int64(len(passes))}}, f.done()
}
