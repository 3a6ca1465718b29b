package record

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDecode feeds batches to Records and Walk, the decoders of stored
// batches, with a small budget: they never panic, fail only with the
// package's sentinel errors, agree with each other record for record, and
// never hand over more key and value bytes than the budget.
func FuzzDecode(f *testing.F) {
	for _, c := range allCodecs {
		for _, recs := range [][]Record{testRecords(3, 10), {{Value: make([]byte, 200<<10)}}} {
			b, err := Build(specWith(c), recs)
			if err != nil {
				f.Fatal(err)
			}
			f.Add([]byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecode(t, in)
		if len(in) >= BatchHeaderSize {
			fixed := append([]byte(nil), in...)
			binary.BigEndian.PutUint32(fixed[posCRC:], crcOf(fixed))
			checkDecode(t, fixed)
		}
	})
}

func checkDecode(t *testing.T, in []byte) {
	const limit = 64 << 10
	recs, err := Records(in, limit)
	var walked []Record
	werr := Walk(in, limit, func(r *Record) error { walked = append(walked, *r); return nil })
	if (err == nil) != (werr == nil) {
		t.Fatalf("Records: %v, Walk: %v", err, werr)
	}
	if err != nil {
		for _, e := range []error{err, werr} {
			if !errors.Is(e, ErrCorrupt) && !errors.Is(e, ErrInvalidRecord) && !errors.Is(e, ErrTooLarge) &&
				!errors.Is(e, ErrUnsupportedMagic) && !errors.Is(e, ErrUnsupportedCodec) {
				t.Fatalf("error without a sentinel: %v", e)
			}
		}
		return
	}
	if len(recs) != len(walked) {
		t.Fatalf("Records decoded %d records, Walk %d", len(recs), len(walked))
	}
	total := 0
	for i, r := range recs {
		w := walked[i]
		if w.OffsetDelta != r.OffsetDelta || w.TimestampDelta != r.TimestampDelta || w.KeyLen != r.KeyLen || w.ValueLen != r.ValueLen ||
			int(r.KeyLen) != len(r.Key) && r.KeyLen >= 0 || int(r.ValueLen) != len(r.Value) && r.ValueLen >= 0 ||
			(r.KeyLen < 0) != (r.Key == nil) || (r.ValueLen < 0) != (r.Value == nil) || w.Key != nil || w.Value != nil {
			t.Fatalf("record %d: Records %+v, Walk %+v", i, r, w)
		}
		total += len(r.Key) + len(r.Value)
	}
	if total > limit {
		t.Fatalf("decoded %d bytes of keys and values within a budget of %d", total, limit)
	}
}

// TestDecodeBudget: Records and Walk stop a batch whose records inflate
// past their budget with ErrTooLarge, in every codec.
func TestDecodeBudget(t *testing.T) {
	for _, c := range allCodecs {
		b, err := Build(specWith(c), []Record{{Value: make([]byte, 1<<20)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Records(b, 1<<20); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: Records within 1 MiB of a 1 MiB value and its framing: %v, want %v", c, err, ErrTooLarge)
		}
		if err := Walk(b, 1<<20, func(*Record) error { return nil }); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: Walk: %v, want %v", c, err, ErrTooLarge)
		}
		if _, err := Records(b, 2<<20); err != nil {
			t.Errorf("%v: Records within 2 MiB: %v", c, err)
		}
		if DecompressLimit(0) != DecompressLimit(DefaultMaxMessageBytes) || DecompressLimit(1<<30) != MaxDecompressedBytes {
			t.Errorf("DecompressLimit(0) = %d, DecompressLimit(1 GiB) = %d", DecompressLimit(0), DecompressLimit(1<<30))
		}
	}
}
