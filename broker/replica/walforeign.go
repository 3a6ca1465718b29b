package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/wal"
)

// Foreign pointers on the wire.
//
// A foreign pointer (wal.Pointer.Rebase) names a range of a zone-local
// forwarder's object, whose batches the follower must stamp with their
// offsets and the leader epoch before it appends them (docs/wal.md
// "Zone-local produce"). Neither pointer form has room for the flag, so
// it travels beside them, in a tagged field of its own (TagWALRebase):
//
//   - in a replica Fetch request, at the top level, value 0x01: the
//     follower reads foreign pointers. A leader sends foreign pointers
//     only to such a fetch (PlanWALFetchFor); another follower — an older
//     version, which would take the range for an ordinary one, fail its
//     batch checks and fetch it inline — gets those ranges inline at
//     once (reason foreign_unread). The follower says so on every fetch,
//     so a downgraded follower is never sent one: no state to go stale.
//   - in a response partition that carries pointers: uvarint count, then
//     the uvarint indexes (ascending) of the partition's pointers that
//     are foreign. An older leader never sends foreign pointers, nor the
//     tag.
//
// Tagged fields are skipped by whoever does not know them, so brokers of
// both versions replicate during a rolling upgrade.
const TagWALRebase = 0x5356 // "SV"

// foreignPointers is the request value of TagWALRebase.
const foreignPointers = 0x01

var errBadRebaseTag = errors.New("replica: malformed WAL rebase tag")

// AsksForeignPointers reports whether a replica fetch reads foreign
// pointers.
func AsksForeignPointers(req *kmsg.FetchRequest) bool {
	v := tagValue(&req.UnknownTags, TagWALRebase)
	return len(v) == 1 && v[0]&foreignPointers != 0
}

// askForeignPointers marks a follower's fetch as reading them.
func askForeignPointers(req *kmsg.FetchRequest) {
	req.UnknownTags.Set(TagWALRebase, []byte{foreignPointers})
}

// setRebase names the foreign pointers among a response partition's.
func setRebase(sp *kmsg.FetchResponseTopicPartition, ptrs []wal.Pointer) {
	var idx []uint64
	for i, p := range ptrs {
		if p.Rebase {
			idx = append(idx, uint64(i))
		}
	}
	if len(idx) == 0 {
		return
	}
	b := binary.AppendUvarint(nil, uint64(len(idx)))
	for _, i := range idx {
		b = binary.AppendUvarint(b, i)
	}
	sp.UnknownTags.Set(TagWALRebase, b)
}

// markRebase sets Rebase on the pointers a response partition's
// TagWALRebase names.
func markRebase(rp *kmsg.FetchResponseTopicPartition, ptrs []wal.Pointer) error {
	raw := tagValue(&rp.UnknownTags, TagWALRebase)
	if raw == nil {
		return nil
	}
	n, l := binary.Uvarint(raw)
	if l <= 0 || n == 0 || n > uint64(len(ptrs)) {
		return errBadRebaseTag
	}
	raw = raw[l:]
	prev := -1
	for range n {
		i, l := binary.Uvarint(raw)
		if l <= 0 || i >= uint64(len(ptrs)) || int(i) <= prev {
			return fmt.Errorf("%w: index out of range or order", errBadRebaseTag)
		}
		raw = raw[l:]
		ptrs[i].Rebase = true
		prev = int(i)
	}
	if len(raw) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errBadRebaseTag, len(raw))
	}
	return nil
}
