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
		case OpFault, OpFaultError, OpHeal:
		default:
			return nil, fmt.Errorf("history event %d: unknown op %q", line, e.Op)
		}
	}
	if res == nil {
		return nil, errors.New("history has no result line: the run did not finish")
	}
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
