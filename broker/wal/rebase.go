package wal

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/strata-dev/strata/broker/record"
)

// Foreign pointers (Pointer.Rebase): a leader that appended a zone-local
// forwarder's range publishes a pointer to the forwarder's object instead
// of uploading the bytes again (docs/wal.md "Zone-local produce"). The
// object holds the batches as the producer sent them; the leader's copy
// differs only in the two header fields a leader stamps and the batch CRC
// does not cover: the base offset (bytes 0–8) and the partition leader
// epoch (bytes 12–16). ForwardedUnchanged is the leader's check that
// nothing else changed; RebaseBatches is the follower's stamping.

// Byte ranges of a v2 batch header that a leader stamps.
const (
	baseOffsetEnd = 8  // [0, 8): base offset
	epochStart    = 12 // [12, 16): partition leader epoch
	epochEnd      = 16
)

// ErrRebase means a foreign pointer's range could not be rebased: its
// batches do not frame, or their offsets do not end at the pointer's
// last offset. The follower fetches the range inline.
var ErrRebase = errors.New("wal: foreign range does not rebase")

// ForwardedUnchanged reports whether appended, the batches a leader
// appended from a forwarded range, back to back, equal forwarded, the
// range as the forwarder stored it, except for each batch's base offset
// and partition leader epoch. Anything else — another length, a
// LogAppendTime stamp, a recompression, batches split or dropped — and
// the range must be uploaded by the leader as usual.
func ForwardedUnchanged(forwarded, appended []byte) bool {
	if len(forwarded) != len(appended) || len(forwarded) == 0 {
		return false
	}
	for pos := 0; pos < len(appended); {
		b := appended[pos:]
		n, err := record.CheckFrame(b)
		if err != nil || n < record.BatchHeaderSize {
			return false
		}
		f := forwarded[pos : pos+n]
		if !bytes.Equal(f[baseOffsetEnd:epochStart], b[baseOffsetEnd:epochStart]) || !bytes.Equal(f[epochEnd:], b[epochEnd:n]) {
			return false
		}
		pos += n
	}
	return true
}

// RebaseBatches stamps the batches of data, back to back, in place as a
// leader appending them at base under epoch does: each batch's base
// offset is base plus the offsets of the batches before it (last offset
// delta + 1 each), its partition leader epoch is epoch. The batches'
// CRCs stay valid (they do not cover those fields). It fails when data
// does not frame as whole batches or the offsets do not end at last.
func RebaseBatches(data []byte, base, last int64, epoch int32) error {
	next := base
	for pos := 0; pos < len(data); {
		n, err := record.CheckFrame(data[pos:])
		if err != nil {
			return fmt.Errorf("%w: batch at byte %d: %v", ErrRebase, pos, err)
		}
		b := record.Batch(data[pos : pos+n])
		h, err := record.ParseHeader(b)
		if err != nil || h.LastOffsetDelta < 0 {
			return fmt.Errorf("%w: batch at byte %d: bad header", ErrRebase, pos)
		}
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, epoch)
		next += int64(h.LastOffsetDelta) + 1
		pos += n
	}
	if next != last+1 || len(data) == 0 {
		return fmt.Errorf("%w: batches end at offset %d, pointer says %d", ErrRebase, next-1, last)
	}
	return nil
}
