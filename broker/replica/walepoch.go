package replica

import (
	"errors"
	"fmt"
	"sort"

	"github.com/strata-dev/strata/broker/log"
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

// firstStalePointer returns the base offset of the first pointer in ptrs
// (offset order) whose range the log does not hold at the pointer's leader
// epoch, or end when every pointer is good. epochs is the log's epoch
// cache (oldest first), start and end its start and end offsets.
//
// A pointer index is written by a leader; the log under it can change
// without the index hearing of it: a broker that restarted follows before
// its pointer file is open, truncates to a divergence point and appends
// what a later leader wrote there. The offsets are the same, the data is
// not, and the epoch tells them apart: a range of epoch E is the leader
// of E's data only where the log still has epoch E (log matching: logs
// that agree on the epoch at an offset agree on everything up to it). So
// every pointer after the first stale one is stale too, and the index is
// truncated there.
func firstStalePointer(ptrs []wal.Pointer, epochs []log.EpochEntry, start, end int64) int64 {
	// epochAt is the index of the epoch entry covering off, -1 if none.
	epochAt := func(off int64) int {
		i := sort.Search(len(epochs), func(i int) bool { return epochs[i].StartOffset > off })
		return i - 1
	}
	for _, ptr := range ptrs {
		if ptr.LastOffset >= end {
			return min(ptr.BaseOffset, end)
		}
		if ptr.LastOffset < start {
			continue // below the log start: pruned, never served
		}
		first, last := epochAt(max(ptr.BaseOffset, start)), epochAt(ptr.LastOffset)
		if first < 0 || first != last || epochs[first].Epoch != ptr.LeaderEpoch {
			return ptr.BaseOffset
		}
	}
	return end
}
