package quota

import (
	"math"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/meta"
)

func ptr(s string) *string { return &s }

func quotas(qs ...meta.ClientQuota) map[string]meta.ClientQuota {
	out := map[string]meta.ClientQuota{}
	for _, q := range qs {
		out[q.Entity.Key()] = q
	}
	return out
}

func q(values map[string]float64, parts ...meta.QuotaEntityPart) meta.ClientQuota {
	return meta.ClientQuota{Entity: parts, Values: values}
}

func user(n *string) meta.QuotaEntityPart {
	return meta.QuotaEntityPart{Type: meta.QuotaEntityUser, Name: n}
}
func client(n *string) meta.QuotaEntityPart {
	return meta.QuotaEntityPart{Type: meta.QuotaEntityClientID, Name: n}
}

// TestResolveOrder: each of Kafka's eight entity levels wins over every
// level after it, and a level without the key is skipped.
func TestResolveOrder(t *testing.T) {
	levels := []meta.ClientQuota{
		q(nil, user(ptr("alice")), client(ptr("app"))),
		q(nil, user(ptr("alice")), client(nil)),
		q(nil, user(ptr("alice"))),
		q(nil, user(nil), client(ptr("app"))),
		q(nil, user(nil), client(nil)),
		q(nil, user(nil)),
		q(nil, client(ptr("app"))),
		q(nil, client(nil)),
	}
	for winner := range levels {
		var qs []meta.ClientQuota
		for i := winner; i < len(levels); i++ {
			l := levels[i]
			l.Values = map[string]float64{ProducerByteRate: float64(100 + i)}
			qs = append(qs, l)
		}
		// A more specific level that sets another key only: skipped.
		if winner > 0 {
			l := levels[winner-1]
			l.Values = map[string]float64{ConsumerByteRate: 1}
			qs = append(qs, l)
		}
		got, _, _, ok := Resolve(quotas(qs...), ProducerByteRate, "alice", "app")
		if !ok || got != float64(100+winner) {
			t.Errorf("level %d (%s) set: resolved %v (ok %v), want %d", winner, levels[winner].Entity.Key(), got, ok, 100+winner)
		}
	}
	if _, _, _, ok := Resolve(quotas(q(map[string]float64{ProducerByteRate: 5}, user(ptr("bob")))), ProducerByteRate, "alice", "app"); ok {
		t.Error("bob's quota applied to alice")
	}
}

// TestThrottleConverges: a client that sends as fast as it may and waits
// out each throttle ends up at the quota (within 3 %); one that sends
// below it is never throttled.
func TestThrottleConverges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bound  float64
		chunk  int
		within float64
	}{
		{"1MB/s in 64KiB requests", 1 << 20, 64 << 10, 0.03},
		{"100KB/s in 1KiB requests", 100 << 10, 1 << 10, 0.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			m := New(Config{Samples: 11, Window: time.Second, Now: func() time.Time { return now },
				Quotas: func() map[string]meta.ClientQuota {
					return quotas(q(map[string]float64{ProducerByteRate: tc.bound}, user(ptr("alice"))))
				}})
			start, sent := now, 0
			var measuredFrom time.Time
			measuredSent := 0
			for now.Sub(start) < 120*time.Second {
				d := m.Record(Produce, "alice", "app", tc.chunk)
				sent += tc.chunk
				if measuredFrom.IsZero() && now.Sub(start) >= 30*time.Second {
					measuredFrom, measuredSent = now, sent
				}
				now = now.Add(time.Millisecond + d) // 1 ms per request, then the throttle
			}
			got := float64(sent-measuredSent) / now.Sub(measuredFrom).Seconds()
			if math.Abs(got-tc.bound)/tc.bound > tc.within {
				t.Fatalf("steady rate %.0f B/s, quota %.0f B/s", got, tc.bound)
			}
		})
	}

	now := time.Unix(1000, 0)
	m := New(Config{Now: func() time.Time { return now }, Quotas: func() map[string]meta.ClientQuota {
		return quotas(q(map[string]float64{ProducerByteRate: 10000}, client(nil)))
	}})
	for range 1000 {
		if d := m.Record(Produce, "", "slow", 500); d != 0 {
			t.Fatalf("throttled %v at half the quota", d)
		}
		now = now.Add(100 * time.Millisecond) // 5,000 B/s
	}
}

// TestSharedAndSeparateRates: a user quota bounds all that user's
// clients together; a default user quota bounds each user on its own;
// without a quota nothing is throttled.
func TestSharedAndSeparateRates(t *testing.T) {
	now := time.Unix(1000, 0)
	var qs map[string]meta.ClientQuota
	m := New(Config{Samples: 3, Window: time.Second, Now: func() time.Time { return now }, Quotas: func() map[string]meta.ClientQuota { return qs }})
	if d := m.Record(Produce, "alice", "a", 1<<30); d != 0 {
		t.Fatalf("throttled %v without quotas", d)
	}
	qs = quotas(q(map[string]float64{ProducerByteRate: 1000}, user(ptr("alice"))), q(map[string]float64{ProducerByteRate: 1000}, user(nil)))
	// 2 s × 1000 B/s is the span's allowance: alice's two clients share it.
	if d := m.Record(Produce, "alice", "a", 1500); d != 0 {
		t.Fatalf("first 1500 B throttled %v", d)
	}
	if d := m.Record(Produce, "alice", "b", 1500); d == 0 {
		t.Fatal("alice's second client was not throttled: a user quota must be shared by the user's clients")
	}
	// bob and carol fall under the default user quota: one rate each.
	if d := m.Record(Produce, "bob", "a", 1500); d != 0 {
		t.Fatalf("bob throttled %v by alice's usage", d)
	}
	if d := m.Record(Produce, "carol", "a", 1500); d != 0 {
		t.Fatalf("carol throttled %v by bob's usage: a default user quota is per user", d)
	}
	// Fetch bytes count against consumer_byte_rate, not producer_byte_rate.
	if d := m.Record(Fetch, "alice", "a", 1<<20); d != 0 {
		t.Fatalf("a fetch throttled %v with only producer quotas set", d)
	}
	// The throttle is bounded by the span.
	if d := m.Record(Produce, "alice", "a", 1<<30); d > 3*time.Second {
		t.Fatalf("throttle %v beyond samples × window", d)
	}
}

// TestMutationBudget: KIP-599's token bucket. A client with
// controller_mutation_rate 10 may burst Samples × Window × 10 mutations;
// a request that finds the bucket non-negative is admitted even if it
// takes the bucket below zero; then it is exceeded, and the throttle is
// the time to refill to zero, after which it is admitted again.
func TestMutationBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(Config{Samples: 3, Window: time.Second, Now: func() time.Time { return now }, Quotas: func() map[string]meta.ClientQuota {
		return quotas(q(map[string]float64{ControllerMutationRate: 10}, user(ptr("alice"))))
	}})
	if m.Mutations("bob", "x") != nil {
		t.Fatal("bob has a mutation budget without a quota")
	}
	mu := m.Mutations("alice", "x")
	if mu.Exceeded() || mu.Throttle() != 0 {
		t.Fatal("a fresh budget is exceeded")
	}
	mu.Record(25) // 30 in the bucket: 5 left
	if mu.Exceeded() {
		t.Fatal("exceeded with 5 mutations left")
	}
	mu.Record(15) // admitted while non-negative: -10
	if !mu.Exceeded() {
		t.Fatal("not exceeded at -10")
	}
	if d := mu.Throttle(); d != time.Second {
		t.Fatalf("throttle %v at -10 with 10/s, want 1s", d)
	}
	// Another client ID of alice shares the user's budget.
	if !m.Mutations("alice", "y").Exceeded() {
		t.Fatal("alice's other client has a budget of its own")
	}
	now = now.Add(time.Second)
	if mu.Exceeded() || mu.Throttle() != 0 {
		t.Fatal("still exceeded after refilling to 0")
	}
	now = now.Add(time.Hour)
	mu.Record(30)
	if mu.Exceeded() {
		t.Fatal("the bucket holds more than its burst")
	}
	mu.Record(1)
	if !mu.Exceeded() {
		t.Fatal("the bucket refilled beyond its burst of 30")
	}
}

// TestRequestTimeConverges: request_percentage counts handler time as a
// percentage of one thread. A client whose requests each take 20 ms of
// handling, sent back to back and each followed by its throttle, ends up
// using its quota's share of a thread (within 3 %); one that uses less is
// never throttled; byte quotas do not count handler time.
func TestRequestTimeConverges(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New(Config{Samples: 11, Window: time.Second, Now: func() time.Time { return now },
		Quotas: func() map[string]meta.ClientQuota {
			return quotas(q(map[string]float64{RequestPercentage: 25}, user(ptr("alice"))),
				q(map[string]float64{ProducerByteRate: 1}, user(ptr("bob"))))
		}})
	const handling = 20 * time.Millisecond
	start := now
	var busy, measured time.Duration
	var from time.Time
	for now.Sub(start) < 120*time.Second {
		d := m.RecordTime("alice", "app", handling)
		now = now.Add(handling)
		if !from.IsZero() {
			busy += handling
		} else if now.Sub(start) >= 30*time.Second {
			from = now
		}
		now = now.Add(d)
	}
	measured = now.Sub(from)
	if got := 100 * busy.Seconds() / measured.Seconds(); math.Abs(got-25)/25 > 0.03 {
		t.Fatalf("steady handler share %.1f %% of a thread, quota 25 %%", got)
	}
	now = now.Add(time.Minute) // past the span the first loop filled
	for range 1000 {
		if d := m.RecordTime("alice", "other", 10*time.Millisecond); d != 0 {
			// alice's other client shares alice's quota: at 10 % it is
			// under it.
			t.Fatalf("throttled %v at 10 %% of a thread", d)
		}
		now = now.Add(100 * time.Millisecond)
	}
	if d := m.RecordTime("bob", "app", time.Hour); d != 0 {
		t.Fatalf("bob, with a byte quota only, throttled %v for handler time", d)
	}
}
