package protocol_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

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
