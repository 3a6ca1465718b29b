package record

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzValidateBudget validates arbitrary record sets within a request
// budget. It must never panic; what a budget accepts, Validate accepts
// too; a refusal Validate would not make is ErrBudgetSpent; and the bytes
// decompressed stay within the budget plus one batch's limit (the budget
// allows the first batch its own limit, and a batch stops at what is
// left).
func FuzzValidateBudget(f *testing.F) {
	for _, c := range allCodecs {
		b, err := Build(specWith(c), testRecords(3, 10))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(append([]byte(nil), b...), b...), int64(100))
		f.Add([]byte(b), int64(1<<20))
	}
	f.Fuzz(func(t *testing.T, in []byte, n int64) {
		if len(in) >= BatchHeaderSize {
			// Most mutations only break the CRC of the first batch.
			in = append([]byte(nil), in...)
			binary.BigEndian.PutUint32(in[posCRC:], crcOf(in))
		}
		n = max(n, 0) % (64 << 20)
		const maxBatchBytes = 1 << 20
		budget := NewBudget(n)
		_, errBudget := budget.Validate(in, maxBatchBytes)
		_, errPlain := Validate(in, maxBatchBytes)
		switch {
		case errBudget == nil && errPlain != nil:
			t.Fatalf("the budget accepted what Validate refuses: %v", errPlain)
		case errBudget != nil && errPlain == nil && !errors.Is(errBudget, ErrBudgetSpent):
			t.Fatalf("the budget refused with %v, not %v", errBudget, ErrBudgetSpent)
		case errors.Is(errBudget, ErrBudgetSpent) && !errors.Is(errBudget, ErrTooLarge):
			t.Fatalf("%v is not a %v", errBudget, ErrTooLarge)
		}
		if spent, most := budget.Spent(), n+DecompressLimit(maxBatchBytes)+bufSize; spent > most {
			t.Fatalf("decompressed %d bytes in a budget of %d (at most %d)", spent, n, most)
		}
	})
}
