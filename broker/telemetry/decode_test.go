package telemetry

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// xerial frames raw as the Java client's snappy does.
func xerial(raw []byte) []byte {
	out := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	for len(raw) > 0 {
		n := min(len(raw), 32<<10)
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

// Payloads compressed by franz-go's own compressors (what its clients
// push) and by the Java client's snappy framing decode to the same points.
func TestDecodeCodecs(t *testing.T) {
	raw := otlp(t, dp{name: "org.apache.kafka.producer.node.request.latency.max", value: 12, attrs: map[string]string{"node_id": "1"}},
		dp{name: "org.apache.kafka.producer.connection.creation.total", kind: kindDeltaSum, value: 3})
	payloads := map[string]struct {
		codec int8
		b     []byte
	}{"none": {codecNone, raw}, "snappy-xerial": {codecSnappy, xerial(raw)}}
	for name, c := range map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()} {
		comp, err := kgo.DefaultCompressor(c)
		if err != nil {
			t.Fatal(err)
		}
		b, codec := comp.Compress(new(bytes.Buffer), raw)
		payloads[name] = struct {
			codec int8
			b     []byte
		}{int8(codec), append([]byte(nil), b...)}
	}
	for name, p := range payloads {
		t.Run(name, func(t *testing.T) {
			points, err := decodePayload(p.codec, p.b, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(points) != 2 || points[0].attrs != "node_id=1" || points[0].value != 12 || points[1].kind != kindDeltaSum || points[1].value != 3 {
				t.Fatalf("points %+v", points)
			}
		})
	}
}

// bomb compresses n zero bytes with codec without holding them.
func bomb(t *testing.T, codec int8, n int64) []byte {
	t.Helper()
	zeros := io.LimitReader(zeroReader{}, n)
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case codecGzip:
		w, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	case codecLZ4:
		w = lz4.NewWriter(&buf)
	case codecZstd:
		enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	case codecSnappy:
		// The densest snappy there is: raw blocks declaring their size.
		raw, _ := io.ReadAll(zeros)
		return xerial(raw)
	}
	if _, err := io.Copy(w, zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A payload that decompresses far beyond DecompressionRatio × MaxBytes is
// TELEMETRY_TOO_LARGE, and the broker allocates about the limit, not the
// bomb, to find out.
func TestDecompressionBomb(t *testing.T) {
	const maxBytes = DefaultMaxBytes
	const limit = maxBytes * DecompressionRatio // 8 MiB
	for name, tc := range map[string]struct {
		codec int8
		size  int64
	}{
		"gzip": {codecGzip, 256 << 20}, "lz4": {codecLZ4, 200 << 20}, "zstd": {codecZstd, 256 << 20},
		// Snappy expands at most ~21 times: a payload under MaxBytes
		// holds about 20 MiB.
		"snappy": {codecSnappy, 18 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			payload := bomb(t, tc.codec, tc.size)
			if len(payload) > maxBytes {
				t.Fatalf("bomb of %d bytes is itself over MaxBytes", len(payload))
			}
			cfg := wantedConfig()
			cfg.MaxBytes = maxBytes
			m, _ := newTestManager(cfg)
			sub := subscribe(t, m, [16]byte{})
			req := kmsg.NewPtrPushTelemetryRequest()
			req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics = sub.ClientInstanceID, sub.SubscriptionID, tc.codec, payload
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code := m.Push("bomber", req)
			runtime.ReadMemStats(&after)
			if code != kerr.TelemetryTooLarge.Code {
				t.Fatalf("got %v, want TELEMETRY_TOO_LARGE", kerr.ErrorForCode(code))
			}
			// The output buffer grows by doubling to limit+1; decoders
			// add their windows (zstd's is 1 MiB here).
			bound := min(uint64(4*limit+(4<<20)), uint64(tc.size/2))
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
				t.Fatalf("decoding a %d MiB bomb allocated %d MiB, want at most %d MiB", tc.size>>20, alloc>>20, bound>>20)
			}
		})
	}
}

// Two bytes of protobuf can become a Go struct of a hundred bytes: a
// payload of nothing but empty messages is refused before it is
// unmarshalled.
func TestElementBomb(t *testing.T) {
	payload := bytes.Repeat([]byte{0x0a, 0x00}, 512<<10) // 512 Ki empty ResourceMetrics, 1 MiB
	m, _ := newTestManager(wantedConfig())
	sub := subscribe(t, m, [16]byte{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code := push(m, sub, payload, false)
	runtime.ReadMemStats(&after)
	if code != kerr.InvalidRecord.Code {
		t.Fatalf("got %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("refusing the payload allocated %d KiB", alloc>>10)
	}
	// Just under the bound is decoded.
	ok := bytes.Repeat([]byte{0x0a, 0x00}, MaxElements)
	if _, err := decodeMetrics(ok); err != nil {
		t.Fatalf("%d empty messages: %v", MaxElements, err)
	}
	// Nesting beyond maxDepth (AnyValue array in array …) is refused.
	var deep []byte // an AnyValue
	for range maxDepth {
		arr := append(append([]byte{0x0a}, binary.AppendUvarint(nil, uint64(len(deep)))...), deep...) // ArrayValue.values
		deep = append(append([]byte{0x2a}, binary.AppendUvarint(nil, uint64(len(arr)))...), arr...)   // AnyValue.array_value
	}
	budget := MaxElements
	if err := checkShape(deep, (&commonpb.AnyValue{}).ProtoReflect().Descriptor(), 0, &budget); err == nil {
		t.Fatal("an AnyValue nested deeper than maxDepth was accepted")
	}
}
