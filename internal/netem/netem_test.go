package netem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns the two ends of a loopback TCP connection.
func pair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

const chunkSize = 8

// sendNumbered writes n 8-byte sequence numbers to w, one Write each, and
// returns the time just before each Write.
func sendNumbered(t testing.TB, w io.Writer, n int) []time.Time {
	sent := make([]time.Time, n)
	for i := range n {
		var b [chunkSize]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		sent[i] = time.Now()
		if _, err := w.Write(b[:]); err != nil {
			t.Errorf("write %d: %v", i, err)
			return sent
		}
	}
	return sent
}

// receiveNumbered reads n sequence numbers from r, checks their order and
// returns when each was complete.
func receiveNumbered(t testing.TB, r io.Reader, n int) []time.Time {
	got := make([]time.Time, n)
	buf := make([]byte, 0, n*chunkSize)
	tmp := make([]byte, 3) // small reads: chunks are split and joined
	for len(buf) < n*chunkSize {
		k, err := r.Read(tmp)
		now := time.Now()
		before := len(buf) / chunkSize
		buf = append(buf, tmp[:k]...)
		for i := before; i < len(buf)/chunkSize; i++ {
			got[i] = now
			if v := binary.BigEndian.Uint64(buf[i*chunkSize:]); v != uint64(i) {
				t.Fatalf("chunk %d carries %d: order broken", i, v)
			}
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(buf), err)
		}
	}
	return got
}

// TestDelayAndOrder: in both directions of a wrapped connection every
// chunk arrives in order and no earlier than the latency after it was
// sent (monotonic clock; no upper bound is asserted).
func TestDelayAndOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration
		n       int
	}{
		{"1ms, many chunks", time.Millisecond, 500},
		{"25ms", 25 * time.Millisecond, 50},
	} {
		for _, dir := range []string{"write side", "read side"} {
			t.Run(tc.name+", "+dir, func(t *testing.T) {
				a, b := pair(t)
				var st Stats
				w := Wrap(a, tc.latency, &st)
				defer w.Close()
				from, to := io.Writer(w), io.Reader(b)
				if dir == "read side" {
					from, to = b, w
				}
				var sent []time.Time
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					sent = sendNumbered(t, from, tc.n)
				}()
				got := receiveNumbered(t, to, tc.n)
				wg.Wait()
				for i := range tc.n {
					if d := got[i].Sub(sent[i]); d < tc.latency {
						t.Fatalf("chunk %d arrived %v after it was sent, want at least %v", i, d, tc.latency)
					}
				}
				want := int64(tc.n * chunkSize)
				// The write loop counts a chunk once the underlying Write
				// returned, which can be after the peer read it: wait for
				// the count instead of reading it once.
				for deadline := time.Now().Add(5 * time.Second); dir == "write side" && st.BytesOut() != want && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if dir == "write side" && st.BytesOut() != want || dir == "read side" && st.BytesIn() != want {
					t.Errorf("stats out %d in %d, want %d delayed on the %s", st.BytesOut(), st.BytesIn(), want, dir)
				}
				if st.Conns() != 1 {
					t.Errorf("%d connections counted, want 1", st.Conns())
				}
			})
		}
	}
}

// TestWriteDoesNotWaitForDelivery: bandwidth is not serialised by the
// delay. With a latency of an hour, a hundred Writes return at once
// (a wrapper that waited per chunk would hang the test), nothing reaches
// the peer, and Close discards what is due after CloseLinger.
func TestWriteDoesNotWaitForDelivery(t *testing.T) {
	a, b := pair(t)
	var st Stats
	w := Wrap(a, time.Hour, &st)
	chunk := bytes.Repeat([]byte("x"), 1024)
	for i := range 100 {
		if n, err := w.Write(chunk); err != nil || n != len(chunk) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := b.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peer read %d bytes (%v) of data due in an hour", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st.BytesOut() != 0 {
		t.Errorf("%d bytes delivered, want 0", st.BytesOut())
	}
	if _, err := w.Write(chunk); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v, want net.ErrClosed", err)
	}
	if _, err := w.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: %v, want net.ErrClosed", err)
	}
}

// TestCloseDeliversQueued: data written just before Close still reaches
// the peer (after the delay), then the peer sees EOF.
func TestCloseDeliversQueued(t *testing.T) {
	a, b := pair(t)
	w := Wrap(a, 10*time.Millisecond, nil)
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "hello" {
		t.Fatalf("peer read %q, %v; want hello then EOF", got, err)
	}
}

// TestReadDeadlineAndEOF: deadlines bound the wait for delayed data, a
// deadline set from another goroutine wakes a blocked Read (the replica
// fetcher cancels that way), and the peer's close arrives after its data.
func TestReadDeadlineAndEOF(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		a, b := pair(t)
		w := Wrap(a, time.Hour, nil)
		defer w.Close()
		if _, err := b.Write([]byte("late")); err != nil {
			t.Fatal(err)
		}
		_ = w.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := w.Read(make([]byte, 4))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read: %v, want a timeout", err)
		}
	})
	t.Run("deadline set while blocked", func(t *testing.T) {
		a, _ := pair(t)
		w := Wrap(a, time.Millisecond, nil)
		defer w.Close()
		errc := make(chan error, 1)
		go func() {
			_, err := w.Read(make([]byte, 4))
			errc <- err
		}()
		_ = w.SetDeadline(time.Now())
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want os.ErrDeadlineExceeded", err)
		}
	})
	t.Run("EOF after data", func(t *testing.T) {
		a, b := pair(t)
		w := Wrap(a, 5*time.Millisecond, nil)
		defer w.Close()
		if _, err := b.Write([]byte("bye")); err != nil {
			t.Fatal(err)
		}
		b.Close()
		got, err := io.ReadAll(w)
		if err != nil || string(got) != "bye" {
			t.Fatalf("read %q, %v; want bye then EOF", got, err)
		}
		if _, err := w.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after EOF: %v, want io.EOF again", err)
		}
	})
	t.Run("write to a closed peer fails", func(t *testing.T) {
		a, b := pair(t)
		w := Wrap(a, time.Millisecond, nil)
		defer w.Close()
		b.Close()
		// The first writes may be queued before the reset is seen; a
		// later one must return the connection's error.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("writes to a closed peer keep succeeding")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

func TestWrapZeroLatency(t *testing.T) {
	a, _ := pair(t)
	if Wrap(a, 0, nil) != a {
		t.Error("latency 0 wrapped the connection")
	}
}

func TestDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	errNoZone := errors.New("no zone")
	for _, tc := range []struct {
		name    string
		remote  func(context.Context, string) (bool, error)
		wrapped bool
		err     error
	}{
		{"every address remote", nil, true, nil},
		{"remote", func(_ context.Context, a string) (bool, error) { return a == addr, nil }, true, nil},
		{"same zone", func(context.Context, string) (bool, error) { return false, nil }, false, nil},
		{"lookup fails", func(context.Context, string) (bool, error) { return false, errNoZone }, false, errNoZone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st Stats
			d := &Dialer{Latency: time.Millisecond, Remote: tc.remote, Stats: &st}
			c, err := d.DialContext(context.Background(), "tcp", addr)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, ok := c.(*conn); ok != tc.wrapped || (st.Conns() == 1) != tc.wrapped {
				t.Errorf("wrapped %v (stats %d), want %v", ok, st.Conns(), tc.wrapped)
			}
		})
	}
}

// BenchmarkThroughput streams 64 KiB writes through a wrapped connection:
// with the delay the throughput stays that of the link (no serialisation
// per chunk), compare with latency 0.
func BenchmarkThroughput(b *testing.B) {
	for _, lat := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond} {
		b.Run(lat.String(), func(b *testing.B) {
			a, p := pair(b)
			w := Wrap(a, lat, nil)
			defer w.Close()
			done := make(chan struct{})
			total := int64(b.N) * (64 << 10)
			go func() {
				defer close(done)
				_, _ = io.CopyN(io.Discard, p, total)
			}()
			buf := make([]byte, 64<<10)
			b.SetBytes(64 << 10)
			b.ResetTimer()
			for range b.N {
				if _, err := w.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		})
	}
}
