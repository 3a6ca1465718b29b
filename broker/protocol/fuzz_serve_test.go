package protocol_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/protocol"
)

// FuzzServeRequest sends arbitrary request frames to a running broker and
// checks that each one is answered or closes its connection within a
// bound, and that the broker then still serves a fresh connection. Unlike
// FuzzDecodeRequest it reaches the handlers and the broker state with
// whatever decodes. Consumer-group keys are skipped (their handlers wait
// for rebalances by design); topic and partition counts are capped to keep
// the disk use of one run small.
func FuzzServeRequest(f *testing.F) {
	b := brokertest.Start(f, brokertest.WithLogger(discardLogger()))
	for _, api := range protocol.APIs() {
		for v := api.Min; v <= api.Max; v++ {
			req := kmsg.RequestForKey(api.Key)
			req.SetVersion(v)
			f.Add(rawFrame(req, 1)[4:])
		}
	}
	for _, topic := range []string{"t", "t.x", "t_x", ".."} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = 4
		ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}}
		f.Add(rawFrame(ct, 1)[4:])
	}
	// Forwarded records (zone-local produce) in both forms, well formed
	// and not, to a broker that reads no WAL bucket.
	for _, objects := range [][]byte{nil, {0, 1, 0, 1, 'b', 0, 1, 'k'}, {0, 9, 0xff}} {
		for _, tag := range []uint32{protocol.TagZoneLocalRecords, protocol.TagZoneLocalRange} {
			p := kmsg.NewPtrProduceRequest()
			p.Version, p.Acks, p.TimeoutMillis = 11, 1, 1000
			if objects != nil {
				p.UnknownTags.Set(protocol.TagZoneLocalObjects, objects)
			}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.UnknownTags.Set(tag, make([]byte, 18))
			p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{rp}}}
			f.Add(rawFrame(p, 1)[4:])
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		h, req, err := protocol.DecodeRequest(payload)
		if err == nil {
			if skip(req) {
				return
			}
			if fr, ok := req.(*kmsg.FetchRequest); ok {
				// No long polls: re-encode with MaxWait 0.
				fr.MaxWaitMillis = 0
				payload = rawFrame(fr, h.CorrelationID)[4:]
			}
		}
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
		if _, err := c.Write(frame); err != nil {
			return // closed already: fine
		}
		if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return // no response by design
		}
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer and no close within 20s for %x", payload)
		}
		apiVersionsWorks(t, b.Addr())
	})
}

func skip(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if len(r.Topics) > 4 {
			return true
		}
		for _, t := range r.Topics {
			if r.ValidateOnly {
				continue
			}
			if t.NumPartitions > 4 || len(t.ReplicaAssignment) > 4 {
				return true
			}
			for _, a := range t.ReplicaAssignment {
				if a.Partition > 4 {
					return true
				}
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			if t.Count > 8 && !r.ValidateOnly {
				return true
			}
		}
	case *kmsg.MetadataRequest:
		return len(r.Topics) > 8 // each may auto-create a topic
	}
	switch kmsg.Key(req.Key()) {
	case kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.Heartbeat,
		kmsg.LeaveGroup, kmsg.SyncGroup, kmsg.DescribeGroups, kmsg.ListGroups, kmsg.DeleteGroups, kmsg.OffsetDelete:
		return true
	}
	return false
}
