package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition-count limits (max.partitions.per.topic, max.partitions).
//
// Every partition costs placement work, a metadata record, a log directory
// and its files on each replica. Without a bound one CreateTopics request
// (NumPartitions=2147483647, even with ValidateOnly) made the placement
// allocate tens of GiB. The limits are checked before anything is planned
// or allocated, for CreateTopics (also ValidateOnly), CreatePartitions and
// topics auto-created by Metadata.

// Defaults of the partition limits. Kafka has no such keys (KIP-578
// proposed max.partitions); these are far above what one Strata cluster is
// built for and far below what exhausts a broker's memory.
const (
	DefaultMaxPartitionsPerTopic = 10_000
	DefaultMaxPartitions         = 100_000
)

func (c Config) maxPartitionsPerTopic() int32 {
	if c.MaxPartitionsPerTopic <= 0 {
		return DefaultMaxPartitionsPerTopic
	}
	return c.MaxPartitionsPerTopic
}

func (c Config) maxPartitions() int64 {
	if c.MaxPartitions <= 0 {
		return DefaultMaxPartitions
	}
	return int64(c.MaxPartitions)
}

// checkPartitionLimits refuses a topic that would have total partitions,
// adding added partitions to a cluster that has existing ones:
// INVALID_PARTITIONS over the per-topic limit, POLICY_VIOLATION over the
// cluster-wide one.
func (c Config) checkPartitionLimits(topic string, total, added int32, existing int64) error {
	if lim := c.maxPartitionsPerTopic(); total > lim {
		return fmt.Errorf("%w: topic %s: %d partitions is over the broker limit max.partitions.per.topic=%d", kerr.InvalidPartitions, topic, total, lim)
	}
	if lim := c.maxPartitions(); existing+int64(added) > lim {
		return fmt.Errorf("%w: topic %s: %d more partitions would make %d in the cluster, over the broker limit max.partitions=%d",
			kerr.PolicyViolation, topic, added, existing+int64(added), lim)
	}
	return nil
}

// partitionCountLocked is the number of partitions of every topic on a
// standalone broker. b.mu must be held.
func (b *Broker) partitionCountLocked() int64 {
	var n int64
	for _, t := range b.topics {
		n += int64(len(t.partitions))
	}
	return n
}

// clusterPartitionCount is the number of partitions of every topic in the
// cluster metadata.
func (b *Broker) clusterPartitionCount() int64 {
	var n int64
	if st := b.ClusterState(); st != nil {
		for _, t := range st.Topics {
			n += int64(t.Partitions)
		}
	}
	return n
}
