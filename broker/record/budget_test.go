package record

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestRequestDecompressionBudget: the batches of one request share its
// decompression budget (issue 26 item 5: 300 one-KiB bombs, each under
// its own limit, made one Produce decompress 9.6 GB). Each codec: many
// small batches that each inflate to 1 MiB; the first batch may use its
// own limit, later ones what is left, and once the budget is spent
// batches fail with ErrBudgetSpent (a MESSAGE_TOO_LARGE) after at most
// one batch beyond the budget was decompressed. Uncompressed records do
// not count, and a nil budget is only the per-batch limit.
func TestRequestDecompressionBudget(t *testing.T) {
	const inflated = 1 << 20
	for _, c := range allCodecs {
		if c == None {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			one := mustBuild(t, specWith(c), []Record{{Value: make([]byte, inflated)}})
			var set []byte
			const n = 20
			for range n {
				set = append(set, one...)
			}
			if _, err := Validate(set, DefaultMaxMessageBytes); err != nil {
				t.Fatalf("no request budget: %v", err)
			}

			const allowed = 5*inflated + inflated/2
			b := NewBudget(allowed)
			_, err := b.Validate(set, DefaultMaxMessageBytes)
			if !errors.Is(err, ErrBudgetSpent) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d batches of %d inflated bytes in a budget of %d: err %v, want %v", n, inflated, allowed, err, ErrBudgetSpent)
			}
			if got := b.Spent(); got > allowed+inflated+64<<10 {
				t.Errorf("decompressed %d bytes in a budget of %d", got, allowed)
			}
			// Spent: the next batch fails at once, decompressing nothing.
			before := b.Spent()
			if err := b.Walk(one, MaxDecompressedBytes, nil); !errors.Is(err, ErrBudgetSpent) {
				t.Errorf("a walk after the budget is spent: %v", err)
			}
			if b.Spent() != before {
				t.Errorf("a walk after the budget is spent decompressed %d bytes", b.Spent()-before)
			}

			// The first batch may use its own limit, however small the budget.
			if _, err := NewBudget(1).Validate(one, DefaultMaxMessageBytes); err != nil {
				t.Errorf("one batch in a budget of 1 byte: %v", err)
			}
		})
	}
	t.Run("uncompressed", func(t *testing.T) {
		one := mustBuild(t, specWith(None), []Record{{Value: make([]byte, 64<<10)}})
		var set []byte
		for range 40 {
			set = append(set, one...)
		}
		b := NewBudget(1)
		if _, err := b.Validate(set, DefaultMaxMessageBytes); err != nil {
			t.Fatalf("uncompressed batches: %v", err)
		}
		if b.Spent() != 0 {
			t.Errorf("uncompressed batches spent %d", b.Spent())
		}
	})
}

func TestRequestDecompressionBytes(t *testing.T) {
	if got := RequestDecompressionBytes(100); got != MinRequestDecompression {
		t.Errorf("a 100 byte request: %d", got)
	}
	if got := RequestDecompressionBytes(10 << 20); got != RequestDecompressionRatio*10<<20 {
		t.Errorf("a 10 MiB request: %d", got)
	}
}

// TestDecodeManyRecordsPerByte: a compressed batch may hold more records
// than it has bytes (a zstd batch of a million tiny records is a few
// hundred KiB). Validate accepted such a batch and Records, Walk and
// WalkKeys refused it ("batch claims N records"), which stopped the
// cleaner of its compacted topic and ListOffsets by timestamp over it.
func TestDecodeManyRecordsPerByte(t *testing.T) {
	const n = 200_000
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte("k"), Value: []byte{}}
	}
	b := mustBuild(t, specWith(Zstd), recs)
	if len(b) >= n {
		t.Fatalf("setup: %d records in %d bytes", n, len(b))
	}
	if _, err := Validate(b, DefaultMaxMessageBytes); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got, err := Records(b, MaxDecompressedBytes)
	if err != nil || len(got) != n {
		t.Fatalf("Records: %d records, %v", len(got), err)
	}
	walked, keys := 0, 0
	if err := Walk(b, MaxDecompressedBytes, func(*Record) error { walked++; return nil }); err != nil || walked != n {
		t.Errorf("Walk: %d records, %v", walked, err)
	}
	err = WalkKeys(b, MaxDecompressedBytes, func(r *Record) error {
		if string(r.Key) == "k" && r.Value == nil && r.ValueLen == 0 {
			keys++
		}
		return nil
	})
	if err != nil || keys != n {
		t.Errorf("WalkKeys: %d records with their key and no value, %v", keys, err)
	}
	// Uncompressed, a record takes at least a byte of the batch.
	over := append(Batch(nil), mustBuild(t, specWith(None), testRecords(1, 1))...)
	binary.BigEndian.PutUint32(over[posNumRecords:], 1<<20) // far above the bytes there are
	binary.BigEndian.PutUint32(over[posCRC:], crcOf(over))
	if err := Walk(over, MaxDecompressedBytes, nil); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("an uncompressed batch claiming more records than bytes: %v", err)
	}
}
