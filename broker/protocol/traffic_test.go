package protocol_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/traffic"
)

// TestTrafficCounters: Produce and consumer Fetch bytes are counted per
// path, whole frames included; the peer zone is the rack a Fetch sent on
// the connection (also for the connection's later Produce requests, as
// librdkafka uses one connection for both), else "unknown"; a rack that is
// no broker's zone is "other".
func TestTrafficCounters(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithLogger(discardLogger()), brokertest.WithSetting("broker.rack", "a"))
	createTopic(t, newAdmin(t, b.Addr()), "tr", 1, nil)
	ctr := b.Server().Traffic()

	nc, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(nc)
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID("traffic-test"))
	corr := int32(0)
	// roundTrip returns the request and response frame sizes.
	roundTrip := func(req kmsg.Request) (int, int) {
		corr++
		frame := fmtr.AppendRequest(nil, req, corr)
		if _, err := nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(rd, size[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, rd, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatal(err)
		}
		return len(frame), 4 + int(binary.BigEndian.Uint32(size[:]))
	}
	produce := func() kmsg.Request {
		batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte("counted")}})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "tr"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch, fetch.Rack = -1, 1<<20, -1, "zone-x"
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "tr"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	pIn1, pOut1 := roundTrip(produce()) // before any rack: unknown
	fIn, fOut := roundTrip(fetch)
	pIn2, pOut2 := roundTrip(produce()) // after the Fetch told the rack
	tests := []struct {
		zone string
		path traffic.Path
		dir  traffic.Direction
		want int
	}{
		{traffic.UnknownZone, traffic.Produce, traffic.In, pIn1},
		{traffic.UnknownZone, traffic.Produce, traffic.Out, pOut1},
		{traffic.OtherZone, traffic.Consume, traffic.In, fIn},
		{traffic.OtherZone, traffic.Consume, traffic.Out, fOut},
		{traffic.OtherZone, traffic.Produce, traffic.In, pIn2},
		{traffic.OtherZone, traffic.Produce, traffic.Out, pOut2},
	}
	for _, tt := range tests {
		if got := ctr.Bytes(tt.zone, tt.path, tt.dir); got != float64(tt.want) {
			t.Errorf("%s %s %s: %v bytes, want %d", tt.zone, tt.path, tt.dir, got, tt.want)
		}
	}
}

// TestClientIDZone: the strata_az=<zone> convention, alone or among other
// parts of a client ID.
func TestClientIDZone(t *testing.T) {
	for id, want := range map[string]string{
		"":                           "",
		"orders-svc":                 "",
		"strata_az=b":                "b",
		"orders-svc,strata_az=b":     "b",
		"orders-svc;strata_az=us-1a": "us-1a",
		"svc strata_az=c other=1":    "c",
		"strata_az=":                 "",
		"xstrata_az=b":               "",
	} {
		if got := protocol.ClientIDZone(id); got != want {
			t.Errorf("ClientIDZone(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestClientRacksAreNotLabels: the rack a client sends (client.rack, or
// strata_az= in its client ID) is a label value of
// strata_traffic_bytes_total only when it is a broker's zone; others are
// "other", so clients cannot create series at will.
func TestClientRacksAreNotLabels(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithLogger(discardLogger()), brokertest.WithSetting("broker.rack", "a"))
	createTopic(t, newAdmin(t, b.Addr()), "racks", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("racks"))
	if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		consume(t, b.Addr(), "racks", 1, kgo.Rack(fmt.Sprintf("rack-%d", i)))
		consume(t, b.Addr(), "racks", 1, kgo.ClientID(fmt.Sprintf("strata_az=az-%d", i)))
	}
	consume(t, b.Addr(), "racks", 1, kgo.Rack("a"))

	ch := make(chan prometheus.Metric, 1000)
	b.Server().Traffic().Collector().Collect(ch)
	close(ch)
	peers := map[string]bool{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "peer_zone" {
				peers[l.GetValue()] = true
			}
		}
	}
	want := map[string]bool{"a": true, traffic.OtherZone: true, traffic.UnknownZone: true}
	if !maps.Equal(peers, want) {
		t.Errorf("peer_zone label values %v, want %v", slices.Sorted(maps.Keys(peers)), slices.Sorted(maps.Keys(want)))
	}
}
