package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The topics of the workloads beside the idempotent producers (their
// partitions are not in cluster.tps: compaction, transaction markers and
// tier retention make their logs differ from the plain replica check's
// expectations; each has its own checker, check_workloads.go).
const (
	groupName      = "chaos-group"
	txnTopic       = "chaos-txn"
	compactTopic   = "chaos-compacted"
	tieredTopic    = "chaos-tiered"
	extraParts     = 3
	groupMembers   = 3
	txnProducers   = 2
	compactKeys    = 30
	compactRate    = 40 // records per second
	tieredRate     = 40 // records per second
	tierPassEvery  = 8 * time.Second
	finalReadBound = time.Minute
	// The segment.bytes of the compacted and tiered topics.
	compactSegmentBytes = 4096
	tieredSegmentBytes  = 16384
)

// workloadTopicConfigs are the extra topics' configs: the compacted one
// rolls a segment every second or 4 KiB and cleans at any dirt, so the
// cleaner runs during the run; the tiered one rolls every 16 KiB or 4 s
// and keeps 16 KiB or 2 s locally, so segments go to the tier and leave
// the disk (the time roll makes that happen in a short run however slowly
// its producer gets through the faults on a loaded machine).
func workloadTopicConfigs() map[string]map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]map[string]*string{
		txnTopic: {"min.insync.replicas": s("2")},
		compactTopic: {"min.insync.replicas": s("2"), "cleanup.policy": s("compact"), "segment.bytes": s(strconv.Itoa(compactSegmentBytes)), "segment.ms": s("1000"),
			"min.cleanable.dirty.ratio": s("0.01"), "min.compaction.lag.ms": s("0")},
		tieredTopic: {"min.insync.replicas": s("2"), "remote.storage.enable": s("true"), "segment.bytes": s(strconv.Itoa(tieredSegmentBytes)), "segment.ms": s("4000"),
			"local.retention.bytes": s("16384"), "local.retention.ms": s("2000"), "retention.ms": s("-1"), "retention.bytes": s("-1")},
	}
}

// workloadSettings are the broker settings the extra workloads need (the
// tier bucket's are added by the cluster).
var workloadSettings = map[string]string{
	"remote.log.storage.system.enable":                            "true",
	"remote.log.manager.task.interval.ms":                         "500",
	"log.retention.check.interval.ms":                             "1000",
	"log.cleaner.backoff.ms":                                      "500",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}

// createWorkloadTopics creates the extra topics and waits until each
// partition has a leader.
func (c *cluster) createWorkloadTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for topic, cfg := range workloadTopicConfigs() {
		for {
			resp, err := c.adm.CreateTopics(ctx, extraParts, 3, cfg, topic)
			if err == nil {
				err = resp[topic].Err
			}
			if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("create topic %s: %w", topic, err)
			}
			wait(ctx, 200*time.Millisecond)
		}
	}
	for {
		td, err := c.adm.ListTopics(ctx, txnTopic, compactTopic, tieredTopic)
		ok := err == nil
		for _, t := range []string{txnTopic, compactTopic, tieredTopic} {
			for p := range int32(extraParts) {
				if pd, found := td[t].Partitions[p]; !ok || !found || pd.Err != nil || pd.Leader < 0 || len(pd.ISR) < 3 {
					ok = false
				}
			}
		}
		if ok {
			return nil
		}
		if ctx.Err() != nil {
			return errors.New("workload topics created but not every partition has a leader and a full ISR after a minute")
		}
		wait(ctx, 200*time.Millisecond)
	}
}

// workloads runs the consumer groups, the transactional producers and
// read_committed consumers, the compacted topic and the tiered topic
// (docs/chaos.md), and collects what they saw.
type workloads struct {
	c     *cluster
	start time.Time
	hist  *historyWriter
	errs  *errorCounts
	seed  uint64
	// rng draws the group's member replacements (runGroup only).
	rng *rand.Rand
	wg  sync.WaitGroup
	// stop ends the writers and the group members; stopReaders the
	// read_committed and tier readers.
	stop, stopReaders context.CancelFunc

	mu      sync.Mutex
	groups  GroupsHistory
	txn     TxnHistory
	compact CompactHistory
	tier    TierHistory
	passes  int
}

func (w *workloads) since() float64 { return time.Since(w.start).Seconds() }

func (w *workloads) fail(prefix string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
		w.errs.add(errorKind(prefix, err))
	}
}

// startWorkloads starts every extra workload.
func startWorkloads(ctx context.Context, c *cluster, seed int64, start time.Time, hist *historyWriter, errs *errorCounts) *workloads {
	w := &workloads{c: c, start: start, hist: hist, errs: errs, seed: uint64(seed), rng: rand.New(rand.NewPCG(uint64(seed), 25)),
		tier: TierHistory{End: map[TP]int64{}, EarliestLocal: map[TP]int64{}}, groups: GroupsHistory{Final: map[TP]int64{}}}
	wctx, stop := context.WithCancel(ctx)
	rctx, stopReaders := context.WithCancel(ctx)
	w.stop, w.stopReaders = stop, stopReaders
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.runGroup(wctx) }()
	for i := range txnProducers {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.runTxnProducer(wctx, i) }()
	}
	w.wg.Add(4)
	go func() { defer w.wg.Done(); w.readCommitted(rctx) }()
	go func() { defer w.wg.Done(); w.runCompactProducer(wctx) }()
	go func() { defer w.wg.Done(); w.runTieredProducer(wctx) }()
	go func() { defer w.wg.Done(); w.tierPasses(rctx) }()
	return w
}

// finish stops the workloads (the group members commit and leave, the
// producers end their transactions and flush) and waits for them.
func (w *workloads) finish() {
	w.stop()
	w.stopReaders()
	w.wg.Wait()
}

// --- consumer groups ---

// runGroup keeps groupMembers members in the group, replacing one every
// few seconds (a member that leaves commits first; its partitions move,
// the next owner starts from the committed offsets).
func (w *workloads) runGroup(ctx context.Context) {
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var members []running
	next := 0
	add := func() {
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := running{cancel, make(chan struct{})}
		name := fmt.Sprintf("member-%d", next)
		next++
		go func() { defer close(r.done); w.runMember(mctx, name) }()
		members = append(members, r)
	}
	for range groupMembers {
		add()
	}
	// The first replacement comes a few seconds after the group's first
	// commit (a short run on a busy machine may take long to form the
	// group), the next ones every 8–16 s.
	for first := true; ctx.Err() == nil; first = false {
		if first {
			for ctx.Err() == nil && !w.anyCommit() {
				wait(ctx, 200*time.Millisecond)
			}
			wait(ctx, time.Duration(2+w.rng.IntN(3))*time.Second)
		} else {
			wait(ctx, time.Duration(8+w.rng.IntN(8))*time.Second)
		}
		if ctx.Err() != nil {
			break
		}
		i := w.rng.IntN(len(members))
		members[i].cancel()
		<-members[i].done
		members = append(members[:i], members[i+1:]...)
		add()
	}
	for _, m := range members {
		m.cancel()
		<-m.done
	}
}

// anyCommit reports whether a group member has committed yet.
func (w *workloads) anyCommit() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.groups.Commits) > 0
}

func (w *workloads) runMember(ctx context.Context, name string) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.c.addrs...),
		kgo.ClientID("chaos-group-"+name),
		kgo.ConsumerGroup(groupName),
		kgo.ConsumeTopics(topicNames(w.c.o.Topics)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)
	if err != nil {
		w.fail("group:", err)
		return
	}
	defer cl.Close() // leaves the group
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, 1000)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				w.fail("group:", err)
			}
		})
		var ds []GroupDelivery
		fs.EachRecord(func(r *kgo.Record) {
			ds = append(ds, GroupDelivery{Member: name, TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value)})
		})
		if len(ds) > 0 {
			w.mu.Lock()
			w.groups.Deliveries = append(w.groups.Deliveries, ds...)
			w.mu.Unlock()
			for _, d := range ds {
				w.hist.write(d.event())
			}
		}
		w.commit(ctx, cl, name)
		cl.AllowRebalance()
	}
	w.commit(ctx, cl, name)
}

// commit commits what the member polled and records each partition the
// coordinator acknowledged.
func (w *workloads) commit(ctx context.Context, cl *kgo.Client, name string) {
	unc := cl.UncommittedOffsets()
	if len(unc) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	sent := w.since()
	cl.CommitOffsetsSync(cctx, unc, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		ack := w.since()
		if err != nil {
			w.fail("group-commit:", err)
			return
		}
		offsets := map[TP]int64{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				offsets[TP{t.Topic, p.Partition}] = p.Offset
			}
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TP{t.Topic, p.Partition}
				off, ok := offsets[tp]
				if !ok {
					continue
				}
				if p.ErrorCode != 0 {
					w.fail("group-commit:", kerr.ErrorForCode(p.ErrorCode))
					continue
				}
				gc := GroupCommit{Member: name, Generation: req.Generation, TP: tp, Offset: off, SentS: sent, AckS: ack}
				w.mu.Lock()
				w.groups.Commits = append(w.groups.Commits, gc)
				w.mu.Unlock()
				w.hist.write(gc.event())
			}
		}
	})
}

// groupFinal reads the group's committed offsets once its members left.
func (w *workloads) groupFinal(ctx context.Context) error {
	deadline := time.Now().Add(finalReadBound)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := w.c.adm.FetchOffsets(rctx, groupName)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			at := w.since()
			w.groups.FinalS = at
			resp.Each(func(o kadm.OffsetResponse) {
				if o.At >= 0 {
					tp := TP{o.Topic, o.Partition}
					w.groups.Final[tp] = o.At
					w.hist.write(groupFinalEvent(tp, o.At, at))
				}
			})
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("groups: final committed offsets: %w", err)
		}
		wait(ctx, 500*time.Millisecond)
	}
}

// --- transactions ---

func (w *workloads) txnClient(id string, index int) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(w.c.addrs...),
		// Zone-local: after the idempotent producers' zones (b, c).
		kgo.ClientID(w.c.producerClientID("chaos-"+id, index+1)),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
}

// runTxnProducer runs transactions of one record per partition of
// txnTopic, a quarter of them aborted on purpose, until ctx ends. After
// an error whose outcome the client cannot settle it starts a new client
// with the same transactional ID (InitProducerID fences the old one).
func (w *workloads) runTxnProducer(ctx context.Context, index int) {
	id := fmt.Sprintf("chaos-txn-%d", index)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(w.seed, 890+uint64(index)))
	for n := 0; ctx.Err() == nil; n++ {
		wait(ctx, 100*time.Millisecond)
		if cl == nil {
			var err error
			if cl, err = w.txnClient(id, index); err != nil {
				w.fail("txn:", err)
				continue
			}
		}
		if !w.transaction(cl, fmt.Sprintf("x%d-%d", index, n), rng.IntN(4) == 0) {
			cl.Close()
			cl = nil
		}
	}
}

// transaction runs one transaction and records it; it reports whether
// the client can go on.
func (w *workloads) transaction(cl *kgo.Client, id string, abort bool) bool {
	t := Txn{ID: id, Outcome: TxnUnknown}
	defer w.recordTxn(&t)
	if err := cl.BeginTransaction(); err != nil {
		w.fail("txn:", err)
		return false
	}
	var recs []*kgo.Record
	for p := range int32(extraParts) {
		v := fmt.Sprintf("%s-%d", id, p)
		t.Values = append(t.Values, v)
		recs = append(recs, &kgo.Record{Topic: txnTopic, Partition: p, Value: []byte(v)})
	}
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res := cl.ProduceSync(pctx, recs...)
	cancel()
	for _, r := range res {
		if r.Err == nil {
			t.Acks = append(t.Acks, Ack{TP: TP{r.Record.Topic, r.Record.Partition}, Offset: r.Record.Offset, Value: string(r.Record.Value)})
		}
	}
	perr := res.FirstErr()
	if perr != nil {
		w.fail("txn-produce:", perr)
	}
	ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ecancel()
	t.EndS = w.since()
	if perr != nil || abort {
		if err := cl.EndTransaction(ectx, kgo.TryAbort); err != nil {
			w.fail("txn-abort:", err)
			return false
		}
		t.Outcome = TxnAborted
		return true
	}
	if err := cl.EndTransaction(ectx, kgo.TryCommit); err != nil {
		w.fail("txn-commit:", err)
		// The outcome stays unknown; the documented retry aborts whatever
		// is still open.
		return cl.EndTransaction(ectx, kgo.TryAbort) == nil
	}
	t.Outcome = TxnCommitted
	return true
}

func (w *workloads) recordTxn(t *Txn) {
	if len(t.Values) == 0 {
		return
	}
	w.mu.Lock()
	w.txn.Txns = append(w.txn.Txns, *t)
	w.mu.Unlock()
	for _, e := range t.events() {
		w.hist.write(e)
	}
}

func (w *workloads) readCommittedClient(id string) (*kgo.Client, error) {
	parts := map[int32]kgo.Offset{}
	for p := range int32(extraParts) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	return kgo.NewClient(
		kgo.SeedBrokers(w.c.addrs...),
		kgo.ClientID(id),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnTopic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)
}

// readCommitted reads txnTopic with read_committed from the start until
// ctx ends, recording every record with the time it was read.
func (w *workloads) readCommitted(ctx context.Context) {
	cl, err := w.readCommittedClient("chaos-read-committed")
	if err != nil {
		w.fail("txn-read:", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := w.since()
		fs.EachError(func(_ string, _ int32, err error) { w.fail("txn-read:", err) })
		fs.EachRecord(func(r *kgo.Record) {
			tr := TxnRead{TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value), S: at}
			w.mu.Lock()
			w.txn.Reads = append(w.txn.Reads, tr)
			w.mu.Unlock()
			w.hist.write(tr.event(OpTxnRead))
		})
	}
}

// txnFinal commits a fence transaction (one record per partition, after
// every other transaction ended) and reads txnTopic with read_committed
// from the start until it has the fence of every partition.
func (w *workloads) txnFinal(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, finalReadBound)
	defer cancel()
	defer func() {
		w.hist.write(Event{Op: OpTxnFinal, Complete: w.txn.Complete})
	}()
	cl, err := w.txnClient("chaos-txn-fence", 2)
	if err != nil {
		w.fail("txn-fence:", err)
		return
	}
	committed := false
	for n := 0; !committed && ctx.Err() == nil; n++ {
		t := Txn{ID: fmt.Sprintf("fence-%d", n), Outcome: TxnUnknown}
		if err := cl.BeginTransaction(); err != nil {
			w.fail("txn-fence:", err)
			break
		}
		var recs []*kgo.Record
		for p := range int32(extraParts) {
			v := fmt.Sprintf("%s-%d", t.ID, p)
			t.Values = append(t.Values, v)
			recs = append(recs, &kgo.Record{Topic: txnTopic, Partition: p, Value: []byte(v)})
		}
		res := cl.ProduceSync(ctx, recs...)
		for _, r := range res {
			if r.Err == nil {
				t.Acks = append(t.Acks, Ack{TP: TP{r.Record.Topic, r.Record.Partition}, Offset: r.Record.Offset, Value: string(r.Record.Value)})
			}
		}
		t.EndS = w.since()
		try := kgo.TryCommit
		if res.FirstErr() != nil {
			try = kgo.TryAbort
		}
		if err := cl.EndTransaction(context.WithoutCancel(ctx), try); err == nil {
			if try == kgo.TryCommit {
				t.Outcome, committed = TxnCommitted, true
			} else {
				t.Outcome = TxnAborted
			}
		} else {
			w.fail("txn-fence:", err)
		}
		w.recordTxn(&t)
		if !committed {
			wait(ctx, 500*time.Millisecond)
		}
	}
	cl.Close()
	if !committed {
		return
	}
	fence := w.txn.Txns[len(w.txn.Txns)-1].Values
	rc, err := w.readCommittedClient("chaos-read-committed-final")
	if err != nil {
		w.fail("txn-read:", err)
		return
	}
	defer rc.Close()
	want := map[string]bool{}
	for _, v := range fence {
		want[v] = true
	}
	for len(want) > 0 && ctx.Err() == nil {
		fs := rc.PollFetches(ctx)
		at := w.since()
		fs.EachRecord(func(r *kgo.Record) {
			tr := TxnRead{TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value), S: at}
			w.txn.Final = append(w.txn.Final, tr)
			w.hist.write(tr.event(OpTxnFinalRead))
			delete(want, tr.Value)
		})
	}
	w.txn.Complete = len(want) == 0
}

// --- compacted topic ---

// producerClient is an idempotent acks=all producer; zoneIndex picks its
// zone when the producers are zone-local. Its batches stay within half of
// segmentBytes, the topic's segment.bytes: a batch larger than a segment
// is refused (MESSAGE_TOO_LARGE, as Kafka's RECORD_BATCH_TOO_LARGE), and
// the records a producer buffers while its requests are held by a fault
// would otherwise make one (seed 41 with zone-local producers: 361
// records of the compacted topic failed so).
func (w *workloads) producerClient(id string, zoneIndex int, segmentBytes int32) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(w.c.addrs...),
		kgo.ClientID(w.c.producerClientID(id, zoneIndex)),
		kgo.ProducerBatchMaxBytes(segmentBytes/2),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
}

// runCompactProducer rewrites compactKeys keys over and over (key i to
// partition i mod extraParts), values "c<seq>".
func (w *workloads) runCompactProducer(ctx context.Context) {
	cl, err := w.producerClient("chaos-compacted-producer", 0, compactSegmentBytes)
	if err != nil {
		w.fail("compacted:", err)
		return
	}
	rng := rand.New(rand.NewPCG(w.seed, 1176))
	w.pace(ctx, compactRate, func(seq int64) {
		ki := rng.IntN(compactKeys)
		r := &kgo.Record{Topic: compactTopic, Partition: int32(ki % extraParts), Key: fmt.Appendf(nil, "k%d", ki), Value: fmt.Appendf(nil, "c%d", seq)}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			cw := CompactWrite{TP: TP{r.Topic, r.Partition}, Key: string(r.Key), Value: string(r.Value), Seq: seq, Acked: err == nil, Offset: r.Offset}
			if err != nil {
				w.fail("compacted-produce:", err)
				cw.Offset = 0
			}
			w.mu.Lock()
			w.compact.Writes = append(w.compact.Writes, cw)
			w.mu.Unlock()
			w.hist.write(cw.event(err))
		})
	})
	flush(cl)
}

// pace calls send with 0, 1, ... rate times a second until ctx ends.
func (w *workloads) pace(ctx context.Context, rate int, send func(seq int64)) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		send(seq)
	}
}

// flush waits (bounded) for a producer's buffered records to be
// answered, then closes it (what is left fails: not acknowledged).
func flush(cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = cl.Flush(ctx)
	cl.Close()
}

// endOffsets returns the high watermarks of a topic's partitions.
func (w *workloads) endOffsets(ctx context.Context, topic string) (map[TP]int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lo, err := w.c.adm.ListEndOffsets(rctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[TP]int64{}
	for p := range int32(extraParts) {
		o, ok := lo.Lookup(topic, p)
		if !ok || o.Err != nil {
			return nil, fmt.Errorf("%s/%d: end offset: %v", topic, p, o.Err)
		}
		out[TP{topic, p}] = o.Offset
	}
	return out, nil
}

// readAll reads topic from the start until every partition reached its
// offset in ends (the record at end-1 read), calling each for each
// record; it reports whether it got there before ctx ended.
func (w *workloads) readAll(ctx context.Context, topic, id string, ends map[TP]int64, each func(r *kgo.Record)) (bool, error) {
	parts := map[int32]kgo.Offset{}
	left := map[TP]int64{}
	for tp, end := range ends {
		parts[tp.Partition] = kgo.NewOffset().AtStart()
		if end > 0 {
			left[tp] = end
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.c.addrs...),
		kgo.ClientID(id),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
	)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	for len(left) > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { w.fail("read:", err) })
		fs.EachRecord(func(r *kgo.Record) {
			tp := TP{r.Topic, r.Partition}
			each(r)
			if end, ok := left[tp]; ok && r.Offset >= end-1 {
				delete(left, tp)
			}
		})
	}
	return len(left) == 0, nil
}

// compactFinal reads the compacted topic from the start to its high
// watermarks.
func (w *workloads) compactFinal(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, finalReadBound)
	defer cancel()
	ends, err := w.retryEnds(ctx, compactTopic)
	if err == nil {
		w.compact.Complete, err = w.readAll(ctx, compactTopic, "chaos-compacted-final", ends, func(r *kgo.Record) {
			cr := CompactRead{TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
			w.compact.Final = append(w.compact.Final, cr)
			w.hist.write(cr.event())
		})
	}
	w.fail("compacted-final:", err)
	w.hist.write(Event{Op: OpCompactFinal, Complete: w.compact.Complete})
}

// retryEnds is endOffsets retried until ctx ends.
func (w *workloads) retryEnds(ctx context.Context, topic string) (map[TP]int64, error) {
	for {
		ends, err := w.endOffsets(ctx, topic)
		if err == nil || ctx.Err() != nil {
			return ends, err
		}
		wait(ctx, 500*time.Millisecond)
	}
}

// --- tiered topic ---

// runTieredProducer writes "y<seq>" round-robin over the tiered topic's
// partitions; each record carries a 200-byte key so segments fill.
func (w *workloads) runTieredProducer(ctx context.Context) {
	cl, err := w.producerClient("chaos-tiered-producer", 1, tieredSegmentBytes)
	if err != nil {
		w.fail("tiered:", err)
		return
	}
	pad := []byte(strings.Repeat("x", 200))
	w.pace(ctx, tieredRate, func(seq int64) {
		r := &kgo.Record{Topic: tieredTopic, Partition: int32(seq % extraParts), Key: pad, Value: fmt.Appendf(nil, "y%d", seq)}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				w.fail("tiered-produce:", err)
				return
			}
			a := Ack{TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value)}
			w.mu.Lock()
			w.tier.Acks = append(w.tier.Acks, a)
			w.mu.Unlock()
			w.hist.write(tierProduceEvent(a))
		})
	})
	flush(cl)
}

// tierPasses reads the tiered topic from offset 0 again and again during
// the run, each pass a new consumer (so "earliest" is asked anew) up to
// the high watermarks at its start, bounded by tierPassEvery*2.
func (w *workloads) tierPasses(ctx context.Context) {
	for ctx.Err() == nil {
		wait(ctx, tierPassEvery)
		if ctx.Err() != nil {
			return
		}
		ends, err := w.endOffsets(ctx, tieredTopic)
		if err != nil {
			w.fail("tiered-read:", err)
			continue
		}
		pass := w.passes
		w.passes++
		pctx, cancel := context.WithTimeout(ctx, 2*tierPassEvery)
		_, err = w.readAll(pctx, tieredTopic, fmt.Sprintf("chaos-tiered-pass-%d", pass), ends, func(r *kgo.Record) {
			w.tierRead(pass, r)
		})
		cancel()
		w.fail("tiered-read:", err)
	}
}

func (w *workloads) tierRead(pass int, r *kgo.Record) {
	tr := TierRead{Pass: pass, TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value)}
	w.mu.Lock()
	w.tier.Reads = append(w.tier.Reads, tr)
	w.mu.Unlock()
	w.hist.write(tr.event())
}

// tierFinal reads the tiered topic from offset 0 to its high watermarks
// and asks each partition's earliest local offset (ListOffsets -4).
func (w *workloads) tierFinal(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, finalReadBound)
	defer cancel()
	ends, err := w.retryEnds(ctx, tieredTopic)
	if err != nil {
		w.fail("tiered-final:", err)
		return
	}
	w.tier.End = ends
	if _, err := w.readAll(ctx, tieredTopic, "chaos-tiered-final", ends, func(r *kgo.Record) { w.tierRead(-1, r) }); err != nil {
		w.fail("tiered-final:", err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = tieredTopic
	for p := range int32(extraParts) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -4 // earliest local (KIP-1005)
		rp.CurrentLeaderEpoch = -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, w.c.admCl)
	if err != nil {
		w.fail("tiered-earliest-local:", err)
	} else {
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					w.tier.EarliestLocal[TP{rt.Topic, rp.Partition}] = rp.Offset
				}
			}
		}
	}
	for _, tp := range sortedTPs(ends) {
		w.hist.write(tierEndEvent(tp, ends[tp], w.tier.EarliestLocal[tp]))
	}
}

// final runs the final reads (after healing and the workloads' end) and
// puts what every workload saw into h.
func (w *workloads) final(ctx context.Context, h *History) error {
	err := w.groupFinal(ctx)
	if err == nil {
		w.groupProjected(ctx)
	}
	w.txnFinal(ctx)
	w.txnProjected(ctx)
	w.compactFinal(ctx)
	w.tierFinal(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	h.Groups, h.Txn, h.Compact, h.Tier = &w.groups, &w.txn, &w.compact, &w.tier
	return err
}
