package internaltopic

import "math"

// PartitionFor is the partition of an internal topic that holds an
// owner's records: Kafka's abs(id.hashCode()) % partitions, with Java's
// String.hashCode over the id's UTF-16 code units, so that a tool
// computing a group's (or a transactional id's) partition the Kafka way
// finds it.
func PartitionFor(id string, partitions int32) int32 {
	var h int32
	for _, u := range utf16Units(id) {
		h = 31*h + int32(u)
	}
	switch {
	case h == math.MinInt32:
		h = 0 // Kafka's Utils.abs
	case h < 0:
		h = -h
	}
	return h % partitions
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 0x10000:
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		default:
			out = append(out, uint16(r))
		}
	}
	return out
}
