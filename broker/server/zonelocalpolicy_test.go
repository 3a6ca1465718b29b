package server

import (
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/cost"
)

// feed sends requests of size bytes every gap for d, from *now, and
// returns the last choice.
func feed(r *zlRouter, now *time.Time, size int, gap, d time.Duration) bool {
	var bucket bool
	for end := now.Add(d); now.Before(end); *now = now.Add(gap) {
		bucket = r.viaBucket(size, *now)
	}
	return bucket
}

func TestZoneLocalRouter(t *testing.T) {
	prices := cost.Default()
	be := prices.ForwardBreakEvenBytes()
	now := time.Unix(1_000_000, 0)

	bucket, err := newZLRouter("", prices)
	if err != nil {
		t.Fatal(err)
	}
	if !feed(bucket, &now, 100, time.Second, 5*time.Second) {
		t.Fatal("policy bucket sent a request inline")
	}
	if _, err := newZLRouter("cheapest", prices); err == nil {
		t.Fatal("an unknown policy was accepted")
	}

	auto, err := newZLRouter(ZoneLocalPolicyAuto, prices)
	if err != nil {
		t.Fatal(err)
	}
	auto.observePut(10 * time.Millisecond)
	// 2,000 records/s of 1 KiB a third of which a broker forwards:
	// ~0.7 MB/s, 7 KB per 10 ms PUT, far below the ~58 KB break-even.
	if feed(auto, &now, 7_000, 10*time.Millisecond, 5*time.Second) {
		_, e := auto.state()
		t.Fatalf("0.7 MB/s went through the bucket (expected object %.0f B, break-even %d)", e, be)
	}
	// 10 MB/s: ~100 KB per PUT.
	if !feed(auto, &now, 10_000, time.Millisecond, 5*time.Second) {
		_, e := auto.state()
		t.Fatalf("10 MB/s went inline (expected object %.0f B, break-even %d)", e, be)
	}
	// Hysteresis: a rate just under the break-even keeps the bucket.
	perPut := float64(be) * 0.9
	if !feed(auto, &now, int(perPut/10), time.Millisecond, 5*time.Second) {
		t.Fatal("left the bucket at 90 % of the break-even size")
	}
	// Back to a trickle: inline again.
	if feed(auto, &now, 1_000, 10*time.Millisecond, 5*time.Second) {
		t.Fatal("a trickle stayed in the bucket")
	}
	// One request as large as the break-even object pays for itself.
	if !auto.viaBucket(int(be), now) {
		t.Fatal("a request of the break-even size went inline")
	}
	// Slower PUTs make bigger objects: 0.7 MB/s with 100 ms PUTs is a
	// 70 KB object.
	slow, _ := newZLRouter(ZoneLocalPolicyAuto, prices)
	for range 50 {
		slow.observePut(100 * time.Millisecond)
	}
	if !feed(slow, &now, 7_000, 10*time.Millisecond, 5*time.Second) {
		t.Fatal("0.7 MB/s with 100 ms PUTs went inline")
	}

	// Transfer free: the bucket never pays.
	free := prices
	free.CrossZoneOutPerGB, free.CrossZoneInPerGB = 0, 0
	never, _ := newZLRouter(ZoneLocalPolicyAuto, free)
	if feed(never, &now, 1<<20, time.Millisecond, time.Second) {
		t.Fatal("free transfer, and a forwarded request went through the bucket")
	}
}
