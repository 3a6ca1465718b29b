package replica

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/wal"
)

func TestPointerTag(t *testing.T) {
	ptrs := []wal.Pointer{
		{Bucket: "wal-a", Key: "wal/c/a/1/2/00000000000000000001", Offset: 117, Length: 500, Topic: "t", Partition: 3, BaseOffset: 10, LastOffset: 19, LeaderEpoch: 2, CRC: 0xdeadbeef},
		{Bucket: "wal-a", Key: "wal/c/a/1/2/00000000000000000002", Offset: 90, Length: 7, Topic: "t", Partition: 3, BaseOffset: 20, LastOffset: 20, LeaderEpoch: 2, CRC: 1},
	}
	raw, err := EncodePointers(ptrs)
	if err != nil {
		t.Fatal(err)
	}
	// Through the wire: a v12 request/response partition keeps the tag.
	sp := kmsg.NewFetchResponseTopicPartition()
	if err := SetPointers(&sp, ptrs); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, sp)
	resp.Topics = append(resp.Topics, rt)
	back := kmsg.NewPtrFetchResponse()
	back.SetVersion(12)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	got, err := DecodePointers(tagValue(&back.Topics[0].Partitions[0].UnknownTags, TagWALPointers))
	if err != nil || !reflect.DeepEqual(got, ptrs) {
		t.Fatalf("pointers after a round trip: %v, %v; want %v", got, err, ptrs)
	}

	rp := kmsg.NewFetchRequestTopicPartition()
	if WantsPointers(&rp) {
		t.Fatal("a partition without the tag asks for pointers")
	}
	rp.UnknownTags.Set(TagWALPointers, []byte{1})
	if !WantsPointers(&rp) {
		t.Fatal("the tag does not ask for pointers")
	}

	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"empty", nil},
		{"count beyond the data", []byte{5}},
		{"truncated pointer", raw[:len(raw)-3]},
		{"trailing bytes", append(append([]byte(nil), raw...), 0)},
		{"length beyond the data", []byte{1, 200, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodePointers(tc.raw); !errors.Is(err, errBadPointerTag) {
				t.Fatalf("DecodePointers: %v, want errBadPointerTag", err)
			}
		})
	}
}
