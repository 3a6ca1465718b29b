package txntopic

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/txn"
)

// Record key and value versions, as a Kafka 3.x/4.x transaction
// coordinator writes them at transaction.version 0.
const (
	keyVersion   = 0
	valueVersion = 0
)

func key(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = keyVersion
	k.TransactionalID = id
	return k.AppendTo(nil)
}

// value encodes md. Groups whose offsets the transaction commits appear
// as their partition of __consumer_offsets (offsetsPartitions of them),
// as Kafka lists them.
func value(md txn.Metadata, offsetsPartitions int32, offsetsTopic string) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = md.ProducerID
	v.ProducerEpoch = md.ProducerEpoch
	v.TimeoutMillis = md.TimeoutMillis
	v.State = kmsg.TransactionState(md.State)
	v.LastUpdateTimestamp = md.UpdateMillis
	v.StartTimestamp = md.StartMillis
	tps := slices.Clone(md.Partitions)
	if offsetsPartitions > 0 {
		for _, g := range md.Groups {
			tp := txn.TopicPartition{Topic: offsetsTopic, Partition: internaltopic.PartitionFor(g, offsetsPartitions)}
			if !slices.Contains(tps, tp) {
				tps = append(tps, tp)
			}
		}
	}
	slices.SortFunc(tps, func(a, b txn.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, tp := range tps {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic = tp.Topic
			v.Topics = append(v.Topics, t)
		}
		last := &v.Topics[len(v.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return v.AppendTo(nil)
}
