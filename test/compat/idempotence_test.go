package compat

import (
	"context"
	kbin "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// dropProxy sits between Kafka clients and one broker and breaks
// connections in the middle of Produce requests, the two ways a network
// can: before the request reaches the broker (the batch is lost and must be
// retried), and after the broker answered but before the client sees the
// answer (the batch is in the log, the client does not know, and its retry
// must not append it again). The broker advertises the proxy's address, so
// every connection of the client goes through it.
type dropProxy struct {
	ln       net.Listener
	target   string
	every    int64 // break every n-th Produce request
	maxDrops int64

	produces    atomic.Int64
	dropsBefore atomic.Int64
	dropsAfter  atomic.Int64
	enabled     atomic.Bool
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       map[net.Conn]struct{}
}

func newDropProxy(t *testing.T, every, maxDrops int64) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, every: every, maxDrops: maxDrops, conns: map[net.Conn]struct{}{}}
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) serve(target string) {
	p.target = target
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.relay(c)
			}()
		}
	}()
}

func (p *dropProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := kbin.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// relay forwards one client connection request by request. Kafka answers
// the requests of a connection in order, so a request/response lock step is
// faithful (it only removes pipelining).
func (p *dropProxy) relay(client net.Conn) {
	broker, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(broker, true)
	defer func() {
		client.Close()
		broker.Close()
		p.track(client, false)
		p.track(broker, false)
	}()
	for {
		req, err := readFrame(client)
		if err != nil || len(req) < 6 {
			return
		}
		drop := 0
		if apiKey := int16(kbin.BigEndian.Uint16(req[4:6])); apiKey == 0 && p.enabled.Load() {
			n := p.produces.Add(1)
			if n%p.every == 0 && p.dropsBefore.Load()+p.dropsAfter.Load() < p.maxDrops {
				drop = 1 + int(n/p.every)%2 // alternate: 1 = before, 2 = after the broker saw it
			}
		}
		if drop == 1 {
			p.dropsBefore.Add(1)
			return
		}
		if _, err := broker.Write(req); err != nil {
			return
		}
		resp, err := readFrame(broker)
		if err != nil {
			return
		}
		if drop == 2 {
			p.dropsAfter.Add(1)
			return
		}
		if _, err := client.Write(resp); err != nil {
			return
		}
	}
}

// produceThroughDrops produces n records (values "000000".."n-1", spread over
// the topic's partitions by key) through a proxy that breaks connections
// mid-request, and returns how many times each value ended up in the log.
func produceThroughDrops(t *testing.T, topic string, n int, opts ...kgo.Opt) (counts map[string]int, outOfOrder int, proxy *dropProxy) {
	t.Helper()
	proxy = newDropProxy(t, 7, 40)
	port := proxy.ln.Addr().(*net.TCPAddr).Port
	b := brokertest.Start(t, brokertest.WithSetting("advertised.listeners", "PLAINTEXT://127.0.0.1:"+strconv.Itoa(port)))
	proxy.serve(b.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(proxy.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	proxy.enabled.Store(true)
	base := []kgo.Opt{
		kgo.SeedBrokers(proxy.addr()),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs acks=all
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(512), // many small requests, so many chances to break one
		kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }),
	}
	prod, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Add(1)
		v := fmt.Sprintf("%06d", i)
		prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 12)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	prod.Close()
	proxy.enabled.Store(false)
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d records were not acknowledged", f)
	}
	if proxy.dropsBefore.Load() == 0 || proxy.dropsAfter.Load() == 0 {
		t.Fatalf("the proxy broke %d requests before and %d after the broker: the faults were not exercised (%d produce requests)",
			proxy.dropsBefore.Load(), proxy.dropsAfter.Load(), proxy.produces.Load())
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(proxy.addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ends, err := kadm.NewClient(cons).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	counts = map[string]int{}
	last := map[int32]string{}
	for seen := int64(0); seen < total; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("consumed %d of %d records before the deadline", seen, total)
			}
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			counts[string(r.Value)]++
			if prev, ok := last[r.Partition]; ok && string(r.Value) <= prev {
				outOfOrder++
			}
			last[r.Partition] = string(r.Value)
		})
	}
	return counts, outOfOrder, proxy
}

// TestIdempotentProduceThroughConnectionDrops is the idempotence
// check: a default franz-go producer (idempotent, acks=all) whose
// connections break mid-request ends with every record exactly once, in
// order, in the log.
func TestIdempotentProduceThroughConnectionDrops(t *testing.T) {
	const n = 6000
	counts, outOfOrder, proxy := produceThroughDrops(t, "idem-drops", n)
	t.Logf("connections broken before the broker: %d, after it appended: %d (of %d produce requests)",
		proxy.dropsBefore.Load(), proxy.dropsAfter.Load(), proxy.produces.Load())
	var missing, dup int
	for i := range n {
		switch c := counts[fmt.Sprintf("%06d", i)]; {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(counts) != n || outOfOrder > 0 {
		t.Fatalf("%d records missing, %d duplicated, %d distinct of %d, %d out of order", missing, dup, len(counts), n, outOfOrder)
	}
}

// TestNonIdempotentProduceThroughConnectionDropsDuplicates is the control
// that shows the fault injection has teeth: the same stream without
// idempotence gets duplicates from the retries of batches the broker had
// already appended.
func TestNonIdempotentProduceThroughConnectionDropsDuplicates(t *testing.T) {
	const n = 3000
	counts, _, _ := produceThroughDrops(t, "plain-drops", n, kgo.DisableIdempotentWrite())
	dup := 0
	for _, c := range counts {
		if c > 1 {
			dup++
		}
	}
	if dup == 0 {
		t.Fatal("no duplicates without idempotence: the proxy did not break connections after the broker appended")
	}
	t.Logf("%d records duplicated without idempotence", dup)
}
