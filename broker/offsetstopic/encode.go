package offsetstopic

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/internaltopic"
)

// Record key and value versions, as Kafka's group coordinator writes them
// (and tools such as Burrow and kcat's users decode them): offset commits
// with key version 1 and value version 3 (with the leader epoch), group
// membership with key version 2 and value version 3 (static members).
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

// PartitionFor is the partition of __consumer_offsets that holds a
// group's records: Kafka's abs(groupId.hashCode()) % partitions
// (internaltopic.PartitionFor).
func PartitionFor(groupID string, partitions int32) int32 {
	return internaltopic.PartitionFor(groupID, partitions)
}

func offsetKey(g string, tp group.TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: g, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(c group.OffsetCommit) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = c.Offset
	v.LeaderEpoch = c.LeaderEpoch
	v.Metadata = c.Metadata
	v.CommitTimestamp = c.CommitTimeMillis
	return v.AppendTo(nil)
}

func groupKey(g string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: g}
	return k.AppendTo(nil)
}

// groupValue encodes a classic group's membership. A KIP-848 consumer
// group's state has other record types in Kafka (ConsumerGroupMetadata,
// member and assignment records) that tools reading this topic do not
// decode; it is not written (nil), only its offsets are.
func groupValue(md group.GroupMetadata, nowMillis int64) []byte {
	if md.Consumer != nil {
		return nil
	}
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = md.ProtocolType
	v.Generation = md.Generation
	if md.Protocol != "" {
		p := md.Protocol
		v.Protocol = &p
	}
	if md.Leader != "" {
		l := md.Leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = nowMillis
	for _, m := range md.Members {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.ID
		if m.InstanceID != "" {
			id := m.InstanceID
			mv.InstanceID = &id
		}
		mv.ClientID = m.ClientID
		mv.ClientHost = m.ClientHost
		mv.RebalanceTimeoutMillis = m.RebalanceTimeoutMillis
		mv.SessionTimeoutMillis = m.SessionTimeoutMillis
		for _, p := range m.Protocols {
			if p.Name == md.Protocol {
				mv.Subscription = p.Metadata
			}
		}
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		mv.Assignment = m.Assignment
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}
