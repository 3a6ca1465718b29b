package brokertest

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerFetch is a consumer's Fetch (ReplicaID -1, MinBytes 1, 1 MiB
// per partition and in all) of one topic, named by its name and ID, in
// fetch session session at epoch (0, 0: a new session; -1: none),
// parking up to maxWait ms; offsets maps each partition it names to its
// fetch offset (none: an incremental fetch naming nothing).
func ConsumerFetch(topic string, id [16]byte, session, epoch, maxWait int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, 1, 1<<20
	req.SessionID, req.SessionEpoch = session, epoch
	if len(offsets) > 0 {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, id
		for _, p := range slices.Sorted(maps.Keys(offsets)) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offsets[p], 1<<20
			fp.CurrentLeaderEpoch = -1
			ft.Partitions = append(ft.Partitions, fp)
		}
		req.Topics = append(req.Topics, ft)
	}
	return req
}
