package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// bombBatch is a zstd batch of one record whose value is n zero bytes,
// written as RLE blocks of 128 KiB (4 bytes each): 1 GiB takes 32 KiB.
func bombBatch(t testing.TB, n int) record.Batch {
	t.Helper()
	body := []byte{0}                          // attributes
	body = binary.AppendVarint(body, 0)        // timestamp delta
	body = binary.AppendVarint(body, 0)        // offset delta
	body = binary.AppendVarint(body, -1)       // null key
	body = binary.AppendVarint(body, int64(n)) // value length
	head := append(binary.AppendVarint(nil, int64(len(body)+n+1)), body...)
	tail := binary.AppendVarint(nil, 0) // no headers

	block := func(frame []byte, typ, size int, last bool) []byte {
		h := size<<3 | typ<<1
		if last {
			h |= 1
		}
		return append(frame, byte(h), byte(h>>8), byte(h>>16))
	}
	// Magic, no content size, a 1 MiB window (exponent 10).
	frame := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	frame = append(frame, 0x00, 10<<3)
	frame = append(block(frame, 0, len(head), false), head...)
	for left := n; left > 0; left -= 128 << 10 {
		frame = append(block(frame, 1, min(left, 128<<10), false), 0)
	}
	frame = append(block(frame, 0, len(tail), true), tail...)

	spec := record.DefaultSpec()
	spec.Codec = record.Zstd
	b, err := record.Build(spec, []record.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), b[:record.BatchHeaderSize]...), frame...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))     // batch length
	binary.BigEndian.PutUint32(out[17:], record.ComputeCRC(out)) // CRC-32C
	return out
}

// TestDecompressionBudgetOfStoredBatches: batches stored in a log are
// decoded within record.MaxDecompressedBytes and without copying their
// records, however far they inflate (issue 26 item 1: four concurrent
// ListOffsets(timestamp=0) over a stored 32 KiB zstd batch of 1 GiB took a
// broker from 0.23 to 13.4 GB RSS). One batch under the cap (its lookups
// answer), one over it (they fail with record.ErrTooLarge), each looked up
// four times at once by timestamp and by max timestamp: all of it may
// allocate a few decoders, not the batches' records.
func TestDecompressionBudgetOfStoredBatches(t *testing.T) {
	b := openTest(t, t.TempDir())
	ctx := context.Background()
	for _, tc := range []struct {
		topic string
		size  int
		err   error
	}{
		{"under", record.MaxDecompressedBytes - 1<<20, nil},
		{"over", 1 << 30, record.ErrTooLarge},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			if _, err := b.CreateTopic(ctx, TopicSpec{Name: tc.topic, Partitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatal(err)
			}
			p, err := b.Partition(tc.topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			bomb := bombBatch(t, tc.size)
			if len(bomb) > 64<<10 {
				t.Fatalf("setup: the bomb takes %d bytes", len(bomb))
			}
			// Produce refuses it: 32 times max.message.bytes (1 MiB).
			if _, _, err := p.Append(bomb); !errors.Is(err, record.ErrTooLarge) {
				t.Fatalf("producing a %d byte batch of %d MiB: %v, want %v", len(bomb), tc.size>>20, err, record.ErrTooLarge)
			}
			// Stored as a broker stored it when max.message.bytes=0 meant
			// no limit.
			if _, err := p.Log.AppendAsLeader([]record.Batch{bomb}, 0); err != nil {
				t.Fatal(err)
			}

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 4 {
				wg.Go(func() {
					off, _, ok, err := p.OffsetForTimestamp(context.Background(), 0)
					if err == nil && (!ok || off != 0) {
						err = errors.New("timestamp 0 is not at offset 0")
					}
					errs <- err
				})
				wg.Go(func() {
					off, _, err := p.MaxTimestamp(context.Background())
					if err == nil && off != 0 {
						err = errors.New("the max timestamp is not at offset 0")
					}
					errs <- err
				})
			}
			wg.Wait()
			runtime.ReadMemStats(&after)
			close(errs)
			for err := range errs {
				if !errors.Is(err, tc.err) || (err != nil) != (tc.err != nil) {
					t.Errorf("lookup: %v, want %v", err, tc.err)
				}
			}
			// Without the budget: 8 copies of the value (1.9 GiB under
			// the cap, 8 GiB over it).
			if got := after.TotalAlloc - before.TotalAlloc; got > 128<<20 {
				t.Errorf("8 lookups over a %d KiB batch of %d MiB allocated %d MiB", len(bomb)>>10, tc.size>>20, got>>20)
			}
		})
	}
}
