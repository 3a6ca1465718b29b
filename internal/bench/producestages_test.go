package bench

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeConn records what is written and reads back queued chunks.
type fakeConn struct {
	net.Conn
	written []byte
	chunks  [][]byte
}

func (c *fakeConn) Write(b []byte) (int, error) {
	c.written = append(c.written, b...)
	return len(b), nil
}
func (c *fakeConn) Read(b []byte) (int, error) {
	n := copy(b, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// batchBytes is a magic-2 record batch header with its sequence and count,
// followed by n bytes standing for the records.
func batchBytes(baseSeq, n int32) []byte {
	b := make([]byte, 61+n)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[53:], uint32(baseSeq))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	return b
}

// produceFrame is a sized Produce request of version v with acks and one
// topic's partitions, each with its record batches.
func produceFrame(v int16, acks int16, parts map[int32][][]byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(v)
	req.Acks = acks
	req.TimeoutMillis = 1000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "t"
	for p := int32(0); p < int32(len(parts)); p++ {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = p
		for _, b := range parts[p] {
			pp.Records = append(pp.Records, b...)
		}
		tp.Partitions = append(tp.Partitions, pp)
	}
	req.Topics = append(req.Topics, tp)
	return frame(req.Key(), v, req.IsFlexible(), req.AppendTo(nil))
}

// frame is a sized request: header (v1, or v2 when flexible) and body.
func frame(key, v int16, flexible bool, body []byte) []byte {
	h := binary.BigEndian.AppendUint16(make([]byte, 4), uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(v))
	h = binary.BigEndian.AppendUint32(h, 7)
	h = binary.BigEndian.AppendUint16(h, 3)
	h = append(h, "cli"...)
	if flexible {
		h = append(h, 0)
	}
	h = append(h, body...)
	binary.BigEndian.PutUint32(h, uint32(len(h)-4))
	return h
}

// response is a sized response of n body bytes.
func response(n int) []byte {
	b := make([]byte, 4+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

func TestProduceTracer(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	type promise struct {
		partition int32
		from      int // ms
		written   int // ms; -1: unmatched
		answered  int
		cold      bool
	}
	tests := []struct {
		name string
		// writes are frames written at their index's ms (0, 1, ...);
		// responses are read at readAt ms, whole, in chunks of chunk bytes.
		writes    [][]byte
		responses []int
		readAt    int
		chunk     int
		promises  []promise
	}{{
		name: "two requests, flexible and not, responses cut anywhere",
		writes: [][]byte{
			produceFrame(9, -1, map[int32][][]byte{0: {batchBytes(0, 2)}, 1: {batchBytes(0, 1)}}),
			produceFrame(7, -1, map[int32][][]byte{0: {batchBytes(2, 1)}}),
		},
		responses: []int{30, 20}, readAt: 10, chunk: 3,
		promises: []promise{
			{partition: 0, from: 0, written: 0, answered: 10, cold: true},
			{partition: 0, from: 0, written: 0, answered: 10, cold: true},
			{partition: 1, from: 0, written: 0, answered: 10, cold: true},
			{partition: 0, from: 10, written: 1, answered: 10},
		},
	}, {
		name: "other requests wait for their responses too",
		writes: [][]byte{
			frame(kmsg.ApiVersions.Int16(), 3, true, []byte{0, 0, 0}),
			produceFrame(13, -1, map[int32][][]byte{0: {batchBytes(0, 1), batchBytes(1, 1)}}),
		},
		responses: []int{40, 8}, readAt: 5, chunk: 1000,
		promises: []promise{
			{partition: 0, from: 1, written: 1, answered: 5, cold: true},
			{partition: 0, from: 6, written: 1, answered: 5},
		},
	}, {
		name: "acks=0 waits for nothing",
		writes: [][]byte{
			produceFrame(9, 0, map[int32][][]byte{0: {batchBytes(0, 1)}}),
			produceFrame(9, -1, map[int32][][]byte{0: {batchBytes(1, 1)}}),
		},
		responses: []int{8}, readAt: 5, chunk: 2,
		promises: []promise{
			{partition: 0, from: 0, written: -1},
			{partition: 0, from: 1, written: 1, answered: 5, cold: true},
		},
	}, {
		name: "a retried batch keeps its first write",
		writes: [][]byte{
			produceFrame(9, -1, map[int32][][]byte{0: {batchBytes(0, 1)}}),
			produceFrame(9, -1, map[int32][][]byte{0: {batchBytes(0, 1)}}),
		},
		responses: []int{8, 8}, readAt: 5, chunk: 5,
		promises: []promise{
			{partition: 0, from: 0, written: 0, answered: 5, cold: true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newProduceTracer()
			clock := at(0)
			tr.now = func() time.Time { return clock }
			fc := &fakeConn{}
			c := &tracedConn{Conn: fc, t: tr}
			for i, w := range tt.writes {
				clock = at(i)
				// Split one write in two, as a partial frame.
				if _, err := c.Write(w[:5]); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(w[5:]); err != nil {
					t.Fatal(err)
				}
			}
			var all []byte
			for _, n := range tt.responses {
				all = append(all, response(n)...)
			}
			for len(all) > 0 {
				k := min(tt.chunk, len(all))
				fc.chunks = append(fc.chunks, all[:k])
				all = all[k:]
			}
			clock = at(tt.readAt)
			buf := make([]byte, 4096)
			for len(fc.chunks) > 0 {
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			for i, p := range tt.promises {
				rs, ok := tr.promised(p.partition, at(p.from))
				if p.written < 0 {
					if ok {
						t.Errorf("promise %d: traced %+v, want unmatched", i, rs)
					}
					continue
				}
				if !ok {
					t.Fatalf("promise %d: unmatched", i)
				}
				if !rs.written.Equal(at(p.written)) || !rs.answered.Equal(at(p.answered)) || rs.cold != p.cold {
					t.Errorf("promise %d: written %v answered %v cold %v, want %v %v %v", i,
						rs.written.Sub(at(0)), rs.answered.Sub(at(0)), rs.cold, p.written, p.answered, p.cold)
				}
			}
		})
	}
}

func TestDecodeRequestMalformed(t *testing.T) {
	good := produceFrame(9, -1, map[int32][][]byte{0: {batchBytes(0, 1)}})[4:]
	tests := []struct {
		name   string
		frame  []byte
		awaits bool
	}{
		{"truncated header", good[:5], true},
		{"truncated body", good[:len(good)-30], true},
		{"not produce", frame(kmsg.Metadata.Int16(), 9, true, nil)[4:], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			awaits, batches := decodeRequest(tt.frame)
			if awaits != tt.awaits || batches != nil {
				t.Errorf("awaits %v batches %v, want %v and none", awaits, batches, tt.awaits)
			}
		})
	}
}
