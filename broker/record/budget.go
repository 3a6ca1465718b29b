package record

import (
	"context"
	"fmt"
	"sync"
)

// ErrBudgetSpent: a request decompressed as much as its budget allows
// (MESSAGE_TOO_LARGE, as ErrTooLarge, which it wraps).
var ErrBudgetSpent = fmt.Errorf("%w: the request's decompression budget is spent", ErrTooLarge)

// RequestDecompressionRatio bounds the bytes one request may decompress
// relative to its frame size, as DecompressionRatio does for one batch
// relative to max.message.bytes: the records of many small batches that
// each stay under their own limit cannot add up to more than this (issue
// 26 item 5: 300 one-KiB zstd bombs in one 323 KB Produce decompressed
// 9.6 GB, 3.9 s of CPU).
const RequestDecompressionRatio = 32

// MinRequestDecompression is the least any request may decompress,
// whatever its size: a request of a few compressible batches is not
// refused for being small.
const MinRequestDecompression = 32 << 20

// RequestDecompressionBytes is the decompression budget of a request of
// frameBytes bytes: RequestDecompressionRatio times it, at least
// MinRequestDecompression.
func RequestDecompressionBytes(frameBytes int) int64 {
	return max(int64(frameBytes)*RequestDecompressionRatio, MinRequestDecompression)
}

// Budget is the decompression budget of one request: the decompressed
// bytes of every compressed batch the request makes the broker decode
// (Produce validation, the key check of compacted topics, ListOffsets by
// timestamp and max timestamp over stored and tiered batches) count
// against it. The first batch a request decodes may always use its own
// limit (a topic's DecompressLimit, MaxDecompressedBytes for stored
// batches), so a budget never refuses a batch that would pass alone;
// every later batch gets at most what is left, and once nothing is left,
// batches fail with ErrBudgetSpent without being decompressed. The
// uncompressed records of a batch do not count: they are already in the
// request or on disk.
//
// Decompression streams (compression.go), so what a budget bounds is the
// CPU a request costs and the bytes pushed through decoders, not memory
// held: that is the decoders' windows, a few per CPU at once.
//
// A nil *Budget is no request budget (only the per-batch limits). A
// Budget is safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	left    int64
	decoded bool // a batch was decoded against the budget
	spent   int64
}

// NewBudget returns a budget of n decompressed bytes.
func NewBudget(n int64) *Budget { return &Budget{left: n} }

// Spent returns the decompressed bytes counted so far.
func (b *Budget) Spent() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// limit returns the decompression limit of a batch whose own limit is
// own, and whether the request's budget (rather than own) is what binds.
func (b *Budget) limit(own int64) (int64, bool) {
	if b == nil {
		return own, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.decoded || b.left >= own {
		return own, false
	}
	return max(b.left, 0), true
}

// spend counts n decompressed bytes of a batch.
func (b *Budget) spend(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.decoded = true
	b.left -= n
	b.spent += n
	b.mu.Unlock()
}

// Validate is Validate with every batch's decompression counted against
// b.
func (b *Budget) Validate(records []byte, maxBatchBytes int) ([]Batch, error) {
	return validate(records, maxBatchBytes, b)
}

// Walk is Walk with the batch's decompression counted against b.
func (b *Budget) Walk(batch Batch, limit int64, visit func(*Record) error) error {
	return decode(batch, limit, visit, keepNothing, b)
}

type budgetKey struct{}

// WithBudget returns ctx carrying the request's decompression budget,
// for the paths that decode stored batches below a request (the tier).
func WithBudget(ctx context.Context, b *Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetFrom returns the budget ctx carries, nil when none.
func BudgetFrom(ctx context.Context) *Budget {
	b, _ := ctx.Value(budgetKey{}).(*Budget)
	return b
}
