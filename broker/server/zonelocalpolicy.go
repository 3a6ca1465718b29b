package server

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/strata-dev/strata/broker/cost"
)

// Zone-local produce policy (wal.zonelocal.produce.policy; docs/wal.md
// "Zone-local produce", *When the bucket path pays*).
//
// Forwarding through the bucket saves the transfer of the records'
// bytes across zones (about $0.02/GB at AWS's prices) and pays a PUT and
// a GET per forwarded object (about $1.2e-6 at S3 Express One Zone's).
// An object smaller than cost.Prices.ForwardBreakEvenBytes (~58 KB with
// the default table) costs more than the transfer it saves. With
// policy=bucket (the default) every forwarded request goes through the
// bucket: no record byte crosses zones, at whatever the PUTs cost. With
// policy=auto the forwarder sends through the bucket only while the
// objects it makes are expected to reach the break-even size, and inline
// (the records in the Produce to the leader, across zones, as a plain
// produce would) otherwise: zone-local produce then never costs more
// than plain produce.

// ZoneLocalPolicy values.
const (
	ZoneLocalPolicyBucket = "bucket"
	ZoneLocalPolicyAuto   = "auto"
)

// zlRouter decides, per forwarded request, between the bucket and
// inline. Safe for concurrent use.
type zlRouter struct {
	auto      bool
	breakEven int64

	mu sync.Mutex
	// rate is an exponentially weighted rate (bytes/s, time constant
	// zlRateTau) of the bytes forwarded, by either path.
	rate   float64
	rateAt time.Time
	// putSecs is an exponentially weighted average of the forwarded
	// PUTs' durations.
	putSecs float64
	// bucket is the last choice (the switch has hysteresis).
	bucket bool
	// expected is the object size the last choice was made on.
	expected float64
}

const (
	zlRateTau = time.Second
	// zlInitialPut is the PUT time assumed before one was measured.
	zlInitialPut = 10 * time.Millisecond
	// zlInlineBelow: auto leaves the bucket when the expected object
	// falls below this share of the break-even size (hysteresis: it
	// returns at the break-even size).
	zlInlineBelow = 0.8
)

func newZLRouter(policy string, prices cost.Prices) (*zlRouter, error) {
	r := &zlRouter{breakEven: prices.ForwardBreakEvenBytes(), putSecs: zlInitialPut.Seconds(), bucket: true}
	switch policy {
	case "", ZoneLocalPolicyBucket:
	case ZoneLocalPolicyAuto:
		r.auto = true
		r.bucket = false // until the rate says otherwise
	default:
		return nil, fmt.Errorf("wal.zonelocal.produce.policy %q: want %s or %s", policy, ZoneLocalPolicyBucket, ZoneLocalPolicyAuto)
	}
	return r, nil
}

// viaBucket records a forwarded request of n bytes and says whether it
// goes through the bucket.
func (r *zlRouter) viaBucket(n int, now time.Time) bool {
	if !r.auto {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decay(now)
	r.rate += float64(n) / zlRateTau.Seconds()
	// The forwarder coalesces the requests that arrive while a PUT runs
	// into the next object: an object holds about a PUT's time of the
	// forwarded bytes, and at least this request.
	r.expected = math.Max(float64(n), r.rate*r.putSecs)
	be := float64(r.breakEven)
	switch {
	case r.breakEven == math.MaxInt64:
		r.bucket = false
	case !r.bucket && r.expected >= be:
		r.bucket = true
	case r.bucket && r.expected < zlInlineBelow*be:
		r.bucket = false
	}
	return r.bucket
}

func (r *zlRouter) decay(now time.Time) {
	if !r.rateAt.IsZero() {
		if dt := now.Sub(r.rateAt); dt > 0 {
			r.rate *= math.Exp(-dt.Seconds() / zlRateTau.Seconds())
		}
	}
	r.rateAt = now
}

// observePut records a forwarded PUT's duration.
func (r *zlRouter) observePut(d time.Duration) {
	r.mu.Lock()
	r.putSecs = 0.8*r.putSecs + 0.2*d.Seconds()
	r.mu.Unlock()
}

// state returns the last choice and the expected object size it was made
// on (auto only; bucket always true otherwise).
func (r *zlRouter) state() (bucket bool, expected float64) {
	if !r.auto {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bucket, r.expected
}
