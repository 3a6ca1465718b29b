package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

// TestAcksZeroBeforeClose: a client that writes acks=0 Produce requests and
// closes its connection at once (kafka-go's default writer does) still has
// every batch the broker read appended: the requests read before the peer
// closed are served, not dropped with the connection.
func TestAcksZeroBeforeClose(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "fire", 1, nil)
	const rounds, perConn = 20, 10
	for round := range rounds {
		conn, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		var frames []byte
		for i := range perConn {
			batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: fmt.Appendf(nil, "%d-%d", round, i)}})
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 7, 0, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "fire"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			frames = append(frames, rawFrame(req, int32(i))...)
		}
		if _, err := conn.Write(frames); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	want := int64(rounds * perConn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(testCtx(t), "fire")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup("fire", 0)
		if o.Offset == want {
			return
		}
		if o.Offset > want || time.Now().After(deadline) {
			t.Fatalf("end offset %d, want %d: acks=0 batches written before a close were lost (or duplicated)", o.Offset, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShutdownResetsUnusedConnections: a graceful shutdown resets the
// connections that answered nothing but ApiVersions, so that a client whose
// first real request met the shutdown reads a reset, which it retries, and
// not an orderly close, which franz-go takes for a TLS or SASL
// misconfiguration and fails the request and the producer's buffered
// records with (TestIdempotentStreamSurvivesRestart lost 2,000 records that
// way, 2 runs in 100 under load). A connection that answered a real request
// still closes in order.
func TestShutdownResetsUnusedConnections(t *testing.T) {
	b := brokertest.Start(t)
	versions := dial(t, b.Addr()) // answered ApiVersions only
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "strata-test", "1.0"
	if _, err := versions.Write(rawFrame(av, 1)); err != nil {
		t.Fatal(err)
	}
	readResponse(t, versions)
	idle := dial(t, b.Addr())     // answered nothing
	apiVersionsWorks(t, b.Addr()) // idle has been accepted
	used := dial(t, b.Addr())     // answered Metadata
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	if _, err := used.Write(rawFrame(md, 2)); err != nil {
		t.Fatal(err)
	}
	readResponse(t, used)

	b.Stop()
	for name, c := range map[string]net.Conn{"ApiVersions only": versions, "idle": idle} {
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s connection after shutdown: read %v, want a reset (ECONNRESET)", name, err)
		}
	}
	if _, err := used.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("connection that answered Metadata after shutdown: read %v, want an orderly close (EOF)", err)
	}
}

// TestRefusedConnectionIsRetried: a connection refused by
// max.connections.per.ip (other sockets of its address hold every slot) is
// reset, not closed in order: an orderly close on a client's first request
// reads to franz-go as a TLS or SASL misconfiguration (ErrFirstReadEOF, not
// retried), a reset as a network failure. The raw read fails without the
// reset; the producer part checks, end to end, that a franz-go producer
// refused this way keeps its record and delivers it once slots are free.
func TestRefusedConnectionIsRetried(t *testing.T) {
	// franz-go uses a connection for metadata and one for produce.
	b := brokertest.Start(t, brokertest.WithSetting("max.connections.per.ip", "3"))
	var holders []net.Conn
	for range 3 {
		holders = append(holders, dial(t, b.Addr()))
		apiVersionsWorksOn(t, holders[len(holders)-1]) // its slot is taken
	}
	// Nothing written: a close with unread bytes is a reset anyway. The
	// reset may come before the dial returns.
	if refused, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second); err == nil {
		_ = refused.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = refused.Read(make([]byte, 1))
		refused.Close()
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a connection over max.connections.per.ip: read %v, want a reset (ECONNRESET)", err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}

	// The client's first request goes out after the broker refused the
	// connection (a loaded client, or a broker that refuses at once):
	// what it reads is the refusal's, not a close of its request.
	slowDial := func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, host)
		time.Sleep(100 * time.Millisecond)
		return c, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.Dialer(slowDial), kgo.DefaultProduceTopic("refused"), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(30*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produced := make(chan error, 1)
	go func() { produced <- cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("v")}).FirstErr() }()
	select {
	case err := <-produced:
		t.Fatalf("produce ended while its connections were refused: %v", err)
	case <-time.After(time.Second):
	}
	for _, h := range holders {
		h.Close()
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce after the slots were freed: %v", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("no produce answer 25 s after the slots were freed")
	}
}
