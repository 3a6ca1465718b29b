package replica

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/wal"
)

// pointerResponse is a Fetch v12 response whose partitions carry
// pointers as a leader's PointerAnswer writes them (compact or per
// partition): parts partitions of topic, each with two chunks, all in
// objects objects of one bucket.
func pointerResponse(t *testing.T, compact bool, parts, objects int) (*kmsg.FetchResponse, map[int32][]wal.Pointer) {
	t.Helper()
	ans := NewPointerAnswer(compact)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(FetchVersion)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "orders-eu-west-payments"
	want := map[int32][]wal.Pointer{}
	for p := range int32(parts) {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = p
		base := int64(1_000_000 + 1000*int(p))
		var ptrs []wal.Pointer
		for c := range 2 {
			obj := (int(p) + c) % objects
			ptrs = append(ptrs, wal.Pointer{
				Bucket: "strata-wal--use1-az4--x-s3", Key: wal.ObjectKey("prod", "use1-az4", 2, 1_764_412_345_678_901_234, uint64(40_000+obj)),
				Offset: int64(4096 * (int(p) + c)), Length: 4000 + int64(c), Topic: rt.Topic, Partition: p,
				BaseOffset: base, LastOffset: base + 9, LeaderEpoch: 7, CRC: uint32(0xdeadbeef) + uint32(p),
			})
			base += 10
		}
		if err := ans.Set(&sp, ptrs); err != nil {
			t.Fatal(err)
		}
		want[p] = ptrs
		rt.Partitions = append(rt.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, rt)
	ans.Finish(resp)
	return resp, want
}

func encodedSize(resp *kmsg.FetchResponse) int { return len(resp.AppendTo(nil)) }

func TestCompactPointersRoundTrip(t *testing.T) {
	perPartition, _ := pointerResponse(t, false, 4, 2)
	full := encodedSize(perPartition)
	resp, want := pointerResponse(t, true, 4, 2)
	compact := encodedSize(resp)
	// Through the wire format, as the follower reads it.
	got := kmsg.NewPtrFetchResponse()
	got.SetVersion(FetchVersion)
	if err := got.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	objects, ok, err := compactObjects(got)
	if err != nil || !ok || len(objects) != 2 {
		t.Fatalf("object table = %v, %v, %v; want 2 objects", objects, ok, err)
	}
	for _, rp := range got.Topics[0].Partitions {
		ptrs, err := decodeCompactPointers(tagValue(&rp.UnknownTags, TagWALPointers), objects, got.Topics[0].Topic, rp.Partition)
		if err != nil {
			t.Fatalf("partition %d: %v", rp.Partition, err)
		}
		if !reflect.DeepEqual(ptrs, want[rp.Partition]) {
			t.Fatalf("partition %d: pointers\n%v\nwant\n%v", rp.Partition, ptrs, want[rp.Partition])
		}
	}
	t.Logf("4 partitions × 2 pointers in 2 objects: %d response bytes per-partition, %d compact", full, compact)
	if compact*2 > full {
		t.Fatalf("compact response is %d bytes, per-partition %d: want at most half", compact, full)
	}
}

func TestCompactPointersOnlyWhenAsked(t *testing.T) {
	req := kmsg.NewPtrFetchRequest()
	if AsksCompactPointers(req) {
		t.Fatal("a request without the tag asks for compact pointers")
	}
	askCompactPointers(req)
	if !AsksCompactPointers(req) {
		t.Fatal("askCompactPointers did not mark the request")
	}
	// A response without an object table is read in the per-partition form.
	resp, _ := pointerResponse(t, false, 1, 1)
	if _, ok, err := compactObjects(resp); ok || err != nil {
		t.Fatalf("per-partition response read as compact: %v, %v", ok, err)
	}
}

func TestCompactPointersMalformed(t *testing.T) {
	resp, _ := pointerResponse(t, true, 2, 1)
	table := tagValue(&resp.UnknownTags, TagWALPointers)
	part := tagValue(&resp.Topics[0].Partitions[0].UnknownTags, TagWALPointers)
	objects, _, err := compactObjects(resp)
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation and every single-byte change is either refused
	// with errBadCompactPointers or decodes to something (never a panic).
	check := func(name string, f func() error) {
		t.Helper()
		if err := f(); err != nil && !errors.Is(err, errBadCompactPointers) {
			t.Fatalf("%s: error %v is not errBadCompactPointers", name, err)
		}
	}
	for n := range len(table) {
		r := kmsg.NewPtrFetchResponse()
		r.UnknownTags.Set(TagWALPointers, table[:n])
		check(fmt.Sprintf("table cut at %d", n), func() error {
			if _, _, err := compactObjects(r); err == nil {
				return fmt.Errorf("table cut at %d accepted", n)
			}
			return nil
		})
	}
	for n := range len(part) {
		if _, err := decodeCompactPointers(part[:n], objects, "t", 0); err == nil {
			t.Fatalf("pointers cut at %d of %d bytes accepted", n, len(part))
		} else if !errors.Is(err, errBadCompactPointers) {
			t.Fatalf("pointers cut at %d: %v", n, err)
		}
	}
	for i := range part {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), part...)
			b[i] ^= x
			check(fmt.Sprintf("byte %d ^ %#x", i, x), func() error {
				_, err := decodeCompactPointers(b, objects, "t", 0)
				return err
			})
		}
	}
	if _, err := decodeCompactPointers(append(part[:len(part):len(part)], 0), objects, "t", 0); !errors.Is(err, errBadCompactPointers) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := decodeCompactPointers(part, nil, "t", 0); !errors.Is(err, errBadCompactPointers) {
		t.Fatalf("object index beyond the table: %v", err)
	}
}
