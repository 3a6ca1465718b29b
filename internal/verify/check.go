package verify

import (
	"fmt"
	"slices"
)

// maxExamples is how many examples of each kind of violation are kept.
const maxExamples = 10

// bitset is a growable set of sequence numbers (one bit each: hours of
// records at a few hundred per second take a few hundred kilobytes).
type bitset []uint64

// set adds i and reports whether it was there already.
func (b *bitset) set(i int64) (was bool) {
	w := int(i / 64)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	mask := uint64(1) << (i % 64)
	was = (*b)[w]&mask != 0
	(*b)[w] |= mask
	return was
}

func (b bitset) has(i int64) bool {
	w := int(i / 64)
	return w < len(b) && b[w]&(uint64(1)<<(i%64)) != 0
}

// partition is what the checker knows of one partition: the sequence
// numbers acknowledged to the producer and those the consumer read.
type partition struct {
	acked, seen bitset
	// last is the highest sequence number consumed so far, -1 before any.
	last int64
}

// checker judges the history of one run live: every acknowledged record
// must be consumed exactly once, each partition's records in the order
// they were produced. It is not safe for concurrent use (Workload holds its
// lock around it).
type checker struct {
	parts []partition

	acked, consumed int64
	// ackedSeen counts records both acknowledged and consumed, so that
	// pending (acknowledged, not consumed yet) is acked-ackedSeen at
	// any time without a scan.
	ackedSeen int64

	duplicated, outOfOrder   int64
	dupExamples, oooExamples []string
}

func newChecker(partitions int) *checker {
	c := &checker{parts: make([]partition, partitions)}
	for i := range c.parts {
		c.parts[i].last = -1
	}
	return c
}

// ack records that the record seq of partition p was acknowledged.
func (c *checker) ack(p int32, seq int64) {
	pt := &c.parts[p]
	if pt.acked.set(seq) {
		return // the client does not acknowledge a record twice; be safe
	}
	c.acked++
	if pt.seen.has(seq) {
		c.ackedSeen++
	}
}

// consume checks one record read from partition p (records of a partition
// arrive in offset order).
func (c *checker) consume(p int32, offset, seq int64) {
	pt := &c.parts[p]
	if pt.seen.set(seq) {
		c.duplicated++
		if len(c.dupExamples) < maxExamples {
			c.dupExamples = append(c.dupExamples, fmt.Sprintf("partition %d: record %d again at offset %d", p, seq, offset))
		}
		return
	}
	c.consumed++
	if pt.acked.has(seq) {
		c.ackedSeen++
	}
	if seq < pt.last {
		// Read after a later record: the log holds the partition's
		// records in another order than they were produced in.
		c.outOfOrder++
		if len(c.oooExamples) < maxExamples {
			c.oooExamples = append(c.oooExamples, fmt.Sprintf("partition %d: record %d at offset %d after record %d", p, seq, offset, pt.last))
		}
		return
	}
	pt.last = seq
}

// pending is how many acknowledged records were not consumed yet.
func (c *checker) pending() int64 { return c.acked - c.ackedSeen }

// missing lists up to n acknowledged records not consumed, as examples.
func (c *checker) missing(n int) []string {
	var out []string
	for p := range c.parts {
		pt := &c.parts[p]
		for w, bits := range pt.acked {
			if bits == 0 {
				continue
			}
			for i := range int64(64) {
				seq := int64(w)*64 + i
				if bits&(1<<i) != 0 && !pt.seen.has(seq) {
					if len(out) == n {
						return out
					}
					out = append(out, fmt.Sprintf("partition %d: record %d acknowledged, never consumed", p, seq))
				}
			}
		}
	}
	return out
}

func (c *checker) examples() (dup, ooo []string) {
	return slices.Clone(c.dupExamples), slices.Clone(c.oooExamples)
}
