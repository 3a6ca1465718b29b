package netem

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MaxQueued bounds the bytes queued per direction of a connection.
const MaxQueued = 32 << 20

// CloseLinger bounds how long Close waits to deliver queued writes.
const CloseLinger = 2 * time.Second

// readSize is the buffer of one read from the underlying connection.
const readSize = 64 << 10

// Stats counts what the wrapped connections delayed. The zero value is
// ready; it is safe for concurrent use.
type Stats struct {
	conns    atomic.Int64
	bytesOut atomic.Int64
	bytesIn  atomic.Int64
}

// Conns is the number of connections wrapped.
func (s *Stats) Conns() int64 { return s.conns.Load() }

// BytesOut is the number of written bytes delivered after the delay.
func (s *Stats) BytesOut() int64 { return s.bytesOut.Load() }

// BytesIn is the number of received bytes handed to readers after the delay.
func (s *Stats) BytesIn() int64 { return s.bytesIn.Load() }

type chunk struct {
	due  time.Time
	data []byte
	err  error // receive side: the read error after data (io.EOF, ...)
}

// conn is a net.Conn with a one-way latency on each direction.
type conn struct {
	net.Conn
	latency time.Duration
	stats   *Stats

	wmu sync.Mutex // one Write at a time: a Write is one chunk, in order
	rmu sync.Mutex // one Read at a time

	mu        sync.Mutex
	wq        []chunk // to send, due-time order
	wqBytes   int
	werr      error   // the first error writing to the connection
	rq        []chunk // received, due-time order
	rqBytes   int
	rdeadline time.Time
	wdeadline time.Time
	closed    bool

	wnotify    chan struct{} // a chunk was queued for sending
	wspace     chan struct{} // the send queue shrank, or the write deadline changed
	rnotify    chan struct{} // a chunk was received, or the read deadline changed
	rspace     chan struct{} // the receive queue shrank
	closing    chan struct{} // Close was called: flush and stop
	down       chan struct{} // the connection is closed
	writerDone chan struct{}
	readerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// Wrap returns c with every chunk written to it delivered latency later
// and every chunk received handed to Read latency after it arrived. stats
// may be nil. A latency <= 0 returns c unchanged.
func Wrap(c net.Conn, latency time.Duration, stats *Stats) net.Conn {
	if latency <= 0 {
		return c
	}
	if stats == nil {
		stats = &Stats{}
	}
	stats.conns.Add(1)
	w := &conn{
		Conn: c, latency: latency, stats: stats,
		wnotify: make(chan struct{}, 1), wspace: make(chan struct{}, 1),
		rnotify: make(chan struct{}, 1), rspace: make(chan struct{}, 1),
		closing: make(chan struct{}), down: make(chan struct{}),
		writerDone: make(chan struct{}), readerDone: make(chan struct{}),
	}
	go w.writeLoop()
	go w.readLoop()
	return w
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Write queues a copy of p, due latency from now, and returns; it blocks
// only while MaxQueued bytes are queued.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	data := append([]byte(nil), p...)
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, net.ErrClosed
		case c.werr != nil:
			err := c.werr
			c.mu.Unlock()
			return 0, err
		case !c.wdeadline.IsZero() && !time.Now().Before(c.wdeadline):
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		case c.wqBytes == 0 || c.wqBytes+len(data) <= MaxQueued:
			c.wq = append(c.wq, chunk{due: time.Now().Add(c.latency), data: data})
			c.wqBytes += len(data)
			c.mu.Unlock()
			poke(c.wnotify)
			return len(p), nil
		}
		dl := c.wdeadline
		c.mu.Unlock()
		if !c.wait(c.wspace, dl) {
			continue // deadline passed: reported at the top
		}
	}
}

// wait blocks until ch is poked, the deadline (zero: none) passes or the
// connection closes; it returns false when the deadline passed.
func (c *conn) wait(ch chan struct{}, deadline time.Time) bool {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-c.down:
	case <-timeout:
		return false
	}
	return true
}

// writeLoop sends queued chunks at their due times until Close, then
// flushes the chunks due within CloseLinger.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lingerUntil time.Time
	for {
		c.mu.Lock()
		if len(c.wq) == 0 {
			c.mu.Unlock()
			if !lingerUntil.IsZero() {
				return
			}
			select {
			case <-c.wnotify:
			case <-c.closing:
				lingerUntil = time.Now().Add(CloseLinger)
			}
			continue
		}
		ch := c.wq[0]
		c.mu.Unlock()
		if !lingerUntil.IsZero() && ch.due.After(lingerUntil) {
			return // due after the linger: discarded by Close
		}
		if d := time.Until(ch.due); d > 0 {
			timer.Reset(d)
			if !lingerUntil.IsZero() {
				<-timer.C // closing, and due within the linger
			} else {
				select {
				case <-timer.C:
				case <-c.closing:
					timer.Stop()
					lingerUntil = time.Now().Add(CloseLinger)
					continue // re-check the head against the linger
				}
			}
		}
		_, err := c.Conn.Write(ch.data)
		c.mu.Lock()
		c.wq = c.wq[1:]
		c.wqBytes -= len(ch.data)
		if err != nil {
			c.werr = err
			c.wq, c.wqBytes = nil, 0
		}
		c.mu.Unlock()
		poke(c.wspace)
		if err != nil {
			if !lingerUntil.IsZero() {
				return
			}
			continue
		}
		c.stats.bytesOut.Add(int64(len(ch.data)))
	}
}

// readLoop reads from the connection and queues what arrives, due
// latency later, until a read fails.
func (c *conn) readLoop() {
	defer close(c.readerDone)
	buf := make([]byte, readSize)
	for {
		c.mu.Lock()
		for c.rqBytes >= MaxQueued {
			c.mu.Unlock()
			select {
			case <-c.rspace:
			case <-c.down:
				return
			}
			c.mu.Lock()
		}
		c.mu.Unlock()
		n, err := c.Conn.Read(buf)
		due := time.Now().Add(c.latency)
		c.mu.Lock()
		if n > 0 {
			c.rq = append(c.rq, chunk{due: due, data: append([]byte(nil), buf[:n]...)})
			c.rqBytes += n
		}
		if err != nil {
			c.rq = append(c.rq, chunk{due: due, err: err})
		}
		c.mu.Unlock()
		poke(c.rnotify)
		if err != nil {
			return
		}
	}
}

// Read returns received data once it is due.
func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		dl := c.rdeadline
		if !dl.IsZero() && !time.Now().Before(dl) {
			c.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		var next time.Time // zero: nothing queued
		if len(c.rq) > 0 {
			h := &c.rq[0]
			if !time.Now().Before(h.due) {
				if len(h.data) == 0 {
					err := h.err // stays queued: every later Read gets it too
					c.mu.Unlock()
					return 0, err
				}
				n := copy(p, h.data)
				h.data = h.data[n:]
				c.rqBytes -= n
				if len(h.data) == 0 {
					c.rq = c.rq[1:]
				}
				c.mu.Unlock()
				poke(c.rspace)
				c.stats.bytesIn.Add(int64(n))
				return n, nil
			}
			next = h.due
		}
		c.mu.Unlock()
		wakeAt := next
		if !dl.IsZero() && (wakeAt.IsZero() || dl.Before(wakeAt)) {
			wakeAt = dl
		}
		c.wait(c.rnotify, wakeAt) // the loop re-checks due times and the deadline
	}
}

// Close flushes the queued writes due within CloseLinger, closes the
// connection and waits for the wrapper's goroutines.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		_ = c.Conn.SetWriteDeadline(time.Now().Add(CloseLinger)) // a peer that does not read cannot hold Close
		<-c.writerDone
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.closeErr = c.Conn.Close()
		close(c.down)
		<-c.readerDone
	})
	return c.closeErr
}

// SetDeadline sets both deadlines.
func (c *conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline bounds Read, including the wait for delayed data.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdeadline = t
	c.mu.Unlock()
	poke(c.rnotify)
	return nil
}

// SetWriteDeadline bounds how long Write waits for queue space.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdeadline = t
	c.mu.Unlock()
	poke(c.wspace)
	return nil
}
