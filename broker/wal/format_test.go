package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/strata-dev/strata/broker/wal"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      wal.Header
		chunks []wal.ChunkInput
	}{
		{"one chunk", testHeader, []wal.ChunkInput{chunk(t, "orders", 0, 5, 100, 1, 3)}},
		{"many partitions", testHeader, []wal.ChunkInput{
			chunk(t, "orders", 0, 5, 100, 3, 2),
			chunk(t, "orders", 1, 5, 0, 1, 1),
			chunk(t, "payments", 12, 9, 1_000_000, 2, 10),
		}},
		{"same partition two epochs", testHeader, []wal.ChunkInput{
			chunk(t, "t", 0, 1, 10, 1, 5),
			chunk(t, "t", 0, 2, 15, 1, 5),
		}},
		{"empty names", wal.Header{Version: wal.Version, CreatedAt: testHeader.CreatedAt}, []wal.ChunkInput{chunk(t, "", 0, 0, 0, 1, 1)}},
		{"no chunks", testHeader, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, table, err := wal.Encode(tc.h, tc.chunks)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			dec, err := wal.Decode(obj)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(dec.Header, tc.h) {
				t.Fatalf("header = %+v, want %+v", dec.Header, tc.h)
			}
			if len(dec.Chunks) != len(tc.chunks) {
				t.Fatalf("%d chunks, want %d", len(dec.Chunks), len(tc.chunks))
			}
			end, err := wal.HeaderTableSize(obj[:wal.MinHeaderRead])
			if err != nil {
				t.Fatal(err)
			}
			next := end
			for i, c := range dec.Chunks {
				in := tc.chunks[i]
				if c.Err != nil {
					t.Fatalf("chunk %d: %v", i, c.Err)
				}
				if c.ChunkInfo != table[i] {
					t.Fatalf("chunk %d info = %+v, encoder said %+v", i, c.ChunkInfo, table[i])
				}
				if c.Topic != in.Topic || c.Partition != in.Partition || c.LeaderEpoch != in.LeaderEpoch || c.BaseOffset != in.BaseOffset || c.LastOffset != in.LastOffset {
					t.Fatalf("chunk %d = %+v, want %+v", i, c.ChunkInfo, in)
				}
				if c.Offset != next {
					t.Fatalf("chunk %d at %d, want %d (contiguous)", i, c.Offset, next)
				}
				next = c.End()
				if !bytes.Equal(c.Data, bytes.Join(in.Batches, nil)) {
					t.Fatalf("chunk %d data differs", i)
				}
				batches, err := wal.SplitBatches(c.ChunkInfo, c.Data)
				if err != nil || len(batches) != len(in.Batches) {
					t.Fatalf("SplitBatches = %d batches, %v; want %d", len(batches), err, len(in.Batches))
				}
			}
			if next != int64(len(obj)) {
				t.Fatalf("data ends at %d, object has %d bytes", next, len(obj))
			}
			// The table alone decodes from the object's prefix.
			h, infos, err := wal.DecodeTable(obj[:end], -1)
			if err != nil || !reflect.DeepEqual(h, tc.h) || len(infos) != len(table) {
				t.Fatalf("DecodeTable(prefix) = %+v, %d chunks, %v", h, len(infos), err)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	good := chunk(t, "t", 0, 1, 0, 1, 1)
	for _, tc := range []struct {
		name string
		c    wal.ChunkInput
	}{
		{"last below base", wal.ChunkInput{Topic: "t", BaseOffset: 5, LastOffset: 4, Batches: good.Batches}},
		{"negative base", wal.ChunkInput{Topic: "t", BaseOffset: -1, LastOffset: 4, Batches: good.Batches}},
		{"no bytes", wal.ChunkInput{Topic: "t", BaseOffset: 0, LastOffset: 0}},
		{"invalid topic", wal.ChunkInput{Topic: "\xff", BaseOffset: 0, LastOffset: 0, Batches: good.Batches}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := wal.Encode(testHeader, []wal.ChunkInput{tc.c}); err == nil {
				t.Fatal("Encode accepted it")
			}
		})
	}
}

func TestSortChunks(t *testing.T) {
	mk := func(topic string, p int32, base int64) wal.ChunkInput {
		return wal.ChunkInput{Topic: topic, Partition: p, BaseOffset: base}
	}
	chunks := []wal.ChunkInput{mk("b", 0, 0), mk("a", 1, 0), mk("a", 0, 5), mk("c", 0, 0), mk("a", 0, 1)}
	followers := map[string]string{"a-0": "2,3", "a-1": "1,3", "b-0": "2,3", "c-0": "1,3"}
	wal.SortChunks(chunks, func(topic string, p int32) string { return followers[topic+"-"+string(rune('0'+p))] })
	var got []string
	for _, c := range chunks {
		got = append(got, c.Topic+string(rune('0'+c.Partition))+":"+string(rune('0'+c.BaseOffset)))
	}
	want := []string{"a1:0", "c0:0", "a0:1", "a0:5", "b0:0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order = %v, want %v (by follower set, then topic, partition, offset)", got, want)
	}
}

// TestCorruption flips bits and truncates an encoded object and checks the
// error each time: a damaged header or table fails the object with its
// kind; a damaged chunk fails only that chunk.
func TestCorruption(t *testing.T) {
	chunks := []wal.ChunkInput{chunk(t, "t", 0, 1, 0, 2, 3), chunk(t, "t", 1, 1, 50, 2, 3), chunk(t, "u", 0, 1, 7, 1, 1)}
	obj, table, err := wal.Encode(testHeader, chunks)
	if err != nil {
		t.Fatal(err)
	}
	hs := int(binary.BigEndian.Uint32(obj[8:]))
	tableEnd := int(table[0].Offset)
	flip := func(pos int) func([]byte) []byte {
		return func(b []byte) []byte { b[pos] ^= 0x04; return b }
	}
	for _, tc := range []struct {
		name       string
		mutate     func([]byte) []byte
		wantObject error // error of Decode, nil when the object decodes
		badChunk   int   // chunk with a CRC error when the object decodes, -1 none
	}{
		{"intact", func(b []byte) []byte { return b }, nil, -1},
		{"magic", flip(1), wal.ErrBadMagic, -1},
		{"version", flip(5), wal.ErrUnsupportedVersion, -1},
		{"broker id in header", flip(21), wal.ErrHeaderCRC, -1},
		{"zone byte in header", flip(hs - 6), wal.ErrHeaderCRC, -1},
		{"header CRC", flip(hs - 1), wal.ErrHeaderCRC, -1},
		{"chunk count", flip(14), wal.ErrHeaderCRC, -1},
		{"table entry", flip(hs + 3), wal.ErrTableCRC, -1},
		{"table CRC", flip(tableEnd - 2), wal.ErrTableCRC, -1},
		{"first chunk", flip(int(table[0].Offset) + 30), nil, 0},
		{"middle chunk", flip(int(table[1].Offset) + int(table[1].Length) - 1), nil, 1},
		{"last byte", flip(len(obj) - 1), nil, 2},
		{"truncated in fixed header", func(b []byte) []byte { return b[:20] }, wal.ErrTruncated, -1},
		{"truncated in table", func(b []byte) []byte { return b[:hs+5] }, wal.ErrTruncated, -1},
		{"truncated in data", func(b []byte) []byte { return b[:len(b)-3] }, wal.ErrTruncated, -1},
		{"empty", func(b []byte) []byte { return nil }, wal.ErrTruncated, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(obj))
			dec, err := wal.Decode(b)
			if tc.wantObject != nil {
				if !errors.Is(err, tc.wantObject) || !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("Decode = %v, want %v", err, tc.wantObject)
				}
				var ce *wal.CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("Decode error %T is not a *CorruptError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			for i, c := range dec.Chunks {
				if i == tc.badChunk {
					var ce *wal.CorruptError
					if !errors.Is(c.Err, wal.ErrChunkCRC) || !errors.As(c.Err, &ce) || ce.Chunk != i || c.Data != nil {
						t.Fatalf("chunk %d: Err = %v, Data %d bytes; want a CRC error and no data", i, c.Err, len(c.Data))
					}
					continue
				}
				if c.Err != nil || !bytes.Equal(c.Data, bytes.Join(chunks[i].Batches, nil)) {
					t.Fatalf("intact chunk %d: Err = %v", i, c.Err)
				}
			}
		})
	}
}

func TestSplitBatchesRejects(t *testing.T) {
	c := chunk(t, "t", 0, 4, 10, 2, 3) // offsets 10..15
	data := bytes.Join(c.Batches, nil)
	info := wal.ChunkInfo{Topic: "t", LeaderEpoch: 4, BaseOffset: 10, LastOffset: 15, Length: int64(len(data))}
	if _, err := wal.SplitBatches(info, data); err != nil {
		t.Fatalf("valid chunk: %v", err)
	}
	for _, tc := range []struct {
		name string
		info func(wal.ChunkInfo) wal.ChunkInfo
		data []byte
	}{
		{"base offset differs", func(i wal.ChunkInfo) wal.ChunkInfo { i.BaseOffset = 9; return i }, data},
		{"last offset short", func(i wal.ChunkInfo) wal.ChunkInfo { i.LastOffset = 16; return i }, data},
		{"last offset inside a batch", func(i wal.ChunkInfo) wal.ChunkInfo { i.LastOffset = 14; return i }, data},
		{"epoch differs", func(i wal.ChunkInfo) wal.ChunkInfo { i.LeaderEpoch = 5; return i }, data},
		{"torn batch", func(i wal.ChunkInfo) wal.ChunkInfo { return i }, data[:len(data)-1]},
		{"batch CRC", func(i wal.ChunkInfo) wal.ChunkInfo { return i }, func() []byte { b := bytes.Clone(data); b[len(b)-1] ^= 1; return b }()},
		{"gap between batches", func(i wal.ChunkInfo) wal.ChunkInfo { return i }, append(bytes.Clone(c.Batches[0]), batch(t, 14, 2, 4, 16)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wal.SplitBatches(tc.info(info), tc.data); !errors.Is(err, wal.ErrChunkContent) {
				t.Fatalf("SplitBatches = %v, want ErrChunkContent", err)
			}
		})
	}
}

func TestObjectKey(t *testing.T) {
	key := wal.ObjectKey("demo", "us-east-1a", 101, 7, 42)
	if want := "wal/demo/us-east-1a/101/7/00000000000000000042"; key != want {
		t.Fatalf("ObjectKey = %q, want %q", key, want)
	}
	info, err := wal.ParseKey(key)
	if err != nil || info != (wal.KeyInfo{Cluster: "demo", Zone: "us-east-1a", BrokerID: 101, Incarnation: 7, Sequence: 42}) {
		t.Fatalf("ParseKey = %+v, %v", info, err)
	}
	// The operator's brokers are named <namespace>/<name>.
	key = wal.ObjectKey("kafka/demo", "us-east-1a", 101, 7, 42)
	if want := "wal/kafka/demo/us-east-1a/101/7/00000000000000000042"; key != want {
		t.Fatalf("ObjectKey = %q, want %q", key, want)
	}
	info, err = wal.ParseKey(key)
	if err != nil || info != (wal.KeyInfo{Cluster: "kafka/demo", Zone: "us-east-1a", BrokerID: 101, Incarnation: 7, Sequence: 42}) {
		t.Fatalf("ParseKey(%q) = %+v, %v", key, info, err)
	}
	for _, bad := range []string{"", "wal/", "tier/demo/z/1/1/00000000000000000001", "wal/demo/z/x/1/00000000000000000001", "wal/demo/z/1/1/42", "wal/demo/z/1/-1/00000000000000000001",
		"wal/kafka//z/1/1/00000000000000000001", "wal//demo/z/1/1/00000000000000000001", "wal/demo//1/1/00000000000000000001"} {
		if _, err := wal.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted it", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	obj, _, err := wal.Encode(testHeader, []wal.ChunkInput{chunk(f, "t", 0, 1, 0, 2, 2), chunk(f, "u", 3, 2, 9, 1, 1)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(obj)
	f.Add(obj[:len(obj)/2])
	f.Add(obj[:wal.MinHeaderRead])
	empty, _, _ := wal.Encode(wal.Header{}, nil)
	f.Add(empty)
	flipped := bytes.Clone(obj)
	flipped[len(flipped)-5] ^= 0xff
	f.Add(flipped)
	f.Add([]byte("SWAL"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dec, err := wal.Decode(b)
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for i, c := range dec.Chunks {
			if c.Offset < 0 || c.End() > int64(len(b)) {
				t.Fatalf("chunk %d range %d+%d outside %d bytes", i, c.Offset, c.Length, len(b))
			}
			if c.Err == nil {
				if err := c.Verify(c.Data); err != nil {
					t.Fatalf("chunk %d accepted but fails Verify: %v", i, err)
				}
				_, _ = wal.SplitBatches(c.ChunkInfo, c.Data) // must not panic
			} else if c.Data != nil {
				t.Fatalf("chunk %d has an error and data", i)
			}
		}
		// Re-encoding the decoded chunks gives an object that decodes to
		// the same header and chunk metadata.
		in := make([]wal.ChunkInput, 0, len(dec.Chunks))
		for _, c := range dec.Chunks {
			if c.Err != nil {
				return
			}
			in = append(in, wal.ChunkInput{Topic: c.Topic, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch, BaseOffset: c.BaseOffset, LastOffset: c.LastOffset, Batches: [][]byte{c.Data}})
		}
		re, _, err := wal.Encode(dec.Header, in)
		if err != nil {
			return // e.g. a topic that is not UTF-8
		}
		dec2, err := wal.Decode(re)
		if err != nil {
			t.Fatalf("re-encoded object does not decode: %v", err)
		}
		if !reflect.DeepEqual(dec2.Header, dec.Header) || len(dec2.Chunks) != len(dec.Chunks) {
			t.Fatalf("re-encoded object differs")
		}
	})
}

func TestPointerBinary(t *testing.T) {
	p := wal.Pointer{Bucket: "b", Key: wal.ObjectKey("c", "z", 1, 2, 3), Offset: 166, Length: 77, Topic: "orders", Partition: 4, BaseOffset: 10, LastOffset: 11, LeaderEpoch: 3, CRC: 0xdeadbeef}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var q wal.Pointer
	if err := q.UnmarshalBinary(b); err != nil || q != p {
		t.Fatalf("UnmarshalBinary = %+v, %v; want %+v", q, err, p)
	}
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if err := q.UnmarshalBinary(bad); !errors.Is(err, wal.ErrBadPointer) {
			t.Errorf("UnmarshalBinary(%d bytes) = %v, want ErrBadPointer", len(bad), err)
		}
	}
}
