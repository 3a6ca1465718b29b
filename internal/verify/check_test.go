package verify

import (
	"strings"
	"testing"
)

// TestChecker: the live check of one history, event by event.
func TestChecker(t *testing.T) {
	type ev struct {
		ack bool // true: acknowledged; false: consumed
		p   int32
		seq int64
		off int64
	}
	ack := func(p int32, seq int64) ev { return ev{ack: true, p: p, seq: seq} }
	read := func(p int32, off, seq int64) ev { return ev{p: p, seq: seq, off: off} }
	tests := []struct {
		name                               string
		events                             []ev
		acked, consumed, pending, dup, ooo int64
		missing                            []string
		dupExample, oooExample             string
	}{
		{name: "acked then read in order", events: []ev{ack(0, 0), ack(1, 0), ack(0, 1), read(0, 0, 0), read(0, 1, 1), read(1, 0, 0)},
			acked: 3, consumed: 3},
		{name: "read before the acknowledgement arrives", events: []ev{read(0, 0, 0), ack(0, 0)}, acked: 1, consumed: 1},
		{name: "acked, not read yet", events: []ev{ack(0, 0), ack(0, 1), read(0, 0, 0)}, acked: 2, consumed: 1, pending: 1,
			missing: []string{"partition 0: record 1 acknowledged, never consumed"}},
		{name: "a failed produce leaves a gap: not a violation", events: []ev{ack(0, 0), ack(0, 2), read(0, 0, 0), read(0, 1, 2)},
			acked: 2, consumed: 2},
		{name: "written though its produce failed: consumed, not acked", events: []ev{ack(0, 0), read(0, 0, 0), read(0, 1, 1)},
			acked: 1, consumed: 2},
		{name: "a record twice", events: []ev{ack(0, 0), ack(0, 1), read(0, 0, 0), read(0, 1, 1), read(0, 2, 1)},
			acked: 2, consumed: 2, dup: 1, dupExample: "partition 0: record 1 again at offset 2"},
		{name: "a record after a later one", events: []ev{ack(2, 0), ack(2, 1), ack(2, 2), read(2, 0, 0), read(2, 1, 2), read(2, 2, 1)},
			acked: 3, consumed: 3, ooo: 1, oooExample: "partition 2: record 1 at offset 2 after record 2"},
		{name: "lost across a word of the bitset", events: []ev{ack(1, 0), ack(1, 64), ack(1, 130), read(1, 0, 0), read(1, 1, 130)},
			acked: 3, consumed: 2, pending: 1, missing: []string{"partition 1: record 64 acknowledged, never consumed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(3)
			for _, e := range tc.events {
				if e.ack {
					c.ack(e.p, e.seq)
				} else {
					c.consume(e.p, e.off, e.seq)
				}
			}
			if c.acked != tc.acked || c.consumed != tc.consumed || c.pending() != tc.pending || c.duplicated != tc.dup || c.outOfOrder != tc.ooo {
				t.Fatalf("acked %d consumed %d pending %d duplicated %d out of order %d, want %d %d %d %d %d",
					c.acked, c.consumed, c.pending(), c.duplicated, c.outOfOrder, tc.acked, tc.consumed, tc.pending, tc.dup, tc.ooo)
			}
			if got := strings.Join(c.missing(maxExamples), "; "); got != strings.Join(tc.missing, "; ") {
				t.Errorf("missing %q, want %q", got, tc.missing)
			}
			dup, ooo := c.examples()
			if got := strings.Join(dup, "; "); got != tc.dupExample {
				t.Errorf("duplicate examples %q, want %q", got, tc.dupExample)
			}
			if got := strings.Join(ooo, "; "); got != tc.oooExample {
				t.Errorf("out-of-order examples %q, want %q", got, tc.oooExample)
			}
		})
	}
}
