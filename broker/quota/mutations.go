package quota

import (
	"time"
)

// ControllerMutationRate is KIP-599's quota: partitions created or
// deleted (CreateTopics, CreatePartitions, DeleteTopics) per second.
const ControllerMutationRate = "controller_mutation_rate"

// Mutations is the partition-mutation budget of one client (KIP-599): a
// token bucket that holds at most quota × Samples × Window seconds of
// mutations and refills at the quota. A request is admitted while the
// bucket is not negative (it may take it below zero); once it is, new
// mutations are refused with THROTTLING_QUOTA_EXCEEDED until it has
// refilled, and answers carry the time that takes.
type Mutations struct {
	m     *Manager
	key   rateKey
	bound float64
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Mutations returns the partition-mutation budget that applies to user
// and clientID (Kafka's resolution order), nil when no quota sets
// controller_mutation_rate for them.
func (m *Manager) Mutations(user, clientID string) *Mutations {
	if m == nil || m.cfg.Quotas == nil {
		return nil
	}
	quotas := m.cfg.Quotas()
	bound, hasU, hasC, ok := Resolve(quotas, ControllerMutationRate, user, clientID)
	if !ok || bound <= 0 {
		return nil
	}
	k := rateKey{kind: mutations, hasU: hasU, hasC: hasC}
	if hasU {
		k.user = user
	}
	if hasC {
		k.client = clientID
	}
	return &Mutations{m: m, key: k, bound: bound}
}

// mutations is the Kind of the token buckets (not a recorded amount).
const mutations Kind = -1

func (x *Mutations) burst() float64 {
	return x.bound * float64(x.m.cfg.Samples) * x.m.cfg.Window.Seconds()
}

// refilled returns the client's bucket brought up to now (mu held).
func (x *Mutations) refilled(now time.Time) *bucket {
	b := x.m.buckets[x.key]
	if b == nil {
		b = &bucket{tokens: x.burst(), last: now}
		x.m.buckets[x.key] = b
	}
	b.tokens = min(x.burst(), b.tokens+now.Sub(b.last).Seconds()*x.bound)
	b.last = now
	return b
}

// Exceeded reports whether the budget is spent: a strict request (v6+
// CreateTopics, v5+ DeleteTopics, v3+ CreatePartitions) refuses its next
// topic with THROTTLING_QUOTA_EXCEEDED.
func (x *Mutations) Exceeded() bool {
	if x == nil {
		return false
	}
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	return x.refilled(x.m.cfg.Now()).tokens < 0
}

// Record takes n partition mutations from the budget.
func (x *Mutations) Record(n int) {
	if x == nil || n <= 0 {
		return
	}
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	now := x.m.cfg.Now()
	x.refilled(now).tokens -= float64(n)
	x.m.sweepLocked(now)
}

// Throttle is how long until the budget is no longer negative (0: it is
// not).
func (x *Mutations) Throttle() time.Duration {
	if x == nil {
		return 0
	}
	x.m.mu.Lock()
	defer x.m.mu.Unlock()
	b := x.refilled(x.m.cfg.Now())
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / x.bound * float64(time.Second))
}
