package telemetry

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Compression types of PushTelemetry (Kafka's CompressionType ids).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// AcceptedCompressionTypes is what GetTelemetrySubscriptions offers, in
// Kafka's order of preference; none is always accepted (KIP-714).
var AcceptedCompressionTypes = []int8{codecZstd, codecLZ4, codecGzip, codecSnappy}

// DecompressionRatio bounds a payload's decompressed size: at most this
// many times MaxBytes. OTLP metrics compress a few times (repeated names
// and attribute keys); a payload inflating further is refused
// (TELEMETRY_TOO_LARGE) after at most that many bytes were produced.
const DecompressionRatio = 8

// MaxElements bounds the protobuf fields of one payload, counted before
// it is unmarshalled: a field can become a Go struct of a hundred bytes
// or more from two bytes of input, so the decompressed size alone does
// not bound memory. A Java client pushing per-partition metrics of a
// thousand partitions stays well below it.
const MaxElements = 1 << 16

// maxDepth bounds message nesting (AnyValue nests through lists and
// key/value lists; metrics themselves are six levels deep).
const maxDepth = 32

// zstdMaxWindow: the window size RFC 8878 asks every decoder to support;
// a frame asking for more is refused before anything is allocated.
const zstdMaxWindow = 8 << 20

// maxSnappyRatio: a snappy block cannot expand much more than 21 times
// (a 3-byte copy of 64 bytes); one declaring more is corrupt.
const maxSnappyRatio = 24

// decodeSlots bounds the payloads decompressed and decoded at once, so
// what many concurrent pushes hold together is bounded too.
var decodeSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// Sentinel errors of decoding; Push maps them to error codes.
var (
	// ErrTooLarge: the payload decompresses to more than its limit
	// (TELEMETRY_TOO_LARGE).
	ErrTooLarge = errors.New("telemetry payload too large")
	// ErrUnsupportedCompression: a compression type outside 0-4
	// (UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCompression = errors.New("unsupported compression type")
	// ErrInvalid: the payload is not a compressed OTLP MetricsData, or
	// exceeds MaxElements or the nesting limit (INVALID_RECORD).
	ErrInvalid = errors.New("invalid telemetry payload")
)

// point is one number a client pushed.
type point struct {
	metric string
	attrs  string // sorted k=v pairs, comma separated
	kind   pointKind
	value  float64
}

type pointKind uint8

const (
	kindGauge         pointKind = iota
	kindDeltaSum                // added to what came before
	kindCumulativeSum           // replaces what came before
)

// decodePayload decompresses payload (at most limit bytes out) and
// returns the number data points of its gauges and sums; histograms,
// summaries and exponential histograms are skipped.
func decodePayload(codec int8, payload []byte, limit int64) ([]point, error) {
	decodeSlots <- struct{}{}
	defer func() { <-decodeSlots }()
	raw, err := decompress(codec, payload, limit)
	if err != nil {
		return nil, err
	}
	return decodeMetrics(raw)
}

// decompress returns payload decompressed, failing with ErrTooLarge once
// more than limit bytes came out.
func decompress(codec int8, payload []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch codec {
	case codecNone:
		if int64(len(payload)) > limit {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), limit)
		}
		return payload, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrInvalid, err)
		}
		r = zr
	case codecSnappy:
		return decodeSnappy(payload, limit)
	case codecLZ4:
		r = lz4.NewReader(bytes.NewReader(payload))
	case codecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrInvalid, err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedCompression, codec)
	}
	// One byte past the limit tells a payload of exactly limit bytes
	// from a longer one.
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, limit+1))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
	case err != nil:
		return nil, fmt.Errorf("%w: decompressing: %w", ErrInvalid, err)
	case n > limit:
		return nil, fmt.Errorf("%w: decompresses to more than %d bytes", ErrTooLarge, limit)
	}
	return out.Bytes(), nil
}

// xerialMagic starts snappy as the Java client writes it (snappy-java's
// SnappyOutputStream): the magic, two int32 versions, then blocks of an
// int32 length and a raw snappy block. franz-go sends one raw block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decodeSnappy(payload []byte, limit int64) ([]byte, error) {
	// Two passes: the declared sizes first (nothing is decoded if they
	// add up to more than limit), then every block into one buffer of
	// exactly their total.
	var total int64
	err := snappyBlocks(payload, func(b []byte) error {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return fmt.Errorf("%w: snappy: %w", ErrInvalid, err)
		}
		if n > maxSnappyRatio*len(b)+64 {
			return fmt.Errorf("%w: snappy block claims %d bytes from %d", ErrInvalid, n, len(b))
		}
		if total += int64(n); total > limit {
			return fmt.Errorf("%w: decompresses to more than %d bytes", ErrTooLarge, limit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, total)
	err = snappyBlocks(payload, func(b []byte) error {
		dec, err := s2.Decode(out[len(out):total], b)
		if err != nil {
			return fmt.Errorf("%w: snappy: %w", ErrInvalid, err)
		}
		out = out[:len(out)+len(dec)]
		return nil
	})
	return out, err
}

// snappyBlocks calls fn with each raw snappy block of payload: the blocks
// of xerial framing, else payload itself.
func snappyBlocks(payload []byte, fn func([]byte) error) error {
	if !bytes.HasPrefix(payload, xerialMagic) {
		return fn(payload)
	}
	if len(payload) < 16 {
		return fmt.Errorf("%w: short xerial snappy header", ErrInvalid)
	}
	for rest := payload[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return fmt.Errorf("%w: truncated xerial snappy block", ErrInvalid)
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return fmt.Errorf("%w: truncated xerial snappy block", ErrInvalid)
		}
		if err := fn(rest[4 : 4+n]); err != nil {
			return err
		}
		rest = rest[4+n:]
	}
	return nil
}

// decodeMetrics unmarshals an OTLP MetricsData after checking its shape
// (checkShape) and flattens its gauges and sums.
func decodeMetrics(raw []byte) ([]point, error) {
	var md metricspb.MetricsData
	budget := MaxElements
	if err := checkShape(raw, md.ProtoReflect().Descriptor(), 0, &budget); err != nil {
		return nil, err
	}
	if err := (proto.UnmarshalOptions{RecursionLimit: maxDepth}).Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var out []point
	add := func(name string, kind pointKind, dps []*metricspb.NumberDataPoint) {
		for _, dp := range dps {
			p := point{metric: name, attrs: renderAttrs(dp.GetAttributes()), kind: kind}
			switch v := dp.GetValue().(type) {
			case *metricspb.NumberDataPoint_AsDouble:
				p.value = v.AsDouble
			case *metricspb.NumberDataPoint_AsInt:
				p.value = float64(v.AsInt)
			default:
				continue
			}
			out = append(out, p)
		}
	}
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				switch d := m.GetData().(type) {
				case *metricspb.Metric_Gauge:
					add(m.GetName(), kindGauge, d.Gauge.GetDataPoints())
				case *metricspb.Metric_Sum:
					kind := kindCumulativeSum
					if d.Sum.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
						kind = kindDeltaSum
					}
					add(m.GetName(), kind, d.Sum.GetDataPoints())
				}
			}
		}
	}
	return out, nil
}

// checkShape walks a protobuf message without unmarshalling it: every
// field counts against budget, and fields of message type are walked
// with their descriptor (unknown fields are skipped whole, as the
// unmarshaller keeps them as bytes).
func checkShape(b []byte, md protoreflect.MessageDescriptor, depth int, budget *int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrInvalid, maxDepth)
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", ErrInvalid, protowire.ParseError(n))
		}
		b = b[n:]
		if *budget--; *budget < 0 {
			return fmt.Errorf("%w: more than %d protobuf fields", ErrInvalid, MaxElements)
		}
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: %w", ErrInvalid, protowire.ParseError(n))
			}
			if fd := fields.ByNumber(num); fd != nil && fd.Kind() == protoreflect.MessageKind {
				if err := checkShape(v, fd.Message(), depth+1, budget); err != nil {
					return err
				}
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: %w", ErrInvalid, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// maxLabelBytes bounds a label value made of client input.
const maxLabelBytes = 256

// renderAttrs renders data point attributes as sorted k=v pairs.
func renderAttrs(kvs []*commonpb.KeyValue) string {
	if len(kvs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		parts = append(parts, kv.GetKey()+"="+renderValue(kv.GetValue()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func renderValue(v *commonpb.AnyValue) string {
	switch v := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return v.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(v.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(v.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(v.BytesValue)
	}
	return "" // arrays and maps: not a label
}
