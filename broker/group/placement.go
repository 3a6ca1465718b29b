package group

import (
	"encoding/binary"
	"hash/fnv"
)

// CoordinatorFor picks the broker that coordinates groupID among the live
// brokers by rendezvous (highest random weight) hashing: every broker gets
// a score hash(groupID, broker) and the highest wins. The choice depends
// only on the group id and the set of brokers (not their order), and when
// a broker leaves only the groups it coordinated move, spread over the
// remaining brokers. It returns -1 when brokers is empty.
func CoordinatorFor(groupID string, brokers []int32) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, b := range brokers {
		s := placementScore(groupID, b)
		if best == -1 || s > bestScore || (s == bestScore && b < best) {
			best, bestScore = b, s
		}
	}
	return best
}

func placementScore(groupID string, broker int32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(groupID))
	var b [5]byte
	b[0] = 0 // separator: group ids may end in any byte, broker ids are fixed width
	binary.BigEndian.PutUint32(b[1:], uint32(broker))
	h.Write(b[:])
	return mix64(h.Sum64())
}

// mix64 is the SplitMix64 finaliser; FNV alone changes too few high bits
// when only the trailing broker id bytes differ.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
