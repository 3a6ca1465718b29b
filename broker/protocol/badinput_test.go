package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/server"
)

// rawFrame builds a size-prefixed request with header v1/v2.
func rawFrame(req kmsg.Request, correlationID int32) []byte {
	return brokertest.RequestFrame(req, correlationID)
}

func sizePrefixed(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A guard against hanging forever, not a timing assertion.
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

// readResponse reads one response frame and returns the correlation ID and
// the rest (header tags, if any, and body).
func readResponse(t *testing.T, c net.Conn) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}

// expectClosed checks that the broker closed the connection (EOF or reset)
// without sending anything.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("connection still open (read %d bytes, %v)", n, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed: %v", err)
	}
}

// apiVersionsWorks checks that a fresh connection is served.
func apiVersionsWorks(t *testing.T, addr string) {
	t.Helper()
	apiVersionsWorksOn(t, dial(t, addr))
}

// apiVersionsWorksOn checks that c answers ApiVersions.
func apiVersionsWorksOn(t *testing.T, c net.Conn) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0"
	if _, err := c.Write(rawFrame(req, 77)); err != nil {
		t.Fatal(err)
	}
	cid, body := readResponse(t, c)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil || cid != 77 || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions on a fresh connection: cid %d, err %v, code %d", cid, err, resp.ErrorCode)
	}
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *server.Config) { c.MaxRequestBytes = 1 << 20 }))
	big := brokertest.Start(t, brokertest.WithConfig(func(c *server.Config) { c.MaxRequestBytes = 16 << 20 }))

	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 99 // unsupported
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 4
	metaFrame := rawFrame(meta, 1)
	// Lie about the array length of topics: a million entries in a few bytes.
	lying := append([]byte{}, metaFrame...)
	binary.BigEndian.PutUint32(lying[len(lying)-5:], 1_000_000)

	tests := []struct {
		name string
		send []byte
	}{
		{"garbage", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64)},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xfe, 0, 18, 0, 0}},
		{"length below a header", []byte{0, 0, 0, 3, 0, 18, 0}},
		{"oversize", binary.BigEndian.AppendUint32(nil, 1<<20+1)},
		{"oversize non-produce", nonProduceBomb()},
		{"unknown API key", sizePrefixed([]byte{0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff})},
		{"unsupported version", rawFrame(produce, 1)},
		{"lying array length", lying},
		{"truncated frame then EOF", metaFrame[:len(metaFrame)-2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := b.Addr()
			if tt.name == "oversize non-produce" {
				addr = big.Addr()
			}
			c := dial(t, addr)
			if _, err := c.Write(tt.send); err != nil {
				// The broker refuses an oversize frame from its size and
				// key alone and closes while the rest is still being sent.
				if tt.name != "oversize non-produce" {
					t.Fatal(err)
				}
			}
			if tt.name == "truncated frame then EOF" {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, c)
			apiVersionsWorks(t, addr)
		})
	}
}

// TestApiVersionsUnsupportedVersion: Kafka answers an ApiVersions request
// of a version it does not know with a v0 response, header v0, carrying
// UNSUPPORTED_VERSION and its key list, and keeps the connection open.
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	b := brokertest.Start(t)
	c := dial(t, b.Addr())
	// ApiVersions v127 with a body the broker cannot know.
	payload := []byte{0, 18, 0, 127, 0, 0, 0, 5, 0xff, 0xff, 0, 1, 2, 3}
	if _, err := c.Write(sizePrefixed(payload)); err != nil {
		t.Fatal(err)
	}
	cid, body := readResponse(t, c)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if cid != 5 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("cid %d code %d, want 5 and UNSUPPORTED_VERSION", cid, resp.ErrorCode)
	}
	assertKeysMatchRegistry(t, resp.ApiKeys)

	// The same connection then negotiates normally.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
	if _, err := c.Write(rawFrame(req, 6)); err != nil {
		t.Fatal(err)
	}
	cid, body = readResponse(t, c)
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 4
	if err := resp.ReadFrom(body); err != nil || cid != 6 || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v4 after the downgrade: %v cid %d code %d", err, cid, resp.ErrorCode)
	}
	assertKeysMatchRegistry(t, resp.ApiKeys)
}

func assertKeysMatchRegistry(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	apis := protocol.APIs()
	if len(keys) != len(apis) {
		t.Fatalf("%d keys advertised, registry has %d", len(keys), len(apis))
	}
	for i, k := range keys {
		if k.ApiKey != apis[i].Key || k.MinVersion != apis[i].Min || k.MaxVersion != apis[i].Max {
			t.Fatalf("advertised %+v, registry %+v", k, apis[i])
		}
	}
	for _, must := range []int16{0, 1, 2, 3, 18, 19, 20} {
		if _, ok := protocol.Lookup(must); !ok {
			t.Fatalf("key %d not served", must)
		}
	}
}

// TestPipelinedResponsesInOrder writes many requests before reading any
// and checks the responses come back in request order.
func TestPipelinedResponsesInOrder(t *testing.T) {
	b := brokertest.Start(t)
	c := dial(t, b.Addr())
	var out []byte
	for i := range 50 {
		var req kmsg.Request
		if i%2 == 0 {
			m := kmsg.NewPtrMetadataRequest()
			m.Version = int16(i % 13)
			req = m
		} else {
			a := kmsg.NewPtrApiVersionsRequest()
			a.Version = 2
			req = a
		}
		out = append(out, rawFrame(req, int32(1000+i))...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if cid, _ := readResponse(t, c); cid != int32(1000+i) {
			t.Fatalf("response %d has correlation ID %d, want %d", i, cid, 1000+i)
		}
	}
}

// TestIdleConnections: a connection that sends nothing is closed after
// connections.max.idle.ms, but one whose request is still being served (a
// long poll three times longer than the idle time) is not: after the
// answer it still serves the next request.
func TestIdleConnections(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("connections.max.idle.ms", "1000"))
	expectClosed(t, dial(t, b.Addr()))

	c := dial(t, b.Addr())
	createTopic(t, newAdmin(t, b.Addr()), "idle", 1, nil)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11 // by topic name
	req.MaxWaitMillis = 3000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "idle", Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
	}}}
	if _, err := c.Write(rawFrame(req, 9)); err != nil {
		t.Fatal(err)
	}
	if cid, _ := readResponse(t, c); cid != 9 {
		t.Fatalf("correlation ID %d", cid)
	}
	apiv := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(rawFrame(apiv, 10)); err != nil {
		t.Fatal(err)
	}
	if cid, _ := readResponse(t, c); cid != 10 {
		t.Fatalf("correlation ID %d", cid)
	}
	expectClosed(t, c) // idle again after the answers
}

// TestFrameStartedBeforeIdleDeadline: a request whose first bytes arrive
// before the idle deadline is read whole even when its API key comes
// after it (CI saw this race in TestIdleConnections: the size read just
// before the deadline, the key just after, and the connection closed as
// "request frame not received in time").
func TestFrameStartedBeforeIdleDeadline(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("connections.max.idle.ms", "500"))
	c := dial(t, b.Addr())
	frame := rawFrame(kmsg.NewPtrApiVersionsRequest(), 7)
	if _, err := c.Write(frame[:4]); err != nil {
		t.Fatal(err)
	}
	// A slow client: the rest of the frame after the idle deadline.
	time.Sleep(time.Second)
	if _, err := c.Write(frame[4:]); err != nil {
		t.Fatal(err)
	}
	if cid, _ := readResponse(t, c); cid != 7 {
		t.Fatalf("correlation ID %d", cid)
	}
}

// nonProduceBomb is a 9 MiB Metadata request: under the 100 MiB frame limit
// (set to 16 MiB in the test) but over the 8 MiB limit of non-Produce
// requests.
func nonProduceBomb() []byte {
	payload := make([]byte, 9<<20)
	copy(payload, []byte{0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff})
	return sizePrefixed(payload)
}
