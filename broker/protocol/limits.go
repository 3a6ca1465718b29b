package protocol

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Limits that keep one client, or many, from taking the broker's memory.
//
//   - Frames: the reader reads a frame's size and API key first and checks
//     them (socket.request.max.bytes, the smaller limit of non-Produce
//     requests) and takes the frame's estimated decoded memory from the
//     server-wide budget (budget.go) before it allocates the frame; every
//     frame counts, however small. Large frames cannot take the share
//     kept for small ones, so a client that declares a large frame and
//     sends it slowly does not stop other clients' fetches. Large frames
//     are admitted fairly between connections: those of connections
//     holding none first, and no one frame takes the last quarter of the
//     large share, where other connections' large frames are still let
//     in while one connection holds the most it may; a large frame
//     is admitted only once its first 64 KiB arrived (a declared size
//     alone holds nothing), and must then arrive at 4 MiB/s after a 5 s
//     grace, or the connection is closed. A request
//     that parks (a long-poll Fetch, a group join) gives its share back
//     when it parks (Request.ReleaseMemory).
//   - Connections (connlimits.go): max.connections in all (the
//     inter-broker listener keeps reserved slots), per listener, per
//     client address, and connection creation rates (KIP-612); a
//     connection over any is closed at accept. A new connection must
//     authenticate (SASL listeners) or send its first complete request
//     within connections.authentication.timeout.ms. Each close is counted
//     by the Observer (ConnLimitObserver) with the listener and the
//     limit's key.
//   - Responses: a connection dispatches no new request while responses of
//     more than maxUnwrittenBytes, or more than maxUnwrittenResponses, wait
//     to be written, so a client that never reads its responses holds at
//     most one response beyond that (bounded by fetch.max.bytes), and its
//     next requests stay unread in the socket.
//   - Encoding: a Fetch response carrying largeResponseBytes of records or
//     more is encoded while holding one of GOMAXPROCS-1 broker-wide slots
//     (encodeResponse). Encoding copies the records (a memmove the Go
//     scheduler cannot preempt): eight connections asking for 16 MiB
//     answers at once took both cores of a 2-core broker and held an
//     acks=all producer's one-record Produce up to 450 ms; waiting
//     encoders are parked, so small requests keep a core.

// Limits bound what one request may make a handler do. Zero values mean
// the defaults.
type Limits struct {
	// FetchMaxBytes is fetch.max.bytes: the most record bytes one Fetch
	// response carries (Kafka's default, 55 MiB), whatever MaxBytes the
	// request asks for; a MaxBytes of 0 or less gets one batch (KIP-74's
	// minimum), as in Kafka. Only the first batch of a response may be
	// larger (KIP-74).
	FetchMaxBytes int32
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots (1000)
	// and FetchSessionMaxPartitions the partitions one fetch session may
	// hold (fetch_session.go).
	FetchSessionSlots         int
	FetchSessionMaxPartitions int
}

// DefaultFetchMaxBytes is Kafka's fetch.max.bytes default.
const DefaultFetchMaxBytes = 55 << 20

func (l Limits) fetchMaxBytes() int {
	if l.FetchMaxBytes <= 0 {
		return DefaultFetchMaxBytes
	}
	return int(l.FetchMaxBytes)
}

// checkFrame is readFrame's check of a frame's size and key: the limit of
// non-Produce requests.
func (c *conn) checkFrame(key int16, size int32) error {
	if key != kmsg.Produce.Int16() && size > c.srv.cfg.MaxNonProduceRequestBytes {
		return fmt.Errorf("%w: %s request of %d bytes, max %d", ErrFrameTooLarge, kmsg.NameForKey(key), size, c.srv.cfg.MaxNonProduceRequestBytes)
	}
	return nil
}

// minFrameRate is the slowest a frame's body may arrive once admitted,
// after frameGrace: a client holding budget while it trickles a large
// frame is closed (a 100 MiB frame has 30 s, a 1 MiB one 5 s).
const (
	minFrameRate = 4 << 20 // bytes per second
	frameGrace   = 5 * time.Second
)

// admitFrame takes a frame's share of the memory budget before the frame
// is allocated (waiting for room; an error when the connection closes
// meanwhile), and gives the rest of the frame a deadline (minFrameRate).
func (c *conn) admitFrame(key int16, size int32) (*memHold, error) {
	large := size > smallFrameBytes
	g, err := c.srv.memory.acquire(c.ctx, c.info.ConnID, int64(size)*decodeAmplification, large)
	if err != nil {
		return nil, fmt.Errorf("waiting for request memory: %w", err)
	}
	deadline := time.Now().Add(frameGrace + time.Duration(size)*time.Second/minFrameRate)
	if idle := c.srv.cfg.IdleTimeout; idle > 0 && time.Now().Add(idle).Before(deadline) {
		deadline = time.Now().Add(idle)
	}
	_ = c.nc.SetReadDeadline(c.capFirst(deadline))
	if c.srv.isClosing() {
		// Shutdown moved the deadline to now before this one: keep it.
		_ = c.nc.SetReadDeadline(time.Now())
	}
	return &memHold{b: c.srv.memory, g: g}, nil
}

// memHold is one request's share of the memory budget, given back once:
// when the request is handled, or earlier when it parks.
type memHold struct {
	b    *budget
	g    grant
	done atomic.Bool
}

func (m *memHold) release() {
	if m != nil && m.done.CompareAndSwap(false, true) {
		m.b.release(m.g)
	}
}

// ReleaseMemory gives the request's share of the in-flight memory budget
// back before the handler returns. Handlers that park (a long-poll Fetch)
// call it before they wait, so parked requests never hold the budget that
// other connections' requests need; the parked request's own memory is
// bounded by max.connections (one request handled per connection).
func (r *Request) ReleaseMemory() { r.mem.release() }

// Per-connection bound on responses waiting to be written.
const (
	maxUnwrittenBytes     = 1 << 20
	maxUnwrittenResponses = 8
)

// unwritten counts a connection's encoded responses not yet written.
type unwritten struct {
	n       atomic.Int64
	bytes   atomic.Int64
	written chan struct{} // signalled (non-blocking) after every write
}

func newUnwritten() *unwritten {
	return &unwritten{written: make(chan struct{}, 1)}
}

func (u *unwritten) add(frame []byte) {
	u.n.Add(1)
	u.bytes.Add(int64(len(frame)))
}

func (u *unwritten) done(frame []byte) {
	u.n.Add(-1)
	u.bytes.Add(-int64(len(frame)))
	select {
	case u.written <- struct{}{}:
	default:
	}
}

func (u *unwritten) full() bool {
	return u.n.Load() >= maxUnwrittenResponses || u.bytes.Load() > maxUnwrittenBytes
}

// largeResponseBytes is the size of records from which a Fetch response
// is encoded in one of the server's encode slots.
const largeResponseBytes = 1 << 20

// newEncodeSlots returns the broker-wide encode slots: all cores but one,
// at least one.
func newEncodeSlots() chan struct{} {
	return make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))
}

// encodeResponse encodes resp as a response frame. A large Fetch response
// waits for an encode slot and is encoded into a buffer sized for it
// (one allocation, no copies as it grows).
func (s *Server) encodeResponse(correlationID int32, resp kmsg.Response) []byte {
	n := fetchRecordBytes(resp)
	if n < largeResponseBytes {
		return appendResponse(nil, correlationID, resp)
	}
	s.encodeSlots <- struct{}{}
	defer func() { <-s.encodeSlots }()
	return appendResponse(make([]byte, 0, n+64<<10), correlationID, resp)
}

// fetchRecordBytes is the size of the records a Fetch response carries
// (0 for other responses).
func fetchRecordBytes(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 0
	for _, t := range f.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}
