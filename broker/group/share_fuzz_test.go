package group

import (
	"fmt"
	"testing"
	"time"
)

// FuzzSharePartition drives one share partition with arbitrary sequences
// of acquisitions by three members, acknowledgements (valid and not),
// clock jumps past acquisition locks, member releases, restarts (snapshot
// and restore) and a growing log with control batches and offset gaps,
// and checks it against a model after every step:
//
//   - no record is acquired while another member's lock on it holds;
//   - a record accepted, rejected or archived is never acquired again;
//   - each acquisition's delivery count is the previous one plus one, and
//     never exceeds the limit;
//   - control batches and offsets no batch holds are never delivered;
//   - a refused acknowledgement changes nothing;
//
// and at the end, once every lock expired, one member can drain the
// partition: the SPSO reaches the log end.
func FuzzSharePartition(f *testing.F) {
	f.Add([]byte{0, 0, 9, 1, 0, 0, 3, 200, 0, 1, 9})
	f.Add([]byte{6, 5, 0, 0, 9, 0, 1, 9, 1, 0, 2, 1, 1, 3, 4, 1, 5, 0, 2, 9, 3, 255, 0, 1, 9})
	f.Add([]byte{0, 2, 3, 2, 0, 0, 5, 0, 1, 2, 1, 1, 2, 0, 0, 2, 1, 1, 2, 0, 0, 2, 1, 1, 2, 0, 0, 2, 1, 1, 2})
	f.Fuzz(fuzzSharePartitionBody)
}

func fuzzSharePartitionBody(t *testing.T, ops []byte) {
	if len(ops) > 512 {
		ops = ops[:512] // longer runs add nothing but time
	}
	{
		const (
			limit = 5
			lock  = 10 * time.Second
		)
		log := newFakeShareLog(3, 4)
		control := map[int64]bool{}
		sp := newSharePartition()
		now := t0
		type hold struct {
			member   string
			deadline time.Time
		}
		held := map[int64]hold{}
		counts := map[int64]int16{}
		done := map[int64]bool{}
		members := []string{"a", "b", "c"}
		expire := func() {
			for off, h := range held {
				if !now.Before(h.deadline) {
					delete(held, off)
					if counts[off] >= limit {
						done[off] = true
					}
				}
			}
		}
		giveBackModel := func(off int64) {
			delete(held, off)
			if counts[off] >= limit {
				done[off] = true
			}
		}
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		acquire := func(member string, maxRecords int) []AcquiredRange {
			sp.expire(now, limit)
			expire()
			_, ranges, _, err := sp.acquire(log, member, maxRecords, 1<<20, lock, now, true)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range ranges {
				for off := r.First; off <= r.Last; off++ {
					n++
					if h, ok := held[off]; ok {
						t.Fatalf("%s acquired %d held by %s until %v (now %v)", member, off, h.member, h.deadline, now)
					}
					if done[off] {
						t.Fatalf("%s acquired %d, already done", member, off)
					}
					if control[off] {
						t.Fatalf("%s acquired %d of a control batch", member, off)
					}
					if r.DeliveryCount != counts[off]+1 || r.DeliveryCount > limit {
						t.Fatalf("%s acquired %d with count %d after %d deliveries", member, off, r.DeliveryCount, counts[off])
					}
					counts[off] = r.DeliveryCount
					held[off] = hold{member, now.Add(lock)}
				}
			}
			if n > maxRecords {
				t.Fatalf("%d records acquired, max %d", n, maxRecords)
			}
			return ranges
		}
		for len(ops) > 0 {
			switch op := next() % 7; op {
			case 0: // acquire
				acquire(members[int(next())%3], int(next()%8)+1)
			case 1: // acknowledge some of what a member holds
				member := members[int(next())%3]
				typ := int8(next() % 4)
				sp.expire(now, limit)
				expire()
				var offs []int64
				for off, h := range held {
					if h.member == member {
						offs = append(offs, off)
					}
				}
				if len(offs) == 0 {
					continue
				}
				off := offs[int(next())%len(offs)]
				if err := sp.acknowledge(member, []ShareAck{{First: off, Last: off, Types: []int8{typ}}}, false, limit, lock, now); err != nil {
					t.Fatalf("%s acknowledging %d it holds (type %d): %v", member, off, typ, err)
				}
				if typ == ShareAckRelease {
					giveBackModel(off)
				} else {
					delete(held, off)
					done[off] = true
				}
			case 2: // an acknowledgement of arbitrary offsets
				member := members[int(next())%3]
				first := int64(next() % 16)
				last := first + int64(next()%3)
				sp.expire(now, limit)
				expire()
				before := fmt.Sprint(sp.snapshot(), sp.recs)
				err := sp.acknowledge(member, []ShareAck{{First: first, Last: last, Types: []int8{ShareAckAccept}}}, false, limit, lock, now)
				if err != nil {
					if after := fmt.Sprint(sp.snapshot(), sp.recs); after != before {
						t.Fatalf("refused acknowledgement changed the state:\n%s\n%s", before, after)
					}
					continue
				}
				for off := first; off <= last; off++ {
					if h, ok := held[off]; !ok || h.member != member {
						t.Fatalf("%s accepted %d it does not hold", member, off)
					}
					delete(held, off)
					done[off] = true
				}
			case 3: // time passes
				now = now.Add(time.Duration(next()) * lock / 128)
			case 4: // a member's session closes
				member := members[int(next())%3]
				sp.releaseMember(member, limit)
				for off, h := range held {
					if h.member == member {
						giveBackModel(off)
					}
				}
			case 5: // restart: acquired records come back available
				st := sp.snapshot()
				sp = newSharePartition()
				sp.restore(st, limit)
				for off := range held {
					giveBackModel(off) // as a lock expiry
				}
			case 6: // the log grows, with a control batch or a gap
				base := log.end
				switch next() % 3 {
				case 0:
					log.add(base, base+int64(next()%4), false)
				case 1:
					log.add(base, base, true)
					control[base] = true
				case 2:
					log.add(base+2, base+3, false) // base, base+1: no batch
					control[base], control[base+1] = true, true
				}
			}
		}
		// Drain: every lock expires, then one member takes and accepts
		// everything left.
		now = now.Add(lock)
		for range 1000 {
			ranges := acquire("z", 50)
			if len(ranges) == 0 {
				break
			}
			for _, r := range ranges {
				if err := sp.acknowledge("z", []ShareAck{{First: r.First, Last: r.Last, Types: []int8{ShareAckAccept}}}, false, limit, lock, now); err != nil {
					t.Fatal(err)
				}
				for off := r.First; off <= r.Last; off++ {
					delete(held, off)
					done[off] = true
				}
			}
		}
		for off, c := range counts {
			if c > limit {
				t.Fatalf("record %d delivered %d times", off, c)
			}
		}
		if sp.spso != log.end {
			t.Fatalf("drained to SPSO %d, log end %d (in flight %+v)", sp.spso, log.end, sp.recs)
		}
	}
}
