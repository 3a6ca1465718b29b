package record

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// TestDecompressionBomb: a batch whose records inflate past
// DecompressionRatio times max.message.bytes is refused with ErrTooLarge
// (MESSAGE_TOO_LARGE) instead of being decompressed to the end (a 65 KiB
// zstd batch inflated to 2 GiB, 2.1 s of CPU).
func TestDecompressionBomb(t *testing.T) {
	const maxBatchBytes = 64 << 10
	recs := []Record{{Value: make([]byte, DecompressionRatio*maxBatchBytes+(1<<20))}}
	for _, c := range []Codec{Gzip, LZ4, Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			b := mustBuild(t, specWith(c), recs)
			if len(b) > maxBatchBytes {
				t.Fatalf("setup: the %s batch is %d bytes, over max.message.bytes", c, len(b))
			}
			_, err := Validate(b, maxBatchBytes)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("a %d byte %s batch of %d decompressed bytes: err %v, want %v", len(b), c, len(recs[0].Value), err, ErrTooLarge)
			}
			// Exactly at the limit is fine.
			if _, err := Validate(mustBuild(t, specWith(c), []Record{{Value: make([]byte, 1<<20)}}), maxBatchBytes); err != nil {
				t.Fatalf("a 1 MiB record: %v", err)
			}
		})
	}
}

// TestZstdWindowBound: a tiny zstd frame that declares a 64 MiB window is
// refused (CORRUPT_MESSAGE) without the decoder allocating the window.
func TestZstdWindowBound(t *testing.T) {
	// Frame header: magic, descriptor 0 (no content size, not single
	// segment), window descriptor 0x80 (2^(10+16) = 64 MiB); then RLE
	// blocks of 128 KiB of one byte, the last one marked last.
	frame := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	frame = append(frame, 0x00, 0x80)
	for i := range 8 {
		last := uint32(0)
		if i == 7 {
			last = 1
		}
		hdr := (128<<10)<<3 | 1<<1 | last
		frame = append(frame, byte(hdr), byte(hdr>>8), byte(hdr>>16), 'x')
	}
	b := rebuild(t, mustBuild(t, specWith(Zstd), testRecords(1, 10)), frame)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Validate(b, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("a %d byte batch declaring a 64 MiB zstd window: err %v, want %v", len(b), err, ErrCorrupt)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("validating a %d byte batch allocated %d MiB", len(b), got>>20)
	}
}
