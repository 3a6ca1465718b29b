package protocol_test

import (
	"fmt"
	"net"
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
