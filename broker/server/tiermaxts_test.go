package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTieredMaxTimestamp: ListOffsets -3 (KIP-734, kadm's
// ListMaxTimestampOffsets) finds the record with the largest timestamp
// across both tiers: in the tier after local retention deleted it
// locally, the older one when a local record has the same timestamp, the
// local one once a larger timestamp is produced.
func TestTieredMaxTimestamp(t *testing.T) {
	s := startTiered(t, tierStore(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	const topic, n, maxAt = "maxts", 300, 37
	one, segBytes, remote := "1", "4096", "true"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": &remote, "local.retention.ms": &one, "segment.bytes": &segBytes}, topic); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-10 * time.Hour)
	peak := time.Now().Add(-time.Hour)
	produce := func(from, count int, ts func(i int) time.Time) {
		t.Helper()
		for i := from; i < from+count; i += 20 {
			var rs []*kgo.Record
			for j := i; j < min(i+20, from+count); j++ {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Timestamp: ts(j), Value: fmt.Appendf(nil, "v%05d-%0200d", j, 0)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, n, func(i int) time.Time {
		if i == maxAt {
			return peak
		}
		return base.Add(time.Duration(i) * time.Millisecond)
	})
	local := waitTiered(t, cl, topic, n/2)
	if local <= maxAt {
		t.Fatalf("test setup: local log starts at %d, want above %d", local, maxAt)
	}
	check := func(wantOffset int64, wantTs time.Time, what string) {
		t.Helper()
		listed, err := adm.ListMaxTimestampOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := listed.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != wantOffset || o.Timestamp != wantTs.UnixMilli() {
			t.Fatalf("%s: ListOffsets max timestamp = %+v (found %v), want offset %d timestamp %d", what, o, ok, wantOffset, wantTs.UnixMilli())
		}
	}
	check(maxAt, peak, "the largest timestamp is in the tier only")

	// A local record with the same timestamp: the first one (in the tier)
	// wins, as Kafka answers the first record with the largest timestamp.
	produce(n, 1, func(int) time.Time { return peak })
	check(maxAt, peak, "a later local record has the same timestamp")

	// A larger timestamp locally wins.
	later := peak.Add(time.Minute)
	produce(n+1, 1, func(int) time.Time { return later })
	check(n+1, later, "a local record has a larger timestamp")
}
