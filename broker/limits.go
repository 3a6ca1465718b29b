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

// FDsPerReplica is what a new replica opens at once: its active segment's
// .log, .index, .timeindex and .txnindex, and its WAL pointer file (each
// later segment adds its own files).
const FDsPerReplica = 5

// checkFDBudget refuses (POLICY_VIOLATION, naming the limit) partitions of
// which this broker would host replicasHere replicas when their files do
// not fit in the file descriptors it has left (Config.FDHeadroom): past
// RLIMIT_NOFILE the replicas' logs, and then accepts and rolls, fail with
// "too many open files". In a cluster the broker that takes the request
// checks its even share of the new replicas; brokers of one cluster run
// with the same limit.
func (c Config) checkFDBudget(topic string, replicasHere int64) error {
	if c.FDHeadroom == nil || replicasHere <= 0 {
		return nil
	}
	free, ok := c.FDHeadroom()
	if !ok || replicasHere*FDsPerReplica <= free {
		return nil
	}
	return fmt.Errorf("%w: topic %s: %d new replicas on this broker need about %d file descriptors, %d are left under RLIMIT_NOFILE (raise the broker's open-files limit, ulimit -n)",
		kerr.PolicyViolation, topic, replicasHere, replicasHere*FDsPerReplica, max(free, 0))
}

// replicasPerBroker is the even share of partitions×rf replicas over the
// cluster's live brokers, rounded up.
func (b *Broker) replicasPerBroker(partitions int32, rf int16) int64 {
	n := int64(len(b.Brokers()))
	if n < 1 {
		n = 1
	}
	r := int64(partitions) * int64(max(rf, 1))
	return (r + n - 1) / n
}
