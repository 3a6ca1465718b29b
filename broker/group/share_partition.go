package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share-partition state (KIP-932), kept at the partition's leader.
//
// A share partition is one (share group, topic, partition). Its records
// below the share-partition start offset (SPSO) are done: acknowledged or
// archived. Records from the SPSO up to the share-partition end offset
// (SPEO) are in flight, each in one state:
//
//	Available ──acquire (delivery count+1)──▶ Acquired ──accept──▶ Acknowledged
//	    ▲                                         │ ──reject / gap──▶ Archived
//	    └──── release / lock expiry / session close ┘ (Archived instead once the
//	                                                    delivery count reached the limit)
//
// Records at or above the SPEO have never been delivered. A fetch acquires
// the lowest available records for the fetching member under an
// acquisition lock (share.record.lock.duration.ms); a record whose lock
// expires is available again, to any member. The SPSO moves over every
// completed prefix. The in-flight window is bounded (shareMaxInFlight),
// as Kafka's group.share.partition.max.record.locks bounds it: a record
// that is never acknowledged blocks the window until it has been
// delivered share.delivery.count.limit times and is archived.
//
// Offsets inside a batch range are acquired whether or not a record with
// that offset still exists (compaction): the client acknowledges such
// gaps (type 0, archived). Offsets between batches and control batches
// (transaction markers) are archived without being delivered.

// shareMaxInFlight bounds SPEO-SPSO (Kafka's
// group.share.partition.max.record.locks default, 2000).
const shareMaxInFlight = 2000

// Acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes).
const (
	ShareAckGap     int8 = 0
	ShareAckAccept  int8 = 1
	ShareAckRelease int8 = 2
	ShareAckReject  int8 = 3
	ShareAckRenew   int8 = 4 // KIP-1222, ShareFetch/ShareAcknowledge v2
)

// Record states, numbered as Kafka persists them (RecordState).
const (
	ShareStateAvailable    int8 = 0
	ShareStateAcquired     int8 = 1
	ShareStateAcknowledged int8 = 2
	ShareStateArchived     int8 = 4
)

// ShareState is the durable state of one share partition: what a broker
// restart must not forget. Acquired records are stored as available with
// their delivery count (their locks do not survive a restart).
type ShareState struct {
	// TopicID is the id of the topic the state belongs to: state of a
	// deleted topic is not applied to a new topic of the same name.
	TopicID [16]byte `json:"topicId"`
	// StartOffset is the SPSO; -1 for a partition not initialized.
	StartOffset int64 `json:"startOffset"`
	// Batches are the in-flight records that are not available with a
	// delivery count of 0, as ranges of equal state and count.
	Batches []ShareStateBatch `json:"batches,omitempty"`
}

// ShareStateBatch is a range of in-flight records in one state.
type ShareStateBatch struct {
	First         int64 `json:"first"`
	Last          int64 `json:"last"`
	State         int8  `json:"state"`
	DeliveryCount int16 `json:"deliveryCount"`
}

// ShareBatch is one record batch of a partition's log as the share
// partition sees it.
type ShareBatch struct {
	Base, Last int64
	Control    bool
	// Aborted marks a batch of an aborted transaction, for a
	// read_committed share group (share.isolation.level): like a control
	// batch, it is archived, never delivered.
	Aborted bool
	Data    []byte
}

// ShareLog is the partition log a share partition acquires from.
type ShareLog interface {
	// Bounds returns the log start offset and the offset below which
	// records may be delivered (the high watermark).
	Bounds() (start, end int64)
	// Batches returns whole batches from the one holding offset on, about
	// maxBytes of them but at least one, none starting at or above the
	// high watermark.
	Batches(offset int64, maxBytes int) ([]ShareBatch, error)
}

// AcquiredRange is a range of offsets acquired by one fetch, with their
// delivery count.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// ShareAck is one acknowledgement batch: Types has one type for the whole
// range or one per offset.
type ShareAck struct {
	First, Last int64
	Types       []int8
}

type shareRecord struct {
	state    int8
	count    int16
	member   string
	deadline time.Time
}

// sharePartition is one share partition's state. It is not safe for
// concurrent use: the ShareCoordinator guards each with its own mutex.
type sharePartition struct {
	topicID [16]byte
	spso    int64 // -1 until initialized
	recs    []shareRecord
	// changed is closed (and replaced) whenever records become available
	// other than by the log growing: parked fetches wake on it.
	changed chan struct{}
}

func newSharePartition() *sharePartition {
	return &sharePartition{spso: -1, changed: make(chan struct{})}
}

func (sp *sharePartition) speo() int64 { return sp.spso + int64(len(sp.recs)) }

func (sp *sharePartition) notify() {
	close(sp.changed)
	sp.changed = make(chan struct{})
}

// restore sets the state from its durable form. Records the store keeps
// as available (they may have been acquired when it was written) that have
// been delivered limit times are archived, as a lock expiry would.
func (sp *sharePartition) restore(st ShareState, limit int16) {
	sp.spso, sp.recs = st.StartOffset, nil
	if st.StartOffset < 0 {
		return
	}
	for _, b := range st.Batches {
		if b.Last < b.First || b.First < sp.spso || b.Last-sp.spso >= shareMaxInFlight {
			continue // not written by this code; ignore rather than fail
		}
		for off := b.First; off <= b.Last; off++ {
			sp.extendTo(off, ShareStateAvailable)
			r := &sp.recs[off-sp.spso]
			r.state, r.count = b.State, b.DeliveryCount
			if r.state == ShareStateAcquired || r.state == ShareStateAvailable {
				r.state = ShareStateAvailable
				if r.count >= limit {
					r.state = ShareStateArchived
				}
			}
		}
	}
	sp.advance()
}

// snapshot returns the durable form.
func (sp *sharePartition) snapshot() ShareState {
	st := ShareState{TopicID: sp.topicID, StartOffset: sp.spso}
	for i, r := range sp.recs {
		state := r.state
		if state == ShareStateAcquired {
			state = ShareStateAvailable
		}
		if state == ShareStateAvailable && r.count == 0 {
			continue
		}
		off := sp.spso + int64(i)
		if n := len(st.Batches); n > 0 {
			last := &st.Batches[n-1]
			if last.Last == off-1 && last.State == state && last.DeliveryCount == r.count {
				last.Last = off
				continue
			}
		}
		st.Batches = append(st.Batches, ShareStateBatch{First: off, Last: off, State: state, DeliveryCount: r.count})
	}
	return st
}

// holdsAcquired reports whether a record is acquired (its lock may have
// expired).
func (sp *sharePartition) holdsAcquired() bool {
	for _, r := range sp.recs {
		if r.state == ShareStateAcquired {
			return true
		}
	}
	return false
}

// clone copies the state, to roll back a change the store refused.
func (sp *sharePartition) clone() (int64, []shareRecord) {
	return sp.spso, append([]shareRecord(nil), sp.recs...)
}

// extendTo grows the in-flight window to hold off; new offsets before off
// get fill (archived for offsets no batch holds).
func (sp *sharePartition) extendTo(off int64, fill int8) {
	for sp.speo() < off {
		sp.recs = append(sp.recs, shareRecord{state: fill})
	}
	if sp.speo() == off {
		sp.recs = append(sp.recs, shareRecord{state: ShareStateAvailable})
	}
}

// advance moves the SPSO over completed records.
func (sp *sharePartition) advance() {
	i := 0
	for i < len(sp.recs) && (sp.recs[i].state == ShareStateAcknowledged || sp.recs[i].state == ShareStateArchived) {
		i++
	}
	if i > 0 {
		sp.spso += int64(i)
		sp.recs = append(sp.recs[:0:0], sp.recs[i:]...)
	}
}

// giveBack makes an acquired record available again, or archives it once
// it has been delivered limit times.
func giveBack(r *shareRecord, limit int16) {
	r.member, r.deadline = "", time.Time{}
	if r.count >= limit {
		r.state = ShareStateArchived
	} else {
		r.state = ShareStateAvailable
	}
}

// expire releases records whose acquisition lock has expired; it returns
// whether any did and the earliest lock still pending (zero if none).
func (sp *sharePartition) expire(now time.Time, limit int16) (bool, time.Time) {
	var any bool
	var next time.Time
	for i := range sp.recs {
		r := &sp.recs[i]
		if r.state != ShareStateAcquired {
			continue
		}
		if !now.Before(r.deadline) {
			giveBack(r, limit)
			any = true
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	if any {
		sp.advance()
		sp.notify()
	}
	return any, next
}

// init sets the SPSO of a partition that has none (share.auto.offset.reset)
// and moves it over records the log no longer has.
func (sp *sharePartition) init(start, end int64, earliest bool) {
	if sp.spso < 0 {
		sp.spso = end
		if earliest {
			sp.spso = start
		}
	}
	if sp.spso < start {
		drop := min(start-sp.spso, int64(len(sp.recs)))
		sp.recs = append(sp.recs[:0:0], sp.recs[drop:]...)
		sp.spso = start
	}
}

// nextAvailable returns the lowest offset at or above from that may be
// acquired: an available in-flight record, else the SPEO.
func (sp *sharePartition) nextAvailable(from int64) int64 {
	for off := max(from, sp.spso); off < sp.speo(); off++ {
		if sp.recs[off-sp.spso].state == ShareStateAvailable {
			return off
		}
	}
	return max(from, sp.speo())
}

// acquire acquires up to maxRecords available records below the log's high
// watermark for member, reading about maxBytes of batches, and returns the
// batches holding them and the acquired ranges. changed reports whether
// the state changed (to be persisted).
func (sp *sharePartition) acquire(log ShareLog, member string, maxRecords, maxBytes int, lock time.Duration, now time.Time, earliest bool) (data []byte, ranges []AcquiredRange, changed bool, err error) {
	start, end := log.Bounds()
	before := sp.spso
	sp.init(start, end, earliest)
	changed = sp.spso != before
	if maxRecords <= 0 {
		maxRecords = 500
	}
	maxBytes = max(maxBytes, 1)
	n := 0
	pos := sp.nextAvailable(sp.spso)
	deadline := now.Add(lock)
	for n < maxRecords && pos < end && len(data) < maxBytes && pos-sp.spso < shareMaxInFlight {
		batches, err := log.Batches(pos, maxBytes-len(data))
		if err != nil {
			return data, ranges, changed, err
		}
		if len(batches) == 0 {
			break
		}
		full := false
		for _, b := range batches {
			if b.Base >= end || full {
				break
			}
			if b.Last < pos {
				continue
			}
			took := false
			for off := max(b.Base, pos); off <= b.Last && off < end; off++ {
				if off-sp.spso >= shareMaxInFlight || n == maxRecords {
					full = true
					break
				}
				if off >= sp.speo() {
					sp.extendTo(off, ShareStateArchived) // offsets between batches
					changed = true
				}
				r := &sp.recs[off-sp.spso]
				if b.Control || b.Aborted {
					if r.state == ShareStateAvailable {
						r.state = ShareStateArchived
						changed = true
					}
					continue
				}
				if r.state != ShareStateAvailable {
					continue
				}
				r.state, r.member, r.deadline = ShareStateAcquired, member, deadline
				r.count++
				n++
				took, changed = true, true
				if k := len(ranges); k > 0 && ranges[k-1].Last == off-1 && ranges[k-1].DeliveryCount == r.count {
					ranges[k-1].Last = off
				} else {
					ranges = append(ranges, AcquiredRange{First: off, Last: off, DeliveryCount: r.count})
				}
			}
			if took {
				data = append(data, b.Data...)
			}
			if !full {
				pos = b.Last + 1
			}
		}
		if full {
			break
		}
		pos = sp.nextAvailable(pos)
	}
	sp.advance()
	return data, ranges, changed, nil
}

// acknowledge applies member's acknowledgements. Every offset must be
// acquired by member, else nothing is applied: INVALID_RECORD_STATE
// (INVALID_REQUEST for a malformed batch). renew allows type 4.
func (sp *sharePartition) acknowledge(member string, acks []ShareAck, renew bool, limit int16, lock time.Duration, now time.Time) error {
	for _, a := range acks {
		if a.First < 0 || a.Last < a.First || len(a.Types) == 0 || (len(a.Types) != 1 && int64(len(a.Types)) != a.Last-a.First+1) {
			return fmt.Errorf("%w: acknowledgement batch %d-%d with %d types", kerr.InvalidRequest, a.First, a.Last, len(a.Types))
		}
		for _, t := range a.Types {
			if t < ShareAckGap || t > ShareAckRenew || (t == ShareAckRenew && !renew) {
				return fmt.Errorf("%w: acknowledge type %d", kerr.InvalidRequest, t)
			}
		}
		if a.First < sp.spso || a.Last >= sp.speo() {
			return fmt.Errorf("%w: offsets %d-%d are not in flight", kerr.InvalidRecordState, a.First, a.Last)
		}
		for off := a.First; off <= a.Last; off++ {
			if r := sp.recs[off-sp.spso]; r.state != ShareStateAcquired || r.member != member {
				return fmt.Errorf("%w: offset %d is not acquired by this member", kerr.InvalidRecordState, off)
			}
		}
	}
	released := false
	for _, a := range acks {
		for off := a.First; off <= a.Last; off++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[off-a.First]
			}
			r := &sp.recs[off-sp.spso]
			switch t {
			case ShareAckAccept:
				r.state, r.member = ShareStateAcknowledged, ""
			case ShareAckGap, ShareAckReject:
				r.state, r.member = ShareStateArchived, ""
			case ShareAckRelease:
				giveBack(r, limit)
				released = true
			case ShareAckRenew:
				r.deadline = now.Add(lock)
			}
		}
	}
	sp.advance()
	if released {
		sp.notify()
	}
	return nil
}

// releaseMember gives back every record member holds (its share session
// closed or it left the group); it reports whether any, and whether any
// of them was archived (delivery limit reached).
func (sp *sharePartition) releaseMember(member string, limit int16) (released, archived bool) {
	for i := range sp.recs {
		if r := &sp.recs[i]; r.state == ShareStateAcquired && r.member == member {
			giveBack(r, limit)
			released = true
			archived = archived || r.state == ShareStateArchived
		}
	}
	if released {
		sp.advance()
		sp.notify()
	}
	return released, archived
}

// counts returns the number of in-flight records per state, for describe
// and tests.
func (sp *sharePartition) deliveryCount(off int64) (int16, int8, bool) {
	if off < sp.spso || off >= sp.speo() {
		return 0, 0, false
	}
	r := sp.recs[off-sp.spso]
	return r.count, r.state, true
}
