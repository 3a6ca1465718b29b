package protocol

// The order of a zone-local client's idempotent produce across a leader
// change (zone-local produce, zonelocal.go).
//
// A Kafka client sends a partition's batches to the partition's leader.
// When the leader changes, every request in flight to the old one fails,
// and an idempotent client retries from its first unacknowledged batch,
// to the new leader, in order, once the requests ahead were answered
// (librdkafka drains them, Java and franz-go too). So a new leader never
// receives a producer's batch before the earlier ones it lacks.
//
// A zone-local client sends every batch to its zone's broker, which
// forwards each request to the partition's leader of the moment (or
// appends it, once it leads). Without more, a request that follows one
// the old leader failed, or has not answered yet, reaches the new leader
// first, which breaks that promise (found by
// TestZoneLocalConfluentKafkaPythonLeaderMoves, a broker stopping while
// librdkafka produced through its zone's broker):
//
//   - the new leader lacks the failed batch and answers the next one
//     OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka takes that for a fatal
//     desynchronisation when the failed batch was possibly persisted (the
//     old leader answered REQUEST_TIMED_OUT), and the producer dies;
//   - the new leader got the failed batch by replication and appends the
//     next one; the client then acknowledges the failed batch's records
//     implicitly, without offsets.
//
// zlStreams remembers, per partition of a client connection, the
// idempotent producer (ID and epoch), the leader its batches go to and
// the highest sequence seen. When a request's leader is not the stream's,
// the request goes to the new leader only if it is a retry (its first
// sequence at or before the highest seen): the client has restarted from
// its first unacknowledged batch. Otherwise it is answered
// NOT_LEADER_OR_FOLLOWER, as the old leader answers the requests in flight
// when its leadership moves, and so is every later request that is not a
// retry, until the client's retry comes. Batches without a producer ID
// (not idempotent) keep no order across requests in Kafka either and are
// never refused; a new producer ID or epoch starts a new stream (its
// sequences start again).

import (
	"sync"

	"github.com/strata-dev/strata/broker/record"
)

// zlStreams is a client connection's idempotent produce streams, one per
// partition (shared by the connection's requests, ClientInfo).
type zlStreams struct {
	mu sync.Mutex
	m  map[zlStreamKey]*zlStream
}

type zlStreamKey struct {
	topic     string
	partition int32
}

// zlStream is one partition's idempotent produce on a connection.
type zlStream struct {
	producerID int64
	epoch      int16
	// leader is the broker the stream's batches go to (this broker's ID
	// when it leads).
	leader int32
	// maxSeq is the highest sequence of the batches seen, sent or refused.
	maxSeq int32
	// moving: the leader changed while batches were in flight; batches
	// are refused until the client's retry.
	moving bool
}

// admit says whether a zone-local client's records for the partition may
// go to leader (this broker's ID when it leads), and records what the
// stream saw. A nil zlStreams admits everything.
func (s *zlStreams) admit(topic string, partition, leader int32, records []byte) bool {
	if s == nil {
		return true
	}
	first, lastSeq, ok := idempotentSpan(records)
	if !ok {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := zlStreamKey{topic, partition}
	st := s.m[key]
	if st == nil || st.producerID != first.ProducerID || st.epoch != first.ProducerEpoch {
		if s.m == nil {
			s.m = map[zlStreamKey]*zlStream{}
		}
		s.m[key] = &zlStream{producerID: first.ProducerID, epoch: first.ProducerEpoch, leader: leader, maxSeq: lastSeq}
		return true
	}
	retry := seqAtOrBefore(first.BaseSequence, st.maxSeq)
	if seqAtOrBefore(st.maxSeq, lastSeq) {
		st.maxSeq = lastSeq
	}
	switch {
	case st.leader == leader && !st.moving:
		return true
	case retry:
		// The client restarted from its first unacknowledged batch,
		// once every request ahead was answered: from here its batches
		// go to the new leader in order.
		st.leader, st.moving = leader, false
		return true
	default:
		st.moving = true
		return false
	}
}

// idempotentSpan returns the first batch header of records and the last
// sequence of its last batch; ok is false for records without a producer
// ID or that do not parse (the append refuses those).
func idempotentSpan(records []byte) (first record.Header, lastSeq int32, ok bool) {
	first, err := record.ParseHeader(records)
	if err != nil || first.ProducerID < 0 || first.BaseSequence < 0 {
		return record.Header{}, 0, false
	}
	for b := records; len(b) >= record.BatchHeaderSize; {
		h, _ := record.ParseHeader(b)
		if h.Size() <= 0 || h.Size() > len(b) {
			break
		}
		lastSeq = h.LastSequence()
		b = b[h.Size():]
	}
	return first, lastSeq, true
}

// seqAtOrBefore reports whether producer sequence a is at or before b.
// Sequences wrap from 2^31-1 to 0; two within half that range of each
// other compare in wrapped order.
func seqAtOrBefore(a, b int32) bool {
	return (int64(b)-int64(a))&(1<<31-1) < 1<<30
}
