package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/protocol"
)

// Options configure a Workload.
type Options struct {
	// Seeds are the bootstrap brokers (host:port).
	Seeds []string
	// Topic is produced to and consumed from.
	Topic string
	// Partitions and ReplicationFactor create the topic when it does not
	// exist; Partitions 0 means the topic must exist already (Start waits
	// for it). An existing topic is used with the partitions it has.
	Partitions        int32
	ReplicationFactor int16
	// Rate is the records per second over all partitions; 0 produces as
	// fast as the cluster acknowledges (MaxBuffered bounds what is in
	// flight).
	Rate int
	// RecordSize pads each record value to this many bytes (the value is
	// never shorter than its run ID and sequence number).
	RecordSize int
	// MaxBuffered bounds the records buffered or in flight (default 1000).
	MaxBuffered int
	// ClientRack is the clients' zone: client.rack of the consumer
	// (follower fetching, KIP-392) and strata_az=<zone> in the producer's
	// client ID, as `strata bench` does.
	ClientRack string
	// Log, when set, gets the clients' warnings and errors, one a line.
	Log io.Writer
	// ClientOpts are added to both clients (TLS and SASL towards a
	// secured cluster).
	ClientOpts []kgo.Opt

	// Tamper is for tests of the checker itself: it sees every consumed
	// record of this run before the check and returns what the check sees
	// instead (none: the record is lost; two: it is duplicated).
	Tamper func(*kgo.Record) []*kgo.Record

	// startError, when set, gets each error met while waiting for the
	// topic (Runner shows it in its status).
	startError func(error)
}

// Status is what a run saw so far (Workload.Status) or in the end
// (Workload.Drain, with Done set). JSON names are the `strata verify`
// /status interface (docs/verify.md).
type Status struct {
	// Running: the producer is producing.
	Running bool `json:"running"`
	// Done: producing stopped and the drain ended; Lost is final.
	Done bool `json:"done"`
	// Drained: in the end, every acknowledged record was consumed before
	// the drain timeout.
	Drained bool   `json:"drained"`
	Run     string `json:"run"`
	Topic   string `json:"topic"`
	// Partitions is how many partitions the workload produces to.
	Partitions int `json:"partitions"`
	// Produced: records handed to the producer; Acked: acknowledged by
	// the cluster; Failed: records whose produce failed for good.
	Produced int64 `json:"produced"`
	Acked    int64 `json:"acked"`
	Failed   int64 `json:"failed"`
	// Consumed: distinct records of this run the consumer read (acked or
	// not: a record whose acknowledgement was lost can still be written).
	Consumed int64 `json:"consumed"`
	// Pending: acknowledged records not consumed yet (while running).
	// Lost: acknowledged records never consumed, set once Done.
	Pending    int64 `json:"pending"`
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	OutOfOrder int64 `json:"out_of_order"`
	// OtherRecords: records of the topic not written by this run (an
	// earlier run, another client), not checked.
	OtherRecords int64 `json:"other_records"`
	// ProduceErrors counts every error the producer met by name: each
	// partition's error answer by its Kafka error name, retried or not
	// (from the client's log), each produce request failed as a whole
	// (CONNECTION_CLOSED, CONNECTION_REFUSED, NETWORK, ...), and each
	// record failed for good with an error that is not a Kafka error code
	// (RECORD_TIMEOUT, RECORD_RETRIES, CANCELLED).
	ProduceErrors map[string]int64 `json:"produce_errors"`
	// NotEnoughReplicas counts NOT_ENOUGH_REPLICAS(_AFTER_APPEND)
	// answers, retried ones included.
	NotEnoughReplicas int64 `json:"not_enough_replicas"`
	// ConsumeErrors counts the consumer's fetch errors by name.
	ConsumeErrors map[string]int64 `json:"consume_errors"`
	LastError     string           `json:"last_error"`
	// MaxGapSeconds is the longest time without any acknowledged produce
	// while producing (from the start to the first acknowledgement
	// included).
	MaxGapSeconds  float64 `json:"max_gap_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// First examples of each violation.
	LostExamples       []string `json:"lost_examples,omitempty"`
	DuplicatedExamples []string `json:"duplicated_examples,omitempty"`
	OutOfOrderExamples []string `json:"out_of_order_examples,omitempty"`
}

// OK says whether the run saw no violation: nothing lost, duplicated or
// reordered.
func (s Status) OK() bool { return s.Lost == 0 && s.Duplicated == 0 && s.OutOfOrder == 0 }

// Workload is an idempotent acks=all producer writing records with a
// sequence number per partition and a consumer reading the topic from the
// start, checking each partition's sequence as records arrive.
//
// Record values are "<run> <sequence> <padding>": run is random per
// Workload, so that records of an earlier run of the same topic are told
// apart (and skipped).
type Workload struct {
	opts   Options
	run    string
	parts  int
	start  time.Time
	prod   *kgo.Client
	cons   *kgo.Client
	prodWG sync.WaitGroup // the produce loop
	consWG sync.WaitGroup // the consume loop

	// stopProducing ends the produce loop; abandon ends a Produce call
	// blocked on a full buffer (produceCtx).
	stopProducing, abandon context.CancelFunc
	produceCtx             context.Context
	consumeCtx             context.Context
	stopConsuming          context.CancelFunc

	mu         sync.Mutex // guards everything below
	chk        *checker
	next       []int64 // next sequence number per partition
	running    bool
	stopped    bool
	final      *Status
	produced   int64
	failed     int64
	other      int64
	prodErrs   map[string]int64
	consErrs   map[string]int64
	notEnough  int64
	lastErr    string
	lastAck    time.Time
	maxGap     time.Duration
	stoppedAt  time.Time
	progressed chan struct{} // closed and replaced when the consumer read something
}

// Start creates the topic if it is missing (retrying while the cluster is
// not ready, until ctx ends), then starts producing and consuming.
func Start(ctx context.Context, opts Options) (*Workload, error) {
	if len(opts.Seeds) == 0 || opts.Topic == "" {
		return nil, errors.New("verify: seed brokers and a topic are required")
	}
	if opts.Rate < 0 || opts.RecordSize < 0 || opts.Partitions < 0 || opts.ReplicationFactor < 0 {
		return nil, fmt.Errorf("verify: rate %d, record size %d, partitions %d, replication factor %d: none may be negative",
			opts.Rate, opts.RecordSize, opts.Partitions, opts.ReplicationFactor)
	}
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = 1000
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	w := &Workload{
		opts: opts, run: hex.EncodeToString(id[:]),
		prodErrs: map[string]int64{}, consErrs: map[string]int64{},
		progressed: make(chan struct{}),
	}
	parts, err := w.ensureTopic(ctx)
	if err != nil {
		return nil, err
	}
	w.parts = parts
	w.chk, w.next = newChecker(parts), make([]int64, parts)

	clientID := "strata-verify"
	if opts.ClientRack != "" {
		clientID += "," + protocol.ClientIDZonePrefix + opts.ClientRack
	}
	popts := append([]kgo.Opt{kgo.SeedBrokers(opts.Seeds...), kgo.ClientID(clientID),
		kgo.DefaultProduceTopic(opts.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(opts.MaxBuffered), kgo.ProducerLinger(0),
		kgo.WithLogger(producerLogger{w})}, opts.ClientOpts...)
	w.prod, err = kgo.NewClient(popts...)
	if err != nil {
		return nil, fmt.Errorf("verify: producer: %w", err)
	}
	copts := []kgo.Opt{kgo.SeedBrokers(opts.Seeds...), kgo.ClientID(clientID),
		kgo.ConsumeTopics(opts.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	copts = append(copts, opts.ClientOpts...)
	if opts.ClientRack != "" {
		copts = append(copts, kgo.Rack(opts.ClientRack))
	}
	w.cons, err = kgo.NewClient(copts...)
	if err != nil {
		w.prod.Close()
		return nil, fmt.Errorf("verify: consumer: %w", err)
	}

	// The produce calls live until Drain gives up on them, not until the
	// caller's ctx ends: stopping is Stop's job.
	w.produceCtx, w.abandon = context.WithCancel(context.WithoutCancel(ctx))
	var loopCtx context.Context
	loopCtx, w.stopProducing = context.WithCancel(w.produceCtx)
	w.consumeCtx, w.stopConsuming = context.WithCancel(context.WithoutCancel(ctx))
	w.start = time.Now()
	w.lastAck, w.running = w.start, true
	w.prodWG.Add(1)
	go w.produce(loopCtx)
	w.consWG.Add(1)
	go w.consume()
	return w, nil
}

// ensureTopic creates the topic when Partitions > 0 and it is missing, and
// returns its partition count, retrying until the cluster answers.
func (w *Workload) ensureTopic(ctx context.Context) (int, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.opts.Seeds...)}, w.opts.ClientOpts...)...)
	if err != nil {
		return 0, fmt.Errorf("verify: admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for {
		n, err := topicPartitions(ctx, adm, w.opts)
		if err == nil {
			return n, nil
		}
		last = err
		if w.opts.startError != nil {
			w.opts.startError(err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("verify: topic %s: %w (last error: %w)", w.opts.Topic, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func topicPartitions(ctx context.Context, adm *kadm.Client, opts Options) (int, error) {
	if opts.Partitions > 0 {
		// CreateTopic returns the topic's error as its own.
		_, err := adm.CreateTopic(ctx, opts.Partitions, opts.ReplicationFactor, nil, opts.Topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("create topic: %w", err)
		}
	}
	tds, err := adm.ListTopics(ctx, opts.Topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic: %w", err)
	}
	td, ok := tds[opts.Topic]
	switch {
	case !ok:
		return 0, errors.New("describe topic: not in the answer")
	case td.Err != nil:
		return 0, fmt.Errorf("describe topic: %w", td.Err)
	case len(td.Partitions) == 0:
		return 0, errors.New("describe topic: no partitions")
	}
	return len(td.Partitions), nil
}

// produce writes records round-robin over the partitions, paced at
// opts.Rate, until ctx ends.
func (w *Workload) produce(ctx context.Context) {
	defer w.prodWG.Done()
	var (
		tick *time.Ticker
		base = time.Now()
		sent int64 // since base
		due  int64 = 1
	)
	if w.opts.Rate > 0 {
		tick = time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
	}
	for p := 0; ctx.Err() == nil; p = (p + 1) % w.parts {
		for tick != nil && due <= 0 {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				due = int64(now.Sub(base).Seconds()*float64(w.opts.Rate)) - sent
				if due > int64(w.opts.Rate) {
					// Behind by more than a second (the buffer was
					// full): go on at the rate, not in a burst.
					base, sent, due = now, 0, 1
				}
			}
		}
		w.mu.Lock()
		seq := w.next[p]
		w.next[p]++
		w.produced++
		w.mu.Unlock()
		part := int32(p)
		w.prod.Produce(w.produceCtx, &kgo.Record{Partition: part, Value: w.value(seq)}, func(_ *kgo.Record, err error) {
			w.acked(part, seq, err)
		})
		sent++
		due--
	}
}

func (w *Workload) value(seq int64) []byte {
	v := fmt.Appendf(nil, "%s %d ", w.run, seq)
	if pad := w.opts.RecordSize - len(v); pad > 0 {
		v = append(v, bytes.Repeat([]byte{'.'}, pad)...)
	}
	return v
}

// parse returns the sequence number of a record of this run.
func (w *Workload) parse(v []byte) (int64, bool) {
	run, rest, ok := strings.Cut(string(v), " ")
	if !ok || run != w.run {
		return 0, false
	}
	s, _, _ := strings.Cut(rest, " ")
	seq, err := strconv.ParseInt(s, 10, 64)
	return seq, err == nil && seq >= 0
}

func (w *Workload) acked(p int32, seq int64, err error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed++
		w.lastErr = fmt.Sprintf("produce partition %d record %d: %v", p, seq, err)
		var ke *kerr.Error
		if !errors.As(err, &ke) { // Kafka error answers are counted from the log
			w.prodErrs[errorName(err)]++
		}
		return
	}
	if !w.stopped {
		w.maxGap = max(w.maxGap, now.Sub(w.lastAck))
		w.lastAck = now
	}
	w.chk.ack(p, seq)
}

func (w *Workload) consume() {
	defer w.consWG.Done()
	for {
		fs := w.cons.PollFetches(w.consumeCtx)
		if fs.IsClientClosed() || w.consumeCtx.Err() != nil {
			return
		}
		w.mu.Lock()
		fs.EachError(func(t string, p int32, err error) {
			w.consErrs[errorName(err)]++
			w.lastErr = fmt.Sprintf("consume %s/%d: %v", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := w.parse(r.Value); !ok {
				w.other++
				return
			}
			recs := []*kgo.Record{r}
			if w.opts.Tamper != nil {
				recs = w.opts.Tamper(r)
			}
			for _, r := range recs {
				if seq, ok := w.parse(r.Value); ok && int(r.Partition) < w.parts {
					w.chk.consume(r.Partition, r.Offset, seq)
				}
			}
		})
		close(w.progressed)
		w.progressed = make(chan struct{})
		w.mu.Unlock()
	}
}

// Acked is how many records were acknowledged so far.
func (w *Workload) Acked() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.chk.acked
}

// Status is what the run saw so far; after Drain, the final status.
func (w *Workload) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final != nil {
		return *w.final
	}
	return w.statusLocked(time.Now())
}

func (w *Workload) statusLocked(now time.Time) Status {
	gap := w.maxGap
	end := now
	if w.stopped {
		end = w.stoppedAt
	} else {
		gap = max(gap, now.Sub(w.lastAck)) // the gap going on counts too
	}
	dup, ooo := w.chk.examples()
	return Status{
		Running: w.running, Run: w.run, Topic: w.opts.Topic, Partitions: w.parts,
		Produced: w.produced, Acked: w.chk.acked, Failed: w.failed,
		Consumed: w.chk.consumed, Pending: w.chk.pending(),
		Duplicated: w.chk.duplicated, OutOfOrder: w.chk.outOfOrder, OtherRecords: w.other,
		ProduceErrors: maps.Clone(w.prodErrs), NotEnoughReplicas: w.notEnough,
		ConsumeErrors: maps.Clone(w.consErrs), LastError: w.lastErr,
		MaxGapSeconds:      gap.Seconds(),
		ElapsedSeconds:     end.Sub(w.start).Seconds(),
		DuplicatedExamples: dup, OutOfOrderExamples: ooo,
	}
}

// Stop stops producing and waits (until ctx ends) for the records in
// flight to be answered; those still unanswered then are failed.
func (w *Workload) Stop(ctx context.Context) {
	w.stopProducing()
	done := make(chan struct{})
	go func() { w.prodWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.abandon() // a Produce blocked on a full buffer
		<-done
	}
	if err := w.prod.Flush(ctx); err != nil {
		w.abandon()
	}
	w.mu.Lock()
	if !w.stopped {
		w.stopped, w.running, w.stoppedAt = true, false, time.Now()
		w.maxGap = max(w.maxGap, w.stoppedAt.Sub(w.lastAck))
	}
	w.mu.Unlock()
}

// Drain stops producing, waits until the consumer read every acknowledged
// record or timeout passes, and returns the final status: what is still
// not consumed then is lost.
func (w *Workload) Drain(ctx context.Context, timeout time.Duration) Status {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.Stop(ctx)
	for {
		w.mu.Lock()
		if w.final != nil {
			defer w.mu.Unlock()
			return *w.final
		}
		pending, progressed := w.chk.pending(), w.progressed
		if pending == 0 || ctx.Err() != nil {
			st := w.statusLocked(time.Now())
			st.Done, st.Drained = true, pending == 0
			st.Lost, st.Pending = pending, 0
			st.LostExamples = w.chk.missing(maxExamples)
			w.final = &st
			w.mu.Unlock()
			return st
		}
		w.mu.Unlock()
		select {
		case <-progressed:
		case <-ctx.Done():
		}
	}
}

// Close stops both clients and waits for the workload's goroutines.
func (w *Workload) Close() {
	w.stopProducing()
	w.abandon()
	w.prodWG.Wait()
	w.prod.Close()
	w.stopConsuming()
	w.cons.Close()
	w.consWG.Wait()
}

// errorName names an error for the error counts: the Kafka error name, or
// a short class for the client's own errors.
func errorName(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, context.DeadlineExceeded):
		return "RECORD_TIMEOUT"
	case errors.Is(err, kgo.ErrRecordRetries):
		return "RECORD_RETRIES"
	case errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
		return "CANCELLED"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return "CONNECTION_CLOSED"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "CONNECTION_REFUSED"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "NETWORK"
	}
	return "OTHER"
}

// producerLogger counts the error answers the producer's client met, even
// those it retried away, and passes warnings and errors on to Options.Log.
// franz-go tells a partition's error answer only in its debug log line
// "produced" (its per-record results show the final outcome alone): the
// line's "to" value reads like "topic[0{retrying@-1,8(NOT_ENOUGH_REPLICAS:
// ...)}, 1{0=>9}]". A request that failed as a whole (the connection
// closed, the broker gone) is its "produce request failed" line.
type producerLogger struct{ w *Workload }

// partitionAnswer matches one partition's error answer in a "produced"
// line: retrying@, fatal@, resetting@, skipped@, err@ <offset>[,<records>]
// (<NAME>: message).
var partitionAnswer = regexp.MustCompile(`@-?\d+(?:,\d+)?\(([A-Z][A-Z_]+):`)

// Level is debug: the "produced" lines are debug lines.
func (l producerLogger) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l producerLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if l.w.opts.Log != nil && level <= kgo.LogLevelWarn {
		fmt.Fprintf(l.w.opts.Log, "producer %s: %s %s\n", level, msg, fmt.Sprint(keyvals...))
	}
	var names []string
	switch {
	case msg == "produced":
		for i := 1; i < len(keyvals); i += 2 {
			if to, ok := keyvals[i].(string); ok && keyvals[i-1] == "to" {
				for _, m := range partitionAnswer.FindAllStringSubmatch(to, -1) {
					names = append(names, m[1])
				}
			}
		}
	case strings.HasPrefix(msg, "produce request failed"), strings.HasPrefix(msg, "random error while producing"):
		for i := 1; i < len(keyvals); i += 2 {
			if err, ok := keyvals[i].(error); ok && keyvals[i-1] == "err" {
				names = append(names, errorName(err))
			}
		}
	}
	if len(names) == 0 {
		return
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	for _, n := range names {
		l.w.prodErrs[n]++
		if n == kerr.NotEnoughReplicas.Message || n == kerr.NotEnoughReplicasAfterAppend.Message {
			l.w.notEnough++
		}
	}
	l.w.lastErr = fmt.Sprintf("produce: %s %s", msg, fmt.Sprint(keyvals...))
}
