package replica

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// HWM wakes for followers that serve consumers (KIP-392, issue #29).
//
// A parked replica fetch is answered for new data, not for a high
// watermark move alone (as in Kafka): a follower learns the HWM with its
// next answer, at most replica.fetch.wait.max.ms later when the
// partition goes idle. Its rack consumers read up to that HWM, so their
// end-to-end latency was the producer's acks=all latency plus up to a
// replica fetch round (WAL: an upload and a GET) more. Waking every
// parked replica fetch at every HWM move costs a round trip of
// cross-zone bytes per move and follower, for followers that nobody
// reads from too.
//
// So a follower asks for the wake only for the partitions it serves to
// consumers: one a consumer fetch read on this broker, as follower,
// within ConsumerServeWindow. It puts the tagged field TagHWMWake on
// those request partitions, its HWM as the value (uvarint). The leader
// then treats an HWM move of such a partition as news that answers a
// parked fetch: it answers when the HWM is above what the follower has
// (the value it sent, or, in a fetch session, the HWM the session last
// answered it with). Partitions without the tag are served as before,
// so a follower serving no consumer pays nothing extra. The flag is part
// of the position a fetch session holds (sentPosition): a change names
// the partition once. A leader of an older version skips the unknown tag
// (no wake, as before); an older follower never sends it.

// TagHWMWake is the tagged field of a replica Fetch request partition
// (v12+) by which the follower asks to be answered at an HWM move: its
// value is the follower's HWM (uvarint). "SW".
const TagHWMWake = 0x5357

// ConsumerServeWindow is how long after a consumer fetch read a
// partition on this follower it still asks for HWM wakes. Consumers read
// at least every fetch wait (franz-go: 5 s at most; a fetch session's
// parked partition is read again at every quiet refresh, at most 1 s).
const ConsumerServeWindow = 10 * time.Second

// consumerReadStep: a consumer read stores its time only when the stored
// one is this much older (no write per fetch on a shared cache line).
const consumerReadStep = 100 * time.Millisecond

// NoteConsumerRead records that a consumer fetch read this replica, as
// follower (KIP-392): its replica fetches then ask for HWM wakes.
func (p *Partition) NoteConsumerRead() {
	now := p.now().UnixNano()
	if now-p.consumerReadAt.Load() >= int64(consumerReadStep) {
		p.consumerReadAt.Store(now)
	}
}

// servesConsumers reports whether a consumer read this replica within
// ConsumerServeWindow before now.
func (p *Partition) servesConsumers(now time.Time) bool {
	at := p.consumerReadAt.Load()
	return at != 0 && now.UnixNano()-at < int64(ConsumerServeWindow)
}

// HWMWake reports whether a replica fetch partition asks for HWM wakes,
// and the follower's HWM it carries (-1: none readable).
func HWMWake(rp *kmsg.FetchRequestTopicPartition) (followerHWM int64, ok bool) {
	v := tagValue(&rp.UnknownTags, TagHWMWake)
	if v == nil {
		return 0, false
	}
	h, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) || h > 1<<62 {
		return -1, true
	}
	return int64(h), true
}

// askHWMWake puts TagHWMWake with the follower's HWM on a request
// partition.
func askHWMWake(rp *kmsg.FetchRequestTopicPartition, hwm int64) {
	rp.UnknownTags.Set(TagHWMWake, binary.AppendUvarint(nil, uint64(max(hwm, 0))))
}

// CountHWMWake counts a replica fetch answered for an HWM move alone
// (strata_replica_fetch_hwm_wakes_total).
func (m *Manager) CountHWMWake() { m.hwmWakes.Inc() }
