package replication

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/record"
)

// TestProducePipelinedBehindAcksAll: a connection's Produce requests are
// appended one after another while an earlier acks=all request still waits
// for its followers, and the responses come back in request order. Both
// followers are frozen (SIGSTOP, long session and lag timeouts, so the ISR
// keeps them and the acks=all request cannot complete); a second Produce
// sent behind it on the same connection must reach the log before the
// followers resume. A server that waits for acks=all on the connection's
// only dispatch loop never appends it and the test fails.
func TestProducePipelinedBehindAcksAll(t *testing.T) {
	c := brokertest.StartProcessCluster(t, zones,
		brokertest.WithSetting("broker.session.timeout.ms", "60000"),
		brokertest.WithSetting("replica.lag.time.max.ms", "60000"))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "pipe", 1, nil)
	var leader int32
	var isr []int32
	waitFor(t, "a leader with a full ISR", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, "pipe")
		if err != nil {
			return false
		}
		p := md.Topics["pipe"].Partitions[0]
		leader, isr = p.Leader, p.ISR
		return leader > 0 && len(isr) == 3
	})
	leaderAddr := c.Processes[leader-1].Addr()
	leaderAdm := newClient(t, []string{leaderAddr})

	conn, err := net.Dial("tcp", leaderAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	produce := func(corr int32, acks int16, value string) {
		t.Helper()
		batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 7, acks, 60000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "pipe"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := conn.Write(brokertest.RequestFrame(req, corr)); err != nil {
			t.Fatal(err)
		}
	}
	readResponse := func() (int32, kmsg.ProduceResponseTopicPartition) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 7
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
		return int32(binary.BigEndian.Uint32(body[:4])), resp.Topics[0].Partitions[0]
	}
	size := func() int64 {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, leaderAdm.Broker(int(leader)))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.Dirs {
			for _, tp := range d.Topics {
				if tp.Topic == "pipe" {
					return tp.Partitions[0].Size
				}
			}
		}
		t.Fatal("partition pipe-0 not in DescribeLogDirs")
		return 0
	}

	// One acknowledged record with the full ISR, so the followers are in
	// sync before they freeze.
	produce(1, -1, "warm")
	if corr, p := readResponse(); corr != 1 || p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first produce: correlation %d %+v", corr, p)
	}
	for _, r := range isr {
		if r != leader {
			c.Processes[r-1].Pause()
		}
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, r := range isr {
				if r != leader {
					c.Processes[r-1].Resume()
				}
			}
		}
	}
	defer resume()

	before := size()
	produce(2, -1, "waits for the frozen followers")
	waitFor(t, "the acks=all batch in the leader's log", 20*time.Second, func() bool { return size() > before })
	parked := size()
	produce(3, 1, "sent behind it")
	waitFor(t, "the second batch appended while the first still waits for acks=all", 20*time.Second,
		func() bool { return size() > parked })
	resume()

	for i, want := range []struct {
		corr   int32
		offset int64
	}{{2, 1}, {3, 2}} {
		corr, p := readResponse()
		if corr != want.corr || p.ErrorCode != 0 || p.BaseOffset != want.offset {
			t.Fatalf("response %d: correlation %d, offset %d, error %v; want correlation %d offset %d (responses must keep request order)",
				i, corr, p.BaseOffset, kerr.ErrorForCode(p.ErrorCode), want.corr, want.offset)
		}
	}

}
