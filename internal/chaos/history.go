package chaos

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// History file operations (Event.Op).
const (
	OpProduce       = "produce"        // a record acknowledged (Offset) or failed (Error)
	OpRead          = "read"           // a record a consumer read from Broker
	OpHWMRegression = "hwm_regression" // a high watermark fell within a broker incarnation
	OpFault         = "fault"          // a fault applied (What: its resolved target)
	OpFaultError    = "fault_error"    // a fault not applied (Error)
	OpHeal          = "heal"           // a fault healed
	OpHWM           = "hwm"            // a partition's final high watermark (HWM)
	OpReplica       = "replica"        // a replica's final log (Records, BytesSHA256, End, Error)
	OpResult        = "result"         // the run's result, last

	// The other workloads (check_workloads.go).
	OpGroupDelivery  = "group_delivery"  // a record a group member polled (Member)
	OpGroupCommit    = "group_commit"    // an acknowledged commit of one partition (Member, Generation, Offset; Sent: when sent, T: acknowledged)
	OpGroupFinal     = "group_final"     // the group's final committed offset of a partition (Offset)
	OpGroupProjected = "group_projected" // the group's offset of a partition in __consumer_offsets after the run (Offset; -1: none)
	OpTxnProduce     = "txn_produce"     // an acknowledged record of transaction Txn
	OpTxn            = "txn"             // a transaction ended (Txn, Outcome, Values; Sent: EndTransaction sent)
	OpTxnRead        = "txn_read"        // a record a read_committed consumer read during the run
	OpTxnFinalRead   = "txn_final_read"  // a record of the final read_committed read
	OpTxnFinal       = "txn_final"       // the final read's end (Complete: it reached the fence)
	OpTxnDescribed   = "txn_described"   // a transactional id's state as DescribeTransactions answers it after the run (Txn, Value)
	OpTxnProjected   = "txn_projected"   // the id's state in __transaction_state after the run (Txn, Value; "": none)
	OpCompactWrite   = "compact_write"   // a record sent to the compacted topic (Key, Value, Seq; Offset, or Error)
	OpCompactRead    = "compact_read"    // a record of the compacted topic's final read
	OpCompactFinal   = "compact_final"   // the final read's end (Complete)
	OpTierProduce    = "tier_produce"    // an acknowledged record of the tiered topic
	OpTierRead       = "tier_read"       // a record of a read of the tiered topic from offset 0 (Pass; -1 the final read)
	OpTierEnd        = "tier_end"        // a tiered partition's final high watermark (HWM) and earliest local offset (Offset)
)

// Event is one line of a history file (--history): every operation of a
// run with its time in seconds from the start of the workload. The
// "replica", "hwm" and "result" lines come at the end; with them the file
// holds everything Check and the minimums judge, so `strata chaos check`
// gives the same verdict offline.
type Event struct {
	T         float64 `json:"t"`
	Op        string  `json:"op"`
	Topic     string  `json:"topic,omitempty"`
	Partition int32   `json:"partition,omitempty"`
	Offset    int64   `json:"offset,omitempty"`
	Value     string  `json:"value,omitempty"`
	Broker    int32   `json:"broker,omitempty"`
	// Incarnation is the broker's incarnation (read, hwm_regression).
	Incarnation int    `json:"incarnation,omitempty"`
	Error       string `json:"error,omitempty"`
	// Kind and What describe a fault.
	Kind string `json:"kind,omitempty"`
	What string `json:"what,omitempty"`
	// From and To are a high watermark regression's.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	HWM  int64 `json:"hwm,omitempty"`
	// End, BytesSHA256 and Records are a replica log's (its bytes are
	// compared by hash).
	End         int64   `json:"end,omitempty"`
	BytesSHA256 string  `json:"bytes_sha256,omitempty"`
	Records     []Rec   `json:"records,omitempty"`
	Result      *Result `json:"result,omitempty"`
	// The other workloads' fields.
	Member     string   `json:"member,omitempty"`
	Generation int32    `json:"generation,omitempty"`
	Sent       float64  `json:"sent,omitempty"`
	Txn        string   `json:"txn,omitempty"`
	Outcome    string   `json:"outcome,omitempty"`
	Values     []string `json:"values,omitempty"`
	Key        string   `json:"key,omitempty"`
	Seq        int64    `json:"seq,omitempty"`
	Pass       int      `json:"pass,omitempty"`
	Complete   bool     `json:"complete,omitempty"`
}

// historyWriter appends events to a --history file; a nil writer writes
// nothing.
type historyWriter struct {
	start time.Time
	mu    sync.Mutex
	f     *os.File
	bw    *bufio.Writer
	enc   *json.Encoder
	err   error
}

func createHistory(path string) (*historyWriter, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &historyWriter{start: time.Now(), f: f, bw: bw, enc: json.NewEncoder(bw)}, nil
}

// setStart sets time zero (the workload's start).
func (w *historyWriter) setStart(t time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.start = t
	w.mu.Unlock()
}

func (w *historyWriter) write(e Event) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.T == 0 {
		e.T = time.Since(w.start).Seconds()
	}
	if err := w.enc.Encode(e); err != nil && w.err == nil {
		w.err = err
	}
}

// final writes the end of the history: final high watermarks, replica
// logs and the result; then closes the file.
func (w *historyWriter) final(h History, res *Result) error {
	if w == nil {
		return nil
	}
	for _, tp := range sortedTPs(h.HWM) {
		w.write(Event{Op: OpHWM, Topic: tp.Topic, Partition: tp.Partition, HWM: h.HWM[tp]})
	}
	for _, tp := range sortedTPs(h.Replicas) {
		for _, l := range h.Replicas[tp] {
			sum := sha256.Sum256(l.Bytes)
			w.write(Event{Op: OpReplica, Topic: tp.Topic, Partition: tp.Partition, Broker: l.Broker, End: l.End, Error: l.Err,
				BytesSHA256: hex.EncodeToString(sum[:]), Records: l.Records})
		}
	}
	w.write(Event{Op: OpResult, Result: res})
	w.mu.Lock()
	defer w.mu.Unlock()
	err := errors.Join(w.err, w.bw.Flush(), w.f.Close())
	if err != nil {
		return fmt.Errorf("history %s: %w", w.f.Name(), err)
	}
	return nil
}

func sortTPs(tps []TP) {
	slices.SortFunc(tps, func(a, b TP) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}

func sortedTPs[V any](m map[TP]V) []TP {
	out := make([]TP, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

// CheckHistory reads a history file and judges it again with the same
// checker (Check) and the same minimums (judge) as the run that wrote it:
// the acknowledged produces, the reads, the high watermark regressions,
// the final high watermarks and replica logs, and the run's result line
// (schedule, faults applied, liveness, harness problems). It returns the
// result with the verdict, workloads, ok and reason recomputed.
func CheckHistory(r io.Reader) (*Result, error) {
	h := History{HWM: map[TP]int64{}, Replicas: map[TP][]ReplicaLog{}}
	var res *Result
	var (
		groups  *GroupsHistory
		txn     *TxnHistory
		compact *CompactHistory
		tier    *TierHistory
		txnAcks = map[string][]Ack{}
	)
	group := func() *GroupsHistory {
		if groups == nil {
			groups = &GroupsHistory{Final: map[TP]int64{}}
		}
		return groups
	}
	txns := func() *TxnHistory {
		if txn == nil {
			txn = &TxnHistory{}
		}
		return txn
	}
	compacted := func() *CompactHistory {
		if compact == nil {
			compact = &CompactHistory{}
		}
		return compact
	}
	tiered := func() *TierHistory {
		if tier == nil {
			tier = &TierHistory{End: map[TP]int64{}, EarliestLocal: map[TP]int64{}}
		}
		return tier
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	for line := 1; ; line++ {
		var e Event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("history event %d: %w", line, err)
		}
		tp := TP{e.Topic, e.Partition}
		switch e.Op {
		case OpProduce:
			if e.Error == "" {
				h.Acks = append(h.Acks, Ack{TP: tp, Offset: e.Offset, Value: e.Value})
			}
		case OpRead:
			h.Observations = append(h.Observations, Observation{TP: tp, Offset: e.Offset, Value: e.Value, Broker: e.Broker})
		case OpHWMRegression:
			h.HWMRegressions = append(h.HWMRegressions, HWMRegression{TP: tp, Broker: e.Broker, Incarnation: e.Incarnation, From: e.From, To: e.To, AtS: e.T})
		case OpHWM:
			h.HWM[tp] = e.HWM
		case OpReplica:
			h.Replicas[tp] = append(h.Replicas[tp], ReplicaLog{Broker: e.Broker, Bytes: []byte(e.BytesSHA256), Records: e.Records, End: e.End, Err: e.Error})
		case OpResult:
			res = e.Result
		case OpGroupDelivery:
			g := group()
			g.Deliveries = append(g.Deliveries, GroupDelivery{Member: e.Member, TP: tp, Offset: e.Offset, Value: e.Value})
		case OpGroupCommit:
			g := group()
			g.Commits = append(g.Commits, GroupCommit{Member: e.Member, Generation: e.Generation, TP: tp, Offset: e.Offset, SentS: e.Sent, AckS: e.T})
		case OpGroupFinal:
			g := group()
			g.Final[tp], g.FinalS = e.Offset, e.T
		case OpGroupProjected:
			g := group()
			if g.Projected == nil {
				g.Projected = map[TP]int64{}
			}
			g.Projected[tp], g.ProjectedS = e.Offset, e.T
		case OpTxnProduce:
			txnAcks[e.Txn] = append(txnAcks[e.Txn], Ack{TP: tp, Offset: e.Offset, Value: e.Value})
		case OpTxn:
			t := txns()
			t.Txns = append(t.Txns, Txn{ID: e.Txn, Outcome: e.Outcome, Values: e.Values, Acks: txnAcks[e.Txn], EndS: e.Sent})
		case OpTxnDescribed, OpTxnProjected:
			t := txns()
			if t.Described == nil {
				t.Described, t.Projected = map[string]string{}, map[string]string{}
			}
			if e.Op == OpTxnDescribed {
				t.Described[e.Txn] = e.Value
			} else {
				t.Projected[e.Txn], t.ProjectedS, t.ProjectedErr = e.Value, e.T, e.Error
			}
		case OpTxnRead:
			t := txns()
			t.Reads = append(t.Reads, TxnRead{TP: tp, Offset: e.Offset, Value: e.Value, S: e.T})
		case OpTxnFinalRead:
			t := txns()
			t.Final = append(t.Final, TxnRead{TP: tp, Offset: e.Offset, Value: e.Value, S: e.T})
		case OpTxnFinal:
			txns().Complete = e.Complete
		case OpCompactWrite:
			c := compacted()
			c.Writes = append(c.Writes, CompactWrite{TP: tp, Key: e.Key, Value: e.Value, Seq: e.Seq, Acked: e.Error == "", Offset: e.Offset})
		case OpCompactRead:
			c := compacted()
			c.Final = append(c.Final, CompactRead{TP: tp, Offset: e.Offset, Key: e.Key, Value: e.Value})
		case OpCompactFinal:
			compacted().Complete = e.Complete
		case OpTierProduce:
			t := tiered()
			t.Acks = append(t.Acks, Ack{TP: tp, Offset: e.Offset, Value: e.Value})
		case OpTierRead:
			t := tiered()
			t.Reads = append(t.Reads, TierRead{Pass: e.Pass, TP: tp, Offset: e.Offset, Value: e.Value})
		case OpTierEnd:
			t := tiered()
			t.End[tp], t.EarliestLocal[tp] = e.HWM, e.Offset
		case OpFault, OpFaultError, OpHeal:
		default:
			return nil, fmt.Errorf("history event %d: unknown op %q", line, e.Op)
		}
	}
	if res == nil {
		return nil, errors.New("history has no result line: the run did not finish")
	}
	h.Groups, h.Txn, h.Compact, h.Tier = groups, txn, compact, tier
	res.judgeHistory(h)
	return res, nil
}

// judgeHistory runs the checker on h and the minimums on the result.
func (r *Result) judgeHistory(h History) {
	r.Verdict = Check(h)
	logs := 0
	for _, rl := range h.Replicas {
		logs += len(rl)
	}
	r.Workloads = r.Verdict.workloads(logs)
	r.judge()
}

// The other workloads' history lines (CheckHistory reads them back).

func (d GroupDelivery) event() Event {
	return Event{Op: OpGroupDelivery, Member: d.Member, Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Value: d.Value}
}

func (c GroupCommit) event() Event {
	return Event{T: c.AckS, Op: OpGroupCommit, Member: c.Member, Generation: c.Generation, Topic: c.Topic, Partition: c.Partition,
		Offset: c.Offset, Sent: c.SentS}
}

func groupFinalEvent(tp TP, offset int64, at float64) Event {
	return Event{T: at, Op: OpGroupFinal, Topic: tp.Topic, Partition: tp.Partition, Offset: offset}
}

// events are a transaction's acknowledged records, then its end.
func (t *Txn) events() []Event {
	var out []Event
	for _, a := range t.Acks {
		out = append(out, Event{Op: OpTxnProduce, Txn: t.ID, Topic: a.Topic, Partition: a.Partition, Offset: a.Offset, Value: a.Value})
	}
	return append(out, Event{Op: OpTxn, Txn: t.ID, Outcome: t.Outcome, Values: t.Values, Sent: t.EndS})
}

func (r TxnRead) event(op string) Event {
	return Event{T: r.S, Op: op, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: r.Value}
}

// event is the write's line; err is why it was not acknowledged.
func (c CompactWrite) event(err error) Event {
	e := Event{Op: OpCompactWrite, Topic: c.Topic, Partition: c.Partition, Key: c.Key, Value: c.Value, Seq: c.Seq, Offset: c.Offset}
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

func (r CompactRead) event() Event {
	return Event{Op: OpCompactRead, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
}

func tierProduceEvent(a Ack) Event {
	return Event{Op: OpTierProduce, Topic: a.Topic, Partition: a.Partition, Offset: a.Offset, Value: a.Value}
}

func (r TierRead) event() Event {
	return Event{Op: OpTierRead, Pass: r.Pass, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: r.Value}
}

func tierEndEvent(tp TP, hwm, earliestLocal int64) Event {
	return Event{Op: OpTierEnd, Topic: tp.Topic, Partition: tp.Partition, HWM: hwm, Offset: earliestLocal}
}
