package offsetstopic

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

// TestPartitionFor: a group's partition is Kafka's
// Utils.abs(groupId.hashCode()) % partitions. The hash codes are Java's
// String.hashCode (UTF-16 code units, int32 overflow); Utils.abs maps
// Integer.MIN_VALUE to 0.
func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group      string
		javaHash   int32
		partitions int32
		want       int32
	}{
		{"hello", 99162322, 50, 22},
		{"Aa", 2112, 50, 12},
		{"BB", 2112, 50, 12},
		{"my-group", -1906497762, 50, 12},
		{"my-group", -1906497762, 10, 2},
		{"polygenelubricants", -2147483648, 50, 0},
		{"console-consumer-12345", 158455506, 50, 6},
		{"grüße-😀", 347391577, 50, 27}, // a surrogate pair
		{"", 0, 50, 0},
	} {
		if got := PartitionFor(tc.group, tc.partitions); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d (Java hashCode %d)", tc.group, tc.partitions, got, tc.want, tc.javaHash)
		}
	}
}

// TestRecordFormats: keys and values decode with Kafka's definitions at
// the versions Kafka writes.
func TestRecordFormats(t *testing.T) {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(offsetKey("g", group.TopicPartition{Topic: "t", Partition: 3})); err != nil || k.Version != 1 || k.Group != "g" || k.Topic != "t" || k.Partition != 3 {
		t.Fatalf("offset key: %+v, %v", k, err)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(offsetValue(group.OffsetCommit{Offset: 42, LeaderEpoch: 7, Metadata: "m", CommitTimeMillis: 1234})); err != nil ||
		v.Version != 3 || v.Offset != 42 || v.LeaderEpoch != 7 || v.Metadata != "m" || v.CommitTimestamp != 1234 {
		t.Fatalf("offset value: %+v, %v", v, err)
	}
	var gk kmsg.GroupMetadataKey
	if err := gk.ReadFrom(groupKey("g")); err != nil || gk.Version != 2 || gk.Group != "g" {
		t.Fatalf("group key: %+v, %v", gk, err)
	}
	md := group.GroupMetadata{Generation: 4, ProtocolType: "consumer", Protocol: "range", Leader: "m1", Members: []group.MemberMetadata{{
		ID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/127.0.0.1", SessionTimeoutMillis: 45000, RebalanceTimeoutMillis: 60000,
		Protocols: []group.ProtocolMetadata{{Name: "sticky", Metadata: []byte{9}}, {Name: "range", Metadata: []byte{1, 2}}}, Assignment: []byte{3},
	}}}
	var gv kmsg.GroupMetadataValue
	if err := gv.ReadFrom(groupValue(md, 99)); err != nil {
		t.Fatal(err)
	}
	m := gv.Members[0]
	if gv.Version != 3 || gv.Generation != 4 || *gv.Protocol != "range" || *gv.Leader != "m1" || gv.CurrentStateTimestamp != 99 ||
		m.MemberID != "m1" || *m.InstanceID != "i1" || string(m.Subscription) != "\x01\x02" || string(m.Assignment) != "\x03" || m.SessionTimeoutMillis != 45000 {
		t.Fatalf("group value: %+v", gv)
	}
	if groupValue(group.GroupMetadata{Consumer: &group.ConsumerGroupMetadata{}}, 0) != nil {
		t.Fatal("a consumer-protocol group's membership is written")
	}
}
