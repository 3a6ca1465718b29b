package tier_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/tier"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestMaxTimestamp: the tier's answer to ListOffsets -3 is the first
// record with the largest timestamp at or above the tier's start and
// below the bound the caller gives (the local log start); a start moved
// past that record (DeleteRecords) gives the next largest.
func TestMaxTimestamp(t *testing.T) {
	srv := s3server.Start(t, bucket)
	ctx := context.Background()
	p := tier.New(newStore(t, srv), tier.Config{Cluster: "c"}, logr.Discard()).Partition("t", "id", 0)
	l := openLog(t, 2000)
	// Batches of 3 records stamped ts0+10i, +1, +2: batch 30's are the
	// largest; batch 3 gets a peak by its own base timestamp.
	appendN(t, l, 3, 0, 1_000)
	appendN(t, l, 1, 0, 90_000) // offsets 9-11, timestamps 90000-90002
	appendN(t, l, 30, 0, 2_000)
	if _, err := p.Upload(ctx, l, l.EndOffset(), 0); err != nil {
		t.Fatal(err)
	}
	m, _ := p.Manifest()
	for _, tt := range []struct {
		below      int64
		wantOffset int64
		wantTs     int64
		wantOK     bool
	}{
		{below: m.EndOffset, wantOffset: 11, wantTs: 90_002, wantOK: true},
		{below: 11, wantOffset: 10, wantTs: 90_001, wantOK: true},
		{below: 9, wantOffset: 8, wantTs: 1_022, wantOK: true},
		{below: 0, wantOffset: -1, wantTs: -1},
	} {
		o, ts, ok, err := p.MaxTimestamp(ctx, tt.below)
		if err != nil || o != tt.wantOffset || ts != tt.wantTs || ok != tt.wantOK {
			t.Errorf("MaxTimestamp(below %d) = %d, %d, %v, %v; want %d, %d, %v", tt.below, o, ts, ok, err, tt.wantOffset, tt.wantTs, tt.wantOK)
		}
	}
	// DeleteRecords past the peak: the next largest is the last record.
	if err := p.DeleteRecordsBefore(ctx, 0, 12); err != nil {
		t.Fatal(err)
	}
	last := int64(33*3 - 1)
	if last >= m.EndOffset {
		last = m.EndOffset - 1
	}
	o, ts, ok, err := p.MaxTimestamp(ctx, m.EndOffset)
	if err != nil || !ok || o != last || ts != 2_000+10*((last-12)/3)+(last-12)%3 {
		t.Fatalf("after DeleteRecords(12): MaxTimestamp = %d, %d, %v, %v; want offset %d", o, ts, ok, err, last)
	}
}
