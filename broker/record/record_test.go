package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

func testRecords(n, valueSize int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			TimestampDelta: int64(i),
			Key:            []byte(fmt.Sprintf("key-%d", i)),
			Value:          bytes.Repeat([]byte{byte('a' + i%26)}, valueSize),
			Headers:        []RecordHeader{{Key: "h", Value: []byte("v")}},
		}
	}
	recs[0].Key = nil // a null key must survive
	return recs
}

func mustBuild(t testing.TB, spec BatchSpec, recs []Record) Batch {
	t.Helper()
	b, err := Build(spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func specWith(c Codec) BatchSpec {
	s := DefaultSpec()
	s.Codec = c
	s.BaseTimestamp = 1_700_000_000_000
	return s
}

// kmsgBatch encodes a batch independently of Build: kmsg types and the
// franz-go client's own compressor (raw snappy).
func kmsgBatch(t *testing.T, c Codec, n int) []byte {
	t.Helper()
	var body []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: []byte("k"), Value: []byte(fmt.Sprintf("value %d", i))}
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1) // the zero length varint took one byte
		body = r.AppendTo(body)
	}
	codecs := map[Codec]kgo.CompressionCodec{Gzip: kgo.GzipCompression(), Snappy: kgo.SnappyCompression(), LZ4: kgo.Lz4Compression(), Zstd: kgo.ZstdCompression()}
	if c != None {
		comp, err := kgo.DefaultCompressor(codecs[c])
		if err != nil {
			t.Fatal(err)
		}
		out, _ := comp.Compress(new(bytes.Buffer), body)
		body = append([]byte(nil), out...)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(c), LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 5, MaxTimestamp: 5 + int64(n-1), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: body,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], ComputeCRC(raw))
	return raw
}

func TestValidateAcceptsEveryCodec(t *testing.T) {
	for _, c := range allCodecs {
		t.Run("build/"+c.String(), func(t *testing.T) {
			recs := testRecords(50, 300)
			b := mustBuild(t, specWith(c), recs)
			got, err := Validate(b, 1<<20)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if len(got) != 1 || !bytes.Equal(got[0], b) {
				t.Fatalf("got %d batches", len(got))
			}
			dec, err := Records(got[0], MaxDecompressedBytes)
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if len(dec) != len(recs) {
				t.Fatalf("decoded %d records, want %d", len(dec), len(recs))
			}
			for i := range recs {
				if dec[i].OffsetDelta != int32(i) || !bytes.Equal(dec[i].Value, recs[i].Value) ||
					(dec[i].Key == nil) != (recs[i].Key == nil) || !bytes.Equal(dec[i].Key, recs[i].Key) ||
					dec[i].TimestampDelta != recs[i].TimestampDelta || len(dec[i].Headers) != 1 || dec[i].Headers[0].Key != "h" {
					t.Fatalf("record %d: got %+v", i, dec[i])
				}
			}
			// kmsg decodes what Build encoded.
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(c))
			if err != nil {
				t.Fatalf("franz-go cannot decompress our %v: %v", c, err)
			}
			var r kmsg.Record
			if err := r.ReadFrom(raw); err != nil || string(r.Value) != string(recs[0].Value) {
				t.Fatalf("kmsg record: %v %q", err, r.Value)
			}
		})
		t.Run("franz-go/"+c.String(), func(t *testing.T) {
			b := kmsgBatch(t, c, 20)
			if _, err := Validate(b, 1<<20); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRawSnappy(t *testing.T) {
	recs := testRecords(10, 100)
	var body []byte
	for i, r := range recs {
		body = appendRecord(body, int32(i), r)
	}
	b := rebuild(t, mustBuild(t, specWith(Snappy), recs), s2.EncodeSnappy(nil, body))
	if _, err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
}

func TestValidateSeveralBatches(t *testing.T) {
	var set []byte
	for _, c := range allCodecs {
		set = append(set, mustBuild(t, specWith(c), testRecords(3, 10))...)
	}
	got, err := Validate(set, 0)
	if err != nil || len(got) != len(allCodecs) {
		t.Fatalf("got %d batches, err %v", len(got), err)
	}
	for i, b := range got {
		if b.Header().Codec() != allCodecs[i] {
			t.Fatalf("batch %d codec %v", i, b.Header().Codec())
		}
	}
}

// rebuild replaces the payload of b and fixes length and CRC.
func rebuild(t testing.TB, b Batch, payload []byte) Batch {
	t.Helper()
	out := append(append([]byte(nil), b[:BatchHeaderSize]...), payload...)
	binary.BigEndian.PutUint32(out[posBatchLength:], uint32(len(out)-lengthFieldEnd))
	binary.BigEndian.PutUint32(out[posCRC:], ComputeCRC(out))
	return out
}

// mutate copies b, applies f and, when recrc, fixes the CRC so that only
// the intended defect remains.
func mutate(b Batch, recrc bool, f func(b []byte) []byte) []byte {
	out := f(append([]byte(nil), b...))
	if recrc && len(out) >= BatchHeaderSize {
		binary.BigEndian.PutUint32(out[posCRC:], crcOf(out))
	}
	return out
}

func crcOf(b []byte) uint32 {
	n := lengthFieldEnd + int(int32(binary.BigEndian.Uint32(b[posBatchLength:])))
	if n > len(b) || n < posAttributes {
		n = len(b)
	}
	return ComputeCRC(b[:n])
}

func TestValidateRejects(t *testing.T) {
	good := mustBuild(t, specWith(None), testRecords(5, 20))
	goodGzip := mustBuild(t, specWith(Gzip), testRecords(5, 20))
	var body []byte
	for i, r := range testRecords(5, 20) {
		body = appendRecord(body, int32(i), r)
	}
	put32 := func(pos int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[pos:], v); return b }
	}
	tests := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty", nil, 0, ErrInvalidRecord},
		{"bad crc", mutate(good, false, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0, ErrCorrupt},
		{"bad crc field", mutate(good, false, func(b []byte) []byte { b[posCRC] ^= 0x80; return b }), 0, ErrCorrupt},
		{"magic 1", mutate(good, true, func(b []byte) []byte { b[posMagic] = 1; return b }), 0, ErrUnsupportedMagic},
		{"magic 3", mutate(good, true, func(b []byte) []byte { b[posMagic] = 3; return b }), 0, ErrUnsupportedMagic},
		{"truncated header", good[:30], 0, ErrCorrupt},
		{"truncated length field", good[:7], 0, ErrCorrupt},
		{"truncated batch", good[:len(good)-3], 0, ErrCorrupt},
		{"trailing partial batch", append(append([]byte(nil), good...), good[:20]...), 0, ErrCorrupt},
		{"length below header", mutate(good, false, put32(posBatchLength, 10)), 0, ErrCorrupt},
		{"negative length", mutate(good, false, put32(posBatchLength, 0xffffffff)), 0, ErrCorrupt},
		{"length longer than data", mutate(good, false, put32(posBatchLength, uint32(len(good)))), 0, ErrCorrupt},
		{"length shorter than records", rebuild(t, good, body[:len(body)-4]), 0, ErrInvalidRecord},
		{"bytes after records", rebuild(t, good, append(append([]byte(nil), body...), 0, 0)), 0, ErrInvalidRecord},
		{"last offset delta", mutate(good, true, put32(posLastOffsetDelta, 3)), 0, ErrInvalidRecord},
		{"num records too high", mutate(good, true, func(b []byte) []byte {
			b = put32(posNumRecords, 6)(b)
			return put32(posLastOffsetDelta, 5)(b)
		}), 0, ErrInvalidRecord},
		{"zero records", mutate(good, true, func(b []byte) []byte {
			b = put32(posNumRecords, 0)(b)
			return put32(posLastOffsetDelta, 0xffffffff)(b)
		}), 0, ErrInvalidRecord},
		{"unknown codec 5", mutate(good, true, func(b []byte) []byte { b[posAttributes+1] |= 5; return b }), 0, ErrUnsupportedCodec},
		{"unknown codec 7", mutate(good, true, func(b []byte) []byte { b[posAttributes+1] |= 7; return b }), 0, ErrUnsupportedCodec},
		{"unknown attribute bit", mutate(good, true, func(b []byte) []byte { b[posAttributes] |= 0x80; return b }), 0, ErrInvalidRecord},
		{"control batch", mutate(good, true, func(b []byte) []byte { b[posAttributes+1] |= controlMask; return b }), 0, ErrInvalidRecord},
		{"garbage gzip", rebuild(t, goodGzip, []byte("this is not gzip at all")), 0, ErrCorrupt},
		{"truncated gzip", rebuild(t, goodGzip, goodGzip[BatchHeaderSize:len(goodGzip)-10]), 0, ErrCorrupt},
		{"garbage snappy", rebuild(t, mustBuild(t, specWith(Snappy), testRecords(2, 2)), []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}), 0, ErrCorrupt},
		{"garbage xerial", rebuild(t, mustBuild(t, specWith(Snappy), testRecords(2, 2)), append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 1)), 0, ErrCorrupt},
		{"garbage lz4", rebuild(t, mustBuild(t, specWith(LZ4), testRecords(2, 2)), []byte("garbage garbage")), 0, ErrCorrupt},
		{"garbage zstd", rebuild(t, mustBuild(t, specWith(Zstd), testRecords(2, 2)), []byte("garbage garbage")), 0, ErrCorrupt},
		{"gzip of too few records", rebuild(t, goodGzip, mustCompress(t, Gzip, body[:len(body)/2])), 0, ErrInvalidRecord},
		{"wrong offset delta", rebuild(t, good, func() []byte {
			var b []byte
			for i, r := range testRecords(5, 20) {
				if i == 3 {
					i = 7
				}
				b = appendRecord(b, int32(i), r)
			}
			return b
		}()), 0, ErrInvalidRecord},
		{"record length lies", rebuild(t, good, func() []byte {
			b := append([]byte(nil), body...)
			b[0] += 2 // first record's zigzag length grows by one
			return b
		}()), 0, ErrInvalidRecord},
		{"negative key length", rebuild(t, mustBuild(t, specWith(None), []Record{{}}), []byte{2 * 6, 0, 0, 0, 3, 1, 0}), 0, ErrInvalidRecord},
		{"too large", good, len(good) - 1, ErrTooLarge},
		{"second batch too large", append(mustBuild(t, specWith(None), testRecords(1, 1)), good...), len(good) - 1, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.in, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
		})
	}
	// The fixtures are meaningful only if the untouched batch passes.
	if _, err := Validate(good, len(good)); err != nil {
		t.Fatal(err)
	}
}

func mustCompress(t *testing.T, c Codec, body []byte) []byte {
	t.Helper()
	out, err := compress(c, body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStamping(t *testing.T) {
	b := mustBuild(t, specWith(Zstd), testRecords(4, 10))
	SetBaseOffset(b, 1234)
	SetPartitionLeaderEpoch(b, 7)
	if _, err := CheckFrame(b); err != nil {
		t.Fatalf("offset and epoch must stay outside the CRC: %v", err)
	}
	h := b.Header()
	if h.BaseOffset != 1234 || h.PartitionLeaderEpoch != 7 || h.LastOffset() != 1237 || b.LastOffset() != 1237 {
		t.Fatalf("header %+v", h)
	}
	if h.TimestampType() != TimestampCreateTime {
		t.Fatal("want create time")
	}
	if got := h.RecordTimestamp(Record{TimestampDelta: 3}); got != h.BaseTimestamp+3 {
		t.Fatalf("create time record timestamp %d", got)
	}
	SetLogAppendTime(b, 99)
	if _, err := CheckFrame(b); err != nil {
		t.Fatalf("SetLogAppendTime must re-CRC: %v", err)
	}
	h = b.Header()
	if h.TimestampType() != TimestampLogAppendTime || h.MaxTimestamp != 99 || h.Codec() != Zstd || h.RecordTimestamp(Record{TimestampDelta: 3}) != 99 {
		t.Fatalf("header %+v", h)
	}
	if _, err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
}

func TestHeaderFlags(t *testing.T) {
	s := specWith(LZ4)
	s.Transactional, s.ProducerID, s.ProducerEpoch, s.BaseSequence = true, 42, 3, 2147483646
	h := mustBuild(t, s, testRecords(3, 1)).Header()
	if !h.IsTransactional() || h.IsControl() || h.ProducerID != 42 || h.ProducerEpoch != 3 || h.Codec() != LZ4 || h.Size() != 12+int(h.BatchLength) {
		t.Fatalf("%+v", h)
	}
	if h.LastSequence() != 0 { // 2147483646+2 wraps to 0 as in Kafka
		t.Fatalf("last sequence %d", h.LastSequence())
	}
	if _, err := ParseHeader(make([]byte, 60)); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	if Codec(6).String() != "codec(6)" || Zstd.String() != "zstd" {
		t.Fatal("codec names")
	}
}

func FuzzValidate(f *testing.F) {
	for _, c := range allCodecs {
		b, err := Build(specWith(c), testRecords(3, 10))
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkValidate(t, in)
		// Most mutations only break the CRC; fix it so the fuzzer also
		// reaches the record walker and the decompressors.
		if len(in) >= BatchHeaderSize {
			fixed := append([]byte(nil), in...)
			binary.BigEndian.PutUint32(fixed[posCRC:], crcOf(fixed))
			checkValidate(t, fixed)
		}
	})
}

func checkValidate(t *testing.T, in []byte) {
	batches, err := Validate(in, 1<<20)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrTooLarge) &&
			!errors.Is(err, ErrUnsupportedMagic) && !errors.Is(err, ErrUnsupportedCodec) {
			t.Fatalf("error without a sentinel: %v", err)
		}
		return
	}
	total := 0
	for _, b := range batches {
		total += len(b)
		if _, err := Records(b, MaxDecompressedBytes); err != nil {
			t.Fatalf("Validate accepted a batch Records rejects: %v", err)
		}
	}
	if total != len(in) {
		t.Fatalf("batches cover %d of %d bytes", total, len(in))
	}
}

func TestSplit(t *testing.T) {
	a := mustBuild(t, specWith(Gzip), testRecords(3, 10))
	spec := specWith(None)
	spec.Control = true
	ctrl := mustBuild(t, spec, testRecords(1, 1)) // control batches are fine in stored data
	SetBaseOffset(a, 10)
	SetBaseOffset(ctrl, 13)
	set := append(append([]byte(nil), a...), ctrl...)
	for _, tc := range []struct {
		name        string
		in          []byte
		wantN       int
		wantPartial int
		wantErr     error
	}{
		{"two whole batches", set, 2, 0, nil},
		{"partial trailing batch", set[:len(set)-5], 1, len(ctrl) - 5, nil},
		{"partial header", set[:len(a)+20], 1, 20, nil},
		{"empty", nil, 0, 0, nil},
		{"bad crc", mutate(set, false, func(b []byte) []byte { b[len(a)-1] ^= 1; return b }), 0, 0, ErrCorrupt},
		{"bad length", mutate(set, false, func(b []byte) []byte { binary.BigEndian.PutUint32(b[len(a)+8:], 3); return b }), 0, 0, ErrCorrupt},
		{"magic 1", mutate(set, true, func(b []byte) []byte { b[posMagic] = 1; return b }), 0, 0, ErrUnsupportedMagic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, partial, err := Split(tc.in)
			if !errors.Is(err, tc.wantErr) || len(bs) != tc.wantN || partial != tc.wantPartial {
				t.Fatalf("Split = %d batches, partial %d, err %v; want %d, %d, %v", len(bs), partial, err, tc.wantN, tc.wantPartial, tc.wantErr)
			}
		})
	}
	if _, err := Validate(ctrl, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatal("Validate must still reject the control batch")
	}
}
