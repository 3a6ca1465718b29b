package protocol

import (
	"errors"
	"testing"

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
