package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

// observeConsumerWake records, for a consumer fetch that was parked and
// is answered with records, how long after each answered partition's HWM
// move the answer came (strata_wal_stage_seconds{stage="hwm_to_consumer_fetch"},
// WAL replication only; broker/replica walstage.go).
func observeConsumerWake(b *broker.Broker, resp *kmsg.FetchResponse) {
	rm := b.Replicas()
	if rm == nil || !rm.WALEnabled() {
		return
	}
	for _, rt := range resp.Topics {
		topic := rt.Topic
		if topic == "" { // v13+: by ID
			info, ok := b.TopicByID(rt.TopicID)
			if !ok {
				continue
			}
			topic = info.Name
		}
		for _, rp := range rt.Partitions {
			if len(rp.RecordBatches) == 0 {
				continue
			}
			if p, err := b.Partition(topic, rp.Partition); err == nil && p.Replica != nil {
				rm.ObserveConsumerFetchWake(p.Replica)
			}
		}
	}
}
