package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestZoneLocalRefTag(t *testing.T) {
	ref := ZoneLocalRef{Bucket: "wal-b", Key: "wal/test/b/2/zl-17/00000000000000000003", Offset: 1 << 33, Length: 4096, CRC: 0xdeadbeef}
	// Through a Produce v11 on the wire, as the leader receives it.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.UnknownTags.Set(TagZoneLocalRecords, ref.encode())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	got := kmsg.NewPtrProduceRequest()
	got.SetVersion(11)
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	tag := zoneLocalTag(&got.Topics[0].Partitions[0])
	if tag == nil {
		t.Fatal("tag lost on the wire")
	}
	back, err := decodeZoneLocalRef(tag)
	if err != nil || back != ref {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, ref)
	}
	plain := kmsg.NewProduceRequestTopicPartition()
	if zoneLocalTag(&plain) != nil {
		t.Fatal("a partition without the tag has one")
	}

	enc := ref.encode()
	for name, b := range map[string][]byte{
		"empty":         {},
		"short":         enc[:len(enc)-1],
		"long":          append(append([]byte{}, enc...), 0),
		"bucket length": append([]byte{0xff, 0xff}, enc[2:]...),
		"no key":        ZoneLocalRef{Bucket: "b", Length: 1}.encode(),
	} {
		if _, err := decodeZoneLocalRef(b); !errors.Is(err, errBadZoneLocalTag) {
			t.Errorf("%s: err %v, want errBadZoneLocalTag", name, err)
		}
	}
}

func TestZoneLocalLeader(t *testing.T) {
	tests := []struct {
		name     string
		inZone   []int32
		leader   int32
		replicas []int32
		want     int32
	}{
		{"leader in the zone", []int32{2}, 2, []int32{1, 2, 3}, 2},
		{"a replica in the zone", []int32{2}, 1, []int32{1, 2, 3}, 2},
		{"first replica of several in the zone", []int32{4, 5}, 1, []int32{1, 5, 4}, 5},
		{"no replica in the zone: the real leader", []int32{2}, 1, []int32{1, 3}, 1},
		{"no live broker in the zone", nil, 1, []int32{1, 2, 3}, 1},
		{"no leader", []int32{2}, -1, []int32{1, 2, 3}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := zoneLocalLeader(tt.inZone, tt.leader, tt.replicas); got != tt.want {
				t.Fatalf("zoneLocalLeader(%v, %d, %v) = %d, want %d", tt.inZone, tt.leader, tt.replicas, got, tt.want)
			}
		})
	}
}

// fakeZoneLocal reads refs from objects in memory (the leader's side).
type fakeZoneLocal struct {
	ZoneLocal
	objects map[string][]byte // by bucket/key
}

func (f fakeZoneLocal) Read(_ context.Context, refs []ZoneLocalRef) ([][]byte, []error) {
	out := make([][]byte, len(refs))
	errs := make([]error, len(refs))
	for i, r := range refs {
		obj, ok := f.objects[r.Bucket+"/"+r.Key]
		if !ok || r.Offset+r.Length > int64(len(obj)) {
			errs[i] = errors.New("no such range")
			continue
		}
		out[i] = obj[r.Offset : r.Offset+r.Length]
	}
	return out, errs
}

// TestZoneLocalForwardedForms: a forwarded Produce in either form (the
// objects once per request, or bucket and key per partition), through
// the wire, gives the leader every partition's records; the second form
// is smaller.
func TestZoneLocalForwardedForms(t *testing.T) {
	obj := []byte("aaaabbbbbbcc")
	key := "wal/test/b/2/zl-17/00000000000000000003"
	parts := []forwardedPart{{topic: "orders", part: 0}, {topic: "orders", part: 4}, {topic: "audit", part: 1}}
	refs := []ZoneLocalRef{
		{Bucket: "wal-b", Key: key, Offset: 0, Length: 4},
		{Bucket: "wal-b", Key: key, Offset: 4, Length: 6},
		{Bucket: "wal-b", Key: key, Offset: 10, Length: 2},
	}
	for i := range refs {
		refs[i].CRC = ZoneLocalCRC(obj[refs[i].Offset : refs[i].Offset+refs[i].Length])
	}
	size := map[bool]int{}
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			sent := forwardedRequest(kmsg.NewPtrProduceRequest(), -1, parts, []int{0, 1, 2}, refs, compact, false, 0)
			wire := sent.AppendTo(nil)
			size[compact] = len(wire)
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(11)
			if err := req.ReadFrom(wire); err != nil {
				t.Fatal(err)
			}
			r := &Request{internal: true, Env: &Env{ZoneLocal: fakeZoneLocal{objects: map[string][]byte{"wal-b/" + key: obj}}}}
			failed, loaded, _ := loadZoneLocalRecords(t.Context(), r, req)
			if len(failed) != 0 || loaded != 3 {
				t.Fatalf("failed %v, loaded %d; want 3 loaded", failed, loaded)
			}
			want := map[string]string{"orders-0": "aaaa", "orders-4": "bbbbbb", "audit-1": "cc"}
			for _, rt := range req.Topics {
				for _, rp := range rt.Partitions {
					if got := string(rp.Records); got != want[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] {
						t.Errorf("%s-%d: records %q", rt.Topic, rp.Partition, got)
					}
				}
			}
		})
	}
	t.Logf("forwarded request: %d bytes with bucket and key per partition, %d with them once", size[false], size[true])
	if size[true] >= size[false]-2*len(key) {
		t.Fatalf("second form %d bytes, first %d: not smaller by the repeated keys", size[true], size[false])
	}
}

// TestZoneLocalMalformedForms: every malformed second-form tag answers
// its partition CORRUPT_MESSAGE; nothing panics, nothing is read.
func TestZoneLocalMalformedForms(t *testing.T) {
	objs := encodeZoneLocalObjects([]zoneLocalObject{{"wal-b", "k"}})
	good := ZoneLocalRef{Offset: 1, Length: 2}.encodeRange(0)
	tests := []struct {
		name      string
		objects   []byte // request tag; nil: none
		rangeTag  []byte
		firstForm bool // the partition carries the first form too
	}{
		{"range without objects", nil, good, false},
		{"both forms", objs, good, true},
		{"index out of range", objs, ZoneLocalRef{Length: 2}.encodeRange(1), false},
		{"short range", objs, good[:17], false},
		{"long range", objs, append(append([]byte{}, good...), 0), false},
		{"negative offset", objs, ZoneLocalRef{Offset: -1, Length: 2}.encodeRange(0), false},
		{"no objects", []byte{0, 0}, good, false},
		{"objects: count beyond the bytes", []byte{0, 2, 0, 1, 'b', 0, 1, 'k'}, good, false},
		{"objects: trailing bytes", append(append([]byte{}, objs...), 0), good, false},
		{"objects: empty key", encodeZoneLocalObjects([]zoneLocalObject{{"wal-b", ""}}), good, false},
		{"objects: string past the end", []byte{0, 1, 0xff, 0xff, 'b'}, good, false},
		{"objects: empty", []byte{}, good, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(11)
			if tt.objects != nil {
				req.UnknownTags.Set(TagZoneLocalObjects, tt.objects)
			}
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "orders"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.UnknownTags.Set(TagZoneLocalRange, tt.rangeTag)
			if tt.firstForm {
				rp.UnknownTags.Set(TagZoneLocalRecords, ZoneLocalRef{Bucket: "wal-b", Key: "k", Length: 2}.encode())
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			r := &Request{internal: true, Env: &Env{ZoneLocal: fakeZoneLocal{objects: map[string][]byte{"wal-b/k": []byte("0123")}}}}
			failed, loaded, _ := loadZoneLocalRecords(t.Context(), r, req)
			if err := failed[[2]int{0, 0}]; loaded != 0 || !errors.Is(err, kerr.CorruptMessage) {
				t.Fatalf("loaded %d, error %v; want CORRUPT_MESSAGE", loaded, err)
			}
		})
	}
}

// FuzzZoneLocalTags: the decoders of forwarded-records tags never panic
// and reject what they cannot read back.
func FuzzZoneLocalTags(f *testing.F) {
	f.Add(encodeZoneLocalObjects([]zoneLocalObject{{"wal-b", "k"}}), ZoneLocalRef{Offset: 1, Length: 2}.encodeRange(0))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 'k'}, ZoneLocalRef{Bucket: "b", Key: "k", Length: 1}.encode())
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, objectsTag, partTag []byte) {
		objs, err := decodeZoneLocalObjects(objectsTag)
		if err == nil && !bytes.Equal(encodeZoneLocalObjects(objs), objectsTag) {
			t.Fatalf("objects %x decode to %v, which encodes differently", objectsTag, objs)
		}
		if ref, err := decodeZoneLocalRange(partTag, objs); err == nil && (ref.Offset < 0 || ref.Key == "") {
			t.Fatalf("range %x decodes to %+v", partTag, ref)
		}
		if ref, err := decodeZoneLocalRef(partTag); err == nil && (ref.Offset < 0 || ref.Key == "") {
			t.Fatalf("ref %x decodes to %+v", partTag, ref)
		}
	})
}
