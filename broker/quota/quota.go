// Package quota enforces client quotas: Kafka's byte-rate quotas per user
// and client ID (KIP-13, KIP-55), request-time quotas (KIP-124) and
// partition-mutation quotas (KIP-599, mutations.go), set with
// AlterClientQuotas and kept in the cluster metadata (meta.ClientQuota).
// It also resolves KIP-612's per-IP connection_creation_rate
// (IPConnectionRate), which the protocol server enforces at accept.
//
// Each request that counts (Produce: the request's bytes against
// producer_byte_rate; Fetch from a consumer: the records' bytes against
// consumer_byte_rate; every request a client sends but the exempt ones:
// the time its handler ran, as a percentage of one thread, against
// request_percentage) is recorded in a rate over the last Samples windows
// of Window each. When the rate is above the quota the answer carries a
// throttle time, (rate − quota) / quota × the rate's window, at most
// Samples × Window, and the broker handles no further request of that
// connection until it has passed (KIP-219: the response goes out at once,
// the connection is muted after it); clients also wait it out on their
// side.
//
// The quota that applies to a (user, client-id) pair is the first entity
// with that quota key set, in Kafka's order:
//
//	user=U, client-id=C          user=<default>, client-id=C
//	user=U, client-id=<default>  user=<default>, client-id=<default>
//	user=U                       user=<default>
//	                             client-id=C
//	                             client-id=<default>
//
// (left column first, top to bottom). The rate is shared by every
// connection the entity matches: a user quota bounds all the user's
// clients together, a default user quota bounds each user separately.
package quota

import (
	"net/netip"
	"sync"
	"time"

	"github.com/strata-dev/strata/broker/meta"
)

// Quota keys (Kafka's names).
const (
	ProducerByteRate = "producer_byte_rate"
	ConsumerByteRate = "consumer_byte_rate"
	// RequestPercentage (KIP-124) bounds the handler time of a client's
	// requests as a percentage of one thread over the quota window: 50
	// is half a thread, 200 two threads.
	RequestPercentage = "request_percentage"
)

// Kind is what a recorded amount counts against.
type Kind int

const (
	Produce Kind = iota // request bytes, producer_byte_rate
	Fetch               // response record bytes, consumer_byte_rate
	Request             // handler time, request_percentage (RecordTime)
)

func (k Kind) key() string {
	switch k {
	case Fetch:
		return ConsumerByteRate
	case Request:
		return RequestPercentage
	}
	return ProducerByteRate
}

// Config is the sampling of the rates (Kafka's quota.window.num and
// quota.window.size.seconds).
type Config struct {
	Samples int           // default 11
	Window  time.Duration // default 1s
	// Quotas returns the quotas in force by entity key (the cluster
	// metadata's ClientQuotas); nil or empty: nothing is throttled.
	Quotas func() map[string]meta.ClientQuota
	Now    func() time.Time
	// Throttled, if set, is told about each throttle (for metrics).
	Throttled func(kind Kind, d time.Duration)
}

// Manager records amounts and answers throttle times. Safe for concurrent
// use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	rates   map[rateKey]*rate
	buckets map[rateKey]*bucket // partition-mutation budgets (mutations.go)
	swept   time.Time
}

type rateKey struct {
	kind   Kind
	user   string // "" when the entity has no user part
	client string // "" when the entity has no client-id part
	hasU   bool
	hasC   bool
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Samples < 2 {
		cfg.Samples = 11
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, rates: map[rateKey]*rate{}, buckets: map[rateKey]*bucket{}}
}

// Record counts n against the quota of kind that applies to user (the
// principal's name, without "User:") and clientID, and returns how long
// the client must wait (0: not throttled).
func (m *Manager) Record(kind Kind, user, clientID string, n int) time.Duration {
	return m.record(kind, user, clientID, float64(n))
}

// RecordTime counts d of handler time against the request_percentage
// quota that applies to user and clientID (as Kafka: d in seconds × 100,
// so the rate per second is a percentage of one thread) and returns how
// long the client must wait (0: not throttled).
func (m *Manager) RecordTime(user, clientID string, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return m.record(Request, user, clientID, d.Seconds()*100)
}

func (m *Manager) record(kind Kind, user, clientID string, v float64) time.Duration {
	if m == nil || m.cfg.Quotas == nil {
		return 0
	}
	quotas := m.cfg.Quotas()
	if len(quotas) == 0 {
		return 0
	}
	bound, hasU, hasC, ok := Resolve(quotas, kind.key(), user, clientID)
	if !ok || bound <= 0 {
		return 0
	}
	k := rateKey{kind: kind, hasU: hasU, hasC: hasC}
	if hasU {
		k.user = user
	}
	if hasC {
		k.client = clientID
	}
	now := m.cfg.Now()
	m.mu.Lock()
	r := m.rates[k]
	if r == nil {
		r = newRate(m.cfg.Samples, m.cfg.Window, now)
		m.rates[k] = r
	}
	r.record(v, now)
	value, window := r.measure(now)
	m.sweepLocked(now)
	m.mu.Unlock()
	if value <= bound {
		return 0
	}
	d := time.Duration((value - bound) / bound * float64(window))
	if limit := time.Duration(m.cfg.Samples) * m.cfg.Window; d > limit {
		d = limit
	}
	if d > 0 && m.cfg.Throttled != nil {
		m.cfg.Throttled(kind, d)
	}
	return d
}

// sweepLocked drops the rates nobody recorded into for Samples windows
// (clients that left), at most once a window.
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.swept) < m.cfg.Window {
		return
	}
	m.swept = now
	idle := time.Duration(m.cfg.Samples) * m.cfg.Window
	for k, r := range m.rates {
		if now.Sub(r.last) > idle {
			delete(m.rates, k)
		}
	}
	for k, b := range m.buckets {
		if now.Sub(b.last) > idle && b.tokens >= 0 {
			delete(m.buckets, k)
		}
	}
}

// Resolve returns the quota key's bound for user and clientID and which
// parts of the matched entity name them (Kafka's resolution order, see
// the package comment); ok false when no entity sets it.
func Resolve(quotas map[string]meta.ClientQuota, key, user, clientID string) (bound float64, hasUser, hasClient, ok bool) {
	u, c := &user, &clientID
	var none *string
	for _, e := range []struct {
		u, c       *string
		hasU, hasC bool
	}{
		{u, c, true, true},
		{u, none, true, true},
		{u, none, true, false},
		{none, c, true, true},
		{none, none, true, true},
		{none, none, true, false},
		{none, c, false, true},
		{none, none, false, true},
	} {
		var ent meta.QuotaEntity
		if e.hasU {
			ent = append(ent, meta.QuotaEntityPart{Type: meta.QuotaEntityUser, Name: e.u})
		}
		if e.hasC {
			ent = append(ent, meta.QuotaEntityPart{Type: meta.QuotaEntityClientID, Name: e.c})
		}
		if q, found := quotas[ent.Key()]; found {
			if v, set := q.Values[key]; set {
				return v, e.hasU, e.hasC, true
			}
		}
	}
	return 0, false, false, false
}

// ConnectionCreationRate is KIP-612's per-IP quota: new connections per
// second from one client address, set on an ip entity (a named address
// or the default ip entity).
const ConnectionCreationRate = "connection_creation_rate"

// IPConnectionRate returns the connection_creation_rate that applies to
// ip (in the form CanonicalIPName gives): the address's own entity first,
// then the default ip entity; ok false when neither sets it.
func IPConnectionRate(quotas map[string]meta.ClientQuota, ip string) (rate float64, ok bool) {
	for _, name := range []*string{&ip, nil} {
		ent := meta.QuotaEntity{{Type: meta.QuotaEntityIP, Name: name}}
		if q, found := quotas[ent.Key()]; found {
			if v, set := q.Values[ConnectionCreationRate]; set {
				return v, true
			}
		}
	}
	return 0, false
}

// CanonicalIPName is the form an ip entity's name is stored in, the form
// the broker writes a client's address in: IPv4 (also IPv4-mapped IPv6)
// dotted, IPv6 in RFC 5952 form, no zone.
func CanonicalIPName(addr netip.Addr) string {
	return addr.Unmap().WithZone("").String()
}
