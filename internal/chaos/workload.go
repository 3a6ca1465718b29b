package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// errorCounts counts errors by kind (Kafka error name, or a short class).
type errorCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errorCounts) add(kind string) {
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string]int{}
	}
	e.m[kind]++
	e.mu.Unlock()
}

func (e *errorCounts) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.m))
	for k, v := range e.m {
		out[k] = v
	}
	return out
}

// errorKind names an error for the errors_seen counts.
func errorKind(prefix string, err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return prefix + ke.Message
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return prefix + "TIMEOUT"
	case errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
		return prefix + "CANCELLED"
	}
	s := shortError(err.Error())
	// A wrapped cause names the kind better than the wrapper alone
	// ("producer ID has a fatal, unrecoverable error" says nothing of why).
	root := err
	for u := errors.Unwrap(root); u != nil; u = errors.Unwrap(root) {
		root = u
	}
	if root != err {
		if r := shortError(root.Error()); r != s {
			s += " (" + r + ")"
		}
	}
	return prefix + s
}

// shortError is an error message up to its first colon, at most 40 bytes.
func shortError(s string) string {
	if i := strings.IndexAny(s, ":"); i > 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// producer is one idempotent acks=all producer: record values are
// "p<index>-<sequence>", unique in the run; what the cluster acknowledged
// is kept with its offset.
type producer struct {
	index int
	cl    *kgo.Client
	tps   []TP
	rate  int // records per second

	mu      sync.Mutex
	acks    []Ack
	sent    int64
	failed  int
	errs    *errorCounts
	hist    *historyWriter
	stopped chan struct{}
}

func newProducer(index int, clientID string, addrs []string, tps []TP, rate int, errs *errorCounts, hist *historyWriter) (*producer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ClientID(clientID),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(2000),
		kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		return nil, err
	}
	return &producer{index: index, cl: cl, tps: tps, rate: rate, errs: errs, hist: hist, stopped: make(chan struct{})}, nil
}

// run produces until ctx ends, paced at rate records per second.
func (p *producer) run(ctx context.Context) {
	defer close(p.stopped)
	interval := time.Second / time.Duration(max(p.rate, 1))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tp := p.tps[(int(seq)+p.index)%len(p.tps)]
		value := recordValue(p.index, seq)
		r := &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)}
		p.mu.Lock()
		p.sent++
		p.mu.Unlock()
		p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.failed++
				p.errs.add(errorKind("produce:", err))
				p.hist.write(Event{Op: OpProduce, Topic: r.Topic, Partition: r.Partition, Value: string(r.Value), Error: err.Error()})
				return
			}
			p.acks = append(p.acks, Ack{TP: TP{r.Topic, r.Partition}, Offset: r.Offset, Value: string(r.Value)})
			p.hist.write(Event{Op: OpProduce, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
	}
}

// finish waits for run to return and for the buffered records to be
// answered (at most timeout), then closes the client.
func (p *producer) finish(timeout time.Duration) error {
	<-p.stopped
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := p.cl.Flush(ctx)
	p.cl.Close() // fails what is left: not acknowledged
	if err != nil {
		return fmt.Errorf("producer %d: flush: %w", p.index, err)
	}
	return nil
}

func (p *producer) counts() (acked int, sent int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks), p.sent
}

// fetcher is a consumer pinned to one broker: it sends Fetch requests
// (ReplicaID -1, its zone as client.rack, KIP-392) to that broker only,
// whether it leads or follows, for every partition, and records each
// record read and each high watermark reported, with the broker's
// incarnation (the checker's phantom-read and HWM-regression inputs).
type fetcher struct {
	b    *broker
	cl   *kgo.Client
	tps  []TP
	errs *errorCounts

	mu  sync.Mutex
	pos map[TP]int64
	// skipUntil rests partitions this broker does not hold (with more
	// than one broker per zone, or after a reassignment): an error answer
	// is immediate, and asking again at once would spin.
	skipUntil map[TP]time.Time
	obs       []Observation
	lastHWM   map[hwmKey]int64
	regress   []HWMRegression
	requests  int
	stopped   chan struct{}
	start     time.Time // of the workload, for the times of findings
	hist      *historyWriter
}

type hwmKey struct {
	TP
	incarnation int
}

func newFetcher(b *broker, addrs []string, tps []TP, errs *errorCounts, start time.Time, hist *historyWriter) (*fetcher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ClientID(fmt.Sprintf("chaos-fetcher-%d", b.id)),
		kgo.Rack(b.zone),
		// v12: topics by name (v13+ name them by ID).
		kgo.MaxVersions(kversion.V3_0_0()),
		kgo.RequestTimeoutOverhead(5*time.Second),
	)
	if err != nil {
		return nil, err
	}
	f := &fetcher{b: b, cl: cl, tps: tps, errs: errs, pos: map[TP]int64{}, skipUntil: map[TP]time.Time{}, lastHWM: map[hwmKey]int64{}, stopped: make(chan struct{}), start: start, hist: hist}
	return f, nil
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.stopped)
	defer f.cl.Close()
	for ctx.Err() == nil {
		inc, up := f.b.Incarnation()
		if !up {
			wait(ctx, 100*time.Millisecond)
			continue
		}
		req := f.request()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := f.cl.Broker(int(f.b.id)).Request(rctx, req)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.errs.add(errorKind("fetch:", err))
				wait(ctx, 200*time.Millisecond) // retry backoff
			}
			continue
		}
		after, _ := f.b.Incarnation()
		f.handle(resp.(*kmsg.FetchResponse), inc, after == inc)
	}
}

// wait pauses a retry loop (a backoff, not synchronisation).
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (f *fetcher) request() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = 4 << 20
	req.SessionID = 0
	req.SessionEpoch = -1
	req.Rack = f.b.zone
	f.mu.Lock()
	defer f.mu.Unlock()
	byTopic := map[string]int{}
	now := time.Now()
	for _, tp := range f.tps {
		if now.Before(f.skipUntil[tp]) {
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = tp.Partition
		p.FetchOffset = f.pos[tp]
		p.PartitionMaxBytes = 512 << 10
		p.CurrentLeaderEpoch = -1
		p.LastFetchedEpoch = -1
		p.LogStartOffset = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

func (f *fetcher) handle(resp *kmsg.FetchResponse, inc int, sameIncarnation bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if resp.ErrorCode != 0 {
		f.errs.add(errorKind("fetch:", kerr.ErrorForCode(resp.ErrorCode)))
		return
	}
	dec := kgo.DefaultDecompressor()
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			tp := TP{t.Topic, rp.Partition}
			if rp.ErrorCode != 0 {
				err := kerr.ErrorForCode(rp.ErrorCode)
				f.errs.add(errorKind("fetch:", err))
				if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) {
					f.skipUntil[tp] = time.Now().Add(time.Second)
				}
				continue
			}
			if sameIncarnation && rp.HighWatermark >= 0 {
				k := hwmKey{tp, inc}
				if last, ok := f.lastHWM[k]; ok && rp.HighWatermark < last {
					reg := HWMRegression{TP: tp, Broker: f.b.id, Incarnation: inc, From: last, To: rp.HighWatermark,
						AtS: time.Since(f.start).Seconds()}
					f.regress = append(f.regress, reg)
					f.hist.write(Event{T: reg.AtS, Op: OpHWMRegression, Topic: tp.Topic, Partition: tp.Partition, Broker: f.b.id,
						Incarnation: inc, From: last, To: rp.HighWatermark})
				}
				f.lastHWM[k] = rp.HighWatermark // each fall counts once
			}
			if rp.HighWatermark >= 0 && f.pos[tp] > rp.HighWatermark {
				// Read again what the broker (this or a new incarnation) no
				// longer calls committed: if it serves other records there
				// later, one of the two reads is a phantom the checker sees.
				f.pos[tp] = rp.HighWatermark
			}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: f.pos[tp], Topic: t.Topic, Partition: rp.Partition}, rp, dec, nil)
			if fp.Err != nil {
				f.errs.add(errorKind("fetch:", fp.Err))
			}
			for _, r := range fp.Records {
				if r.Offset < f.pos[tp] {
					continue
				}
				f.obs = append(f.obs, Observation{TP: tp, Offset: r.Offset, Value: string(r.Value), Broker: f.b.id})
				f.hist.write(Event{Op: OpRead, Topic: tp.Topic, Partition: tp.Partition, Offset: r.Offset, Value: string(r.Value),
					Broker: f.b.id, Incarnation: inc})
				f.pos[tp] = r.Offset + 1
			}
		}
	}
}

// position returns how far the fetcher has read tp.
func (f *fetcher) position(tp TP) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos[tp]
}
