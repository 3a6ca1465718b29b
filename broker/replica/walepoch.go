package replica

import (
	"errors"
	"fmt"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/wal"
)

// Epoch fencing of WAL pointers (docs/replication.md "WAL and leader
// failover").
//
// An object in a zone bucket says nothing about whether its writer still
// leads: a deposed leader (frozen, partitioned, or just slow) can finish
// an upload long after a new leader was elected, and the object lands
// all the same. What a follower can trust is the pointer, which comes on
// its connection to the leader it follows, answered at the leader epoch
// it fetches with, after the leader checked the follower's log for
// divergence. A pointer's range carries its leader epoch three times: in
// the pointer, in the object's chunk table (bound to the pointer by the
// CRC-32C) and in every batch (wal.SplitBatches checks both). So the
// follower accepts a pointer only if that epoch can be the leader's data
// at the follower's log end:
//
//   - not newer than the epoch the follower fetches at: a leader at epoch
//     E has no batch of a later epoch;
//   - not older than the latest epoch already in the follower's log (nor
//     than the pointers before it in the same answer): the leader found
//     no divergence, so the follower's log is a prefix of the leader's,
//     whose epochs never decrease.
//
// A pointer that fails is not downloaded; the follower fetches that range
// inline (and so do the pointers after it in the same answer).

// errPointerEpoch means a WAL pointer's leader epoch cannot be the
// leader's data at the follower's log end.
var errPointerEpoch = errors.New("WAL pointer from another leader epoch")

// checkPointerEpoch reports whether a follower fetching at leader epoch
// current, whose log (plus the pointers it accepted before in the same
// answer) ends with epoch last, may append the range ptr names.
func checkPointerEpoch(ptr wal.Pointer, current, last int32) error {
	switch {
	case ptr.LeaderEpoch > current:
		return fmt.Errorf("%w: %v is of epoch %d, newer than the leader's current epoch %d", errPointerEpoch, ptr, ptr.LeaderEpoch, current)
	case ptr.LeaderEpoch < last:
		return fmt.Errorf("%w: %v is of epoch %d, older than epoch %d the follower already has", errPointerEpoch, ptr, ptr.LeaderEpoch, last)
	}
	return nil
}

// usablePointers returns the pointers of tp in ptrs, in order, up to the
// first one checkPointerEpoch refuses (returned with the reason; the
// follower fetches from its first offset inline). current is the leader
// epoch the follower fetched at, last the latest epoch in its log.
func usablePointers(ptrs []wal.Pointer, tp meta.TopicPartition, current, last int32) (use []wal.Pointer, refused *wal.Pointer, err error) {
	for i := range ptrs {
		p := ptrs[i]
		if p.Topic != tp.Topic || p.Partition != tp.Partition {
			continue
		}
		if err := checkPointerEpoch(p, current, last); err != nil {
			return use, &ptrs[i], err
		}
		last = max(last, p.LeaderEpoch)
		use = append(use, p)
	}
	return use, nil, nil
}
