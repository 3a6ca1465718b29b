package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceStages splits the window records' produce latency (acks=all,
// plaintext clients only) at the Produce call and at the two moments the
// client's socket sees: when the Produce request carrying the record was
// written and when its response was read. Late is from the record's
// scheduled send to its Produce call (the load generator behind its
// schedule: its CPU), InProducer from the Produce call to the write
// (buffering, waiting to be drained into a request and for an in-flight
// slot: franz-go's part), Request the broker's and the wire's, Delivery
// from the response read to the record's promise. FromCall is the
// record's latency without Late: from its Produce call to its promise.
//
// ColdRecords counts the records produced before their producer had an
// answer from the record's partition: franz-go's idempotent producer keeps
// one request per partition in flight until the partition's first
// successful answer on a broker (recBuf.okOnSink, franz-go #223), so these
// wait for that answer. ColdLatency and WarmLatency are the produce latency
// of the two kinds, ColdInProducer and WarmInProducer their InProducer.
type ProduceStages struct {
	Late, InProducer, Request, Delivery *Histogram
	FromCall                            *Histogram
	ColdLatency, WarmLatency            *Histogram
	ColdInProducer, WarmInProducer      *Histogram
	ColdRecords                         int64
	// Unmatched counts the records (warmup included) whose request the
	// trace did not find (a retry under a new producer ID, a reconnect):
	// not in the histograms.
	Unmatched int64
}

// ProduceStagesSummary is ProduceStages in the report.
type ProduceStagesSummary struct {
	Late           LatencySummary `json:"late"`
	FromCall       LatencySummary `json:"from_produce_call"`
	InProducer     LatencySummary `json:"in_producer"`
	Request        LatencySummary `json:"request"`
	Delivery       LatencySummary `json:"delivery"`
	Cold           LatencySummary `json:"cold_records_latency,omitzero"`
	Warm           LatencySummary `json:"warm_records_latency,omitzero"`
	ColdInProducer LatencySummary `json:"cold_records_in_producer,omitzero"`
	WarmInProducer LatencySummary `json:"warm_records_in_producer,omitzero"`
	ColdRecords    int64          `json:"cold_records"`
	Unmatched      int64          `json:"unmatched_records,omitempty"`
}

// Summary returns the figures reported.
func (st *ProduceStages) Summary() *ProduceStagesSummary {
	return &ProduceStagesSummary{
		Late: st.Late.Summary(), FromCall: st.FromCall.Summary(),
		InProducer: st.InProducer.Summary(), Request: st.Request.Summary(), Delivery: st.Delivery.Summary(),
		Cold: st.ColdLatency.Summary(), Warm: st.WarmLatency.Summary(),
		ColdInProducer: st.ColdInProducer.Summary(), WarmInProducer: st.WarmInProducer.Summary(),
		ColdRecords: st.ColdRecords, Unmatched: st.Unmatched,
	}
}

func newProduceStages() *ProduceStages {
	return &ProduceStages{
		Late: NewHistogram(), FromCall: NewHistogram(),
		InProducer: NewHistogram(), Request: NewHistogram(), Delivery: NewHistogram(),
		ColdLatency: NewHistogram(), WarmLatency: NewHistogram(),
		ColdInProducer: NewHistogram(), WarmInProducer: NewHistogram(),
	}
}

// produceTracer follows one idempotent producer client's records from its
// connections: a dialer wraps them, decodes every Produce request written
// (each batch's partition, base sequence and record count) and times the
// read of each response (responses come in request order on a
// connection). The records' promises come per partition in sequence
// order, so the n-th record promised of a partition is sequence n.
type produceTracer struct {
	mu    sync.Mutex
	parts map[int32]*partitionTrace
	// unmatched counts promised records with no traced batch.
	unmatched atomic.Int64
	now       func() time.Time // time.Now; a test's clock
}

type partitionTrace struct {
	spans []traceSpan // written batches not yet promised, in sequence order
	next  int32       // sequence of the next record promised
	// firstAnswer is when the first response for this partition was read.
	firstAnswer time.Time
}

// tracedRequest is one Produce request written; answered is set when its
// response is read (under produceTracer.mu).
type tracedRequest struct {
	written, answered time.Time
	partitions        []int32
}

type traceSpan struct {
	base, n int32
	req     *tracedRequest
}

// wireBatch is one record batch of a Produce request.
type wireBatch struct {
	partition, baseSequence, records int32
}

func newProduceTracer() *produceTracer {
	return &produceTracer{parts: map[int32]*partitionTrace{}, now: time.Now}
}

func (t *produceTracer) part(p int32) *partitionTrace {
	pt := t.parts[p]
	if pt == nil {
		pt = &partitionTrace{}
		t.parts[p] = pt
	}
	return pt
}

// wrote records a Produce request's batches written at at.
func (t *produceTracer) wrote(batches []wireBatch, at time.Time) *tracedRequest {
	req := &tracedRequest{written: at}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range batches {
		pt := t.part(b.partition)
		if len(req.partitions) == 0 || req.partitions[len(req.partitions)-1] != b.partition {
			req.partitions = append(req.partitions, b.partition)
		}
		// A retry writes a batch again: its first write is when it left
		// the producer.
		if retry := len(pt.spans) > 0 && pt.spans[len(pt.spans)-1].base >= b.baseSequence; retry {
			continue
		}
		pt.spans = append(pt.spans, traceSpan{base: b.baseSequence, n: b.records, req: req})
	}
	return req
}

// answered records that req's response was read at at.
func (t *produceTracer) answered(req *tracedRequest, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !req.answered.IsZero() {
		return
	}
	req.answered = at
	for _, p := range req.partitions {
		if pt := t.part(p); pt.firstAnswer.IsZero() {
			pt.firstAnswer = at
		}
	}
}

// recordStages is where one record's latency went.
type recordStages struct {
	written, answered time.Time
	// cold: produced before its partition's first answer.
	cold bool
}

// promised is called from the record's promise, in the order franz-go
// finishes them; from is when the record's latency starts.
func (t *produceTracer) promised(partition int32, from time.Time) (recordStages, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.part(partition)
	seq := pt.next
	pt.next++
	for len(pt.spans) > 0 && pt.spans[0].base+pt.spans[0].n <= seq {
		pt.spans = pt.spans[1:]
	}
	if len(pt.spans) == 0 || pt.spans[0].base > seq || pt.spans[0].req.answered.IsZero() {
		t.unmatched.Add(1)
		return recordStages{}, false
	}
	req := pt.spans[0].req
	return recordStages{written: req.written, answered: req.answered, cold: from.Before(pt.firstAnswer)}, true
}

// record adds a window record's stages to st: its latency counts from
// from, it was given to Produce at sent and promised at now.
func (st *ProduceStages) record(rs recordStages, from, sent, now time.Time) {
	st.Late.Record(sent.Sub(from))
	st.FromCall.Record(now.Sub(sent))
	st.InProducer.Record(rs.written.Sub(sent))
	st.Request.Record(rs.answered.Sub(rs.written))
	st.Delivery.Record(now.Sub(rs.answered))
	if rs.cold {
		st.ColdLatency.Record(now.Sub(from))
		st.ColdInProducer.Record(rs.written.Sub(sent))
	} else {
		st.WarmLatency.Record(now.Sub(from))
		st.WarmInProducer.Record(rs.written.Sub(sent))
	}
}

// dialer is the kgo option that traces the client's connections, dialing
// with base (nil: a plain net.Dialer).
func (t *produceTracer) dialer(base func(ctx context.Context, network, host string) (net.Conn, error)) kgo.Opt {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := base(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &tracedConn{Conn: c, t: t}, nil
	})
}

// tracedConn decodes the requests written on a client connection and
// times their responses' reads. franz-go writes a request with one Write
// and reads through a bufio.Reader, so reads cut frames anywhere.
type tracedConn struct {
	net.Conn
	t *produceTracer

	mu      sync.Mutex
	pending []byte           // a request frame not yet complete
	waiting []*tracedRequest // one per request awaiting its response; nil: not a traced Produce

	// The response being read (read side only).
	sizeBuf  [4]byte
	sizeHave int
	bodyLeft int
}

func (c *tracedConn) Write(b []byte) (int, error) {
	now := c.t.now()
	c.mu.Lock()
	c.pending = append(c.pending, b...)
	for len(c.pending) >= 4 {
		size := int(binary.BigEndian.Uint32(c.pending))
		if len(c.pending) < 4+size {
			break
		}
		frame := c.pending[4 : 4+size]
		// Before the write: its response cannot be read before it waits.
		if awaits, batches := decodeRequest(frame); awaits {
			var req *tracedRequest
			if batches != nil {
				req = c.t.wrote(batches, now)
			}
			c.waiting = append(c.waiting, req)
		}
		c.pending = c.pending[4+size:]
	}
	if len(c.pending) == 0 {
		c.pending = c.pending[:0:0] // let the frame's buffer go
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	now := c.t.now()
	for rest := b[:n]; len(rest) > 0; {
		if c.sizeHave < 4 {
			k := copy(c.sizeBuf[c.sizeHave:], rest)
			c.sizeHave += k
			rest = rest[k:]
			if c.sizeHave < 4 {
				break
			}
			c.bodyLeft = int(binary.BigEndian.Uint32(c.sizeBuf[:]))
		}
		k := min(c.bodyLeft, len(rest))
		c.bodyLeft -= k
		rest = rest[k:]
		if c.bodyLeft == 0 {
			c.sizeHave = 0
			c.mu.Lock()
			var req *tracedRequest
			if len(c.waiting) > 0 {
				req = c.waiting[0]
				c.waiting = c.waiting[1:]
			}
			c.mu.Unlock()
			if req != nil {
				c.t.answered(req, now)
			}
		}
	}
	return n, err
}

var errShortRequest = errors.New("short request")

// decodeRequest reads a request frame (without its size): awaits says
// whether a response will come, batches lists a Produce request's record
// batches (nil for other requests or when the frame does not decode).
func decodeRequest(frame []byte) (awaits bool, batches []wireBatch) {
	r := kbin.Reader{Src: frame}
	key := r.Int16()
	version := r.Int16()
	_ = r.Int32() // correlation ID
	_ = r.UnsafeNullableString()
	if r.Complete() != nil {
		return true, nil
	}
	if key != kmsg.Produce.Int16() {
		return true, nil
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if req.IsFlexible() { // request header v2: tagged fields
		for n := r.Uvarint(); n > 0; n-- {
			_ = r.Uvarint()
			_ = r.Span(int(r.Uvarint()))
		}
	}
	if r.Complete() != nil || req.ReadFrom(r.Src) != nil {
		return true, nil
	}
	if req.Acks == 0 {
		return false, nil
	}
	batches = []wireBatch{}
	for _, tp := range req.Topics {
		for _, p := range tp.Partitions {
			for rec := p.Records; len(rec) > 0; {
				b, n, err := decodeBatchHeader(p.Partition, rec)
				if err != nil {
					break
				}
				batches = append(batches, b)
				rec = rec[n:]
			}
		}
	}
	return true, batches
}

// decodeBatchHeader reads the header of the record batch (magic 2) at the
// start of rec and returns its length.
func decodeBatchHeader(partition int32, rec []byte) (wireBatch, int, error) {
	const headerLen = 61 // through numRecords
	if len(rec) < headerLen {
		return wireBatch{}, 0, errShortRequest
	}
	n := 12 + int(int32(binary.BigEndian.Uint32(rec[8:])))
	if n < headerLen || n > len(rec) || rec[16] != 2 {
		return wireBatch{}, 0, errShortRequest
	}
	return wireBatch{
		partition:    partition,
		baseSequence: int32(binary.BigEndian.Uint32(rec[53:])),
		records:      int32(binary.BigEndian.Uint32(rec[57:])),
	}, n, nil
}
