package telemetry

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Manager answers GetTelemetrySubscriptions and PushTelemetry and keeps
// what clients pushed (see the package doc for the bounds). A nil
// *Manager behaves as the default config: nothing requested.
type Manager struct {
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	clients map[[16]byte]*client
	lru     list.List // of *client, most recently seen first
	series  int       // of all clients
	dropped uint64    // series refused by the caps
	pushes  map[int16]uint64
}

// client is what the broker keeps of one client instance.
type client struct {
	id             [16]byte
	idLabel        string // Kafka's base64 form of id
	clientID       string
	subscriptionID int32
	lastGet        time.Time
	lastPush       time.Time
	lastErr        int16
	terminating    bool
	seen           time.Time
	elem           *list.Element
	pushes         uint64
	series         map[seriesKey]*series
}

type seriesKey struct{ metric, attrs string }

type series struct {
	kind  pointKind
	value float64
	push  uint64 // the client's push that last set it
}

// New returns a Manager of cfg (zero fields take their defaults).
func New(cfg Config) *Manager {
	return &Manager{cfg: cfg.withDefaults(), now: time.Now, clients: map[[16]byte]*client{}, pushes: map[int16]uint64{}}
}

func (m *Manager) config() Config {
	if m == nil {
		return DefaultConfig()
	}
	return m.cfg
}

// wanted reports whether clients are asked for any metric: only then is
// anything remembered.
func (m *Manager) wanted() bool { return m != nil && len(m.cfg.RequestedMetrics) > 0 }

// expiry is how long an instance is kept after its last request: three
// push intervals, at least a minute (Kafka's instance cache expiry).
func (c Config) expiry() time.Duration { return max(3*c.PushInterval, time.Minute) }

// GetSubscriptions fills resp for req (GetTelemetrySubscriptions) from a
// client whose request header carried clientID.
func (m *Manager) GetSubscriptions(clientID string, req *kmsg.GetTelemetrySubscriptionsRequest, resp *kmsg.GetTelemetrySubscriptionsResponse) {
	cfg := m.config()
	id := req.ClientInstanceID
	if reserved(id) {
		id = newInstanceID()
	}
	resp.ClientInstanceID = id
	resp.SubscriptionID = subscriptionID(cfg, id)
	resp.AcceptedCompressionTypes = append([]int8(nil), AcceptedCompressionTypes...)
	resp.PushIntervalMillis = int32(cfg.PushInterval / time.Millisecond)
	resp.TelemetryMaxBytes = cfg.MaxBytes
	resp.DeltaTemporality = true
	resp.RequestedMetrics = append([]string{}, cfg.RequestedMetrics...)
	if !m.wanted() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.expire(now)
	c := m.client(id, clientID, now)
	// As Kafka: no second subscription request within a push interval of
	// the last request, unless the last push was refused for a stale
	// subscription or its compression (the client must ask again then).
	last := c.lastGet
	if c.lastPush.After(last) {
		last = c.lastPush
	}
	if !last.IsZero() && now.Sub(last) < cfg.PushInterval &&
		c.lastErr != kerr.UnknownSubscriptionID.Code && c.lastErr != kerr.UnsupportedCompressionType.Code {
		c.lastErr = kerr.ThrottlingQuotaExceeded.Code
		resp.ErrorCode = c.lastErr
		return
	}
	c.lastGet, c.lastErr = now, 0
}

// Push handles req (PushTelemetry) from a client whose request header
// carried clientID and returns the response's error code, with Kafka's
// checks in Kafka's order: a reserved instance ID or a push after the
// terminating one is INVALID_REQUEST, a subscription ID other than the
// instance's UNKNOWN_SUBSCRIPTION_ID, a push within a push interval of
// the last accepted one THROTTLING_QUOTA_EXCEEDED (unless it is the
// first after a subscription request or a terminating one), a
// compression type outside 0-4 UNSUPPORTED_COMPRESSION_TYPE, a payload
// over MaxBytes (or decompressing past DecompressionRatio times it)
// TELEMETRY_TOO_LARGE, and one that is not OTLP metrics INVALID_RECORD.
// With nothing requested every push is UNKNOWN_SUBSCRIPTION_ID: no
// subscription asks for metrics, and nothing is decoded.
func (m *Manager) Push(clientID string, req *kmsg.PushTelemetryRequest) int16 {
	code, c, push := m.admit(clientID, req)
	if code != 0 || len(req.Metrics) == 0 {
		m.count(code)
		return code
	}
	points, err := decodePayload(req.CompressionType, req.Metrics, int64(m.cfg.MaxBytes)*DecompressionRatio)
	switch {
	case errors.Is(err, ErrTooLarge):
		code = kerr.TelemetryTooLarge.Code
	case errors.Is(err, ErrUnsupportedCompression):
		code = kerr.UnsupportedCompressionType.Code
	case err != nil:
		code = kerr.InvalidRecord.Code
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.countLocked(code)
	if code != 0 {
		c.lastErr = code
		return code
	}
	if m.clients[c.id] == c { // not evicted or expired meanwhile
		m.record(c, push, points)
	}
	return 0
}

// admit runs the checks that come before decoding; push numbers the
// admitted push of c.
func (m *Manager) admit(clientID string, req *kmsg.PushTelemetryRequest) (code int16, c *client, push uint64) {
	if reserved(req.ClientInstanceID) {
		return kerr.InvalidRequest.Code, nil, 0
	}
	if !m.wanted() {
		return kerr.UnknownSubscriptionID.Code, nil, 0
	}
	cfg := m.cfg
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.expire(now)
	c = m.client(req.ClientInstanceID, clientID, now)
	fail := func(code int16) (int16, *client, uint64) {
		c.lastErr = code
		return code, c, 0
	}
	if c.terminating {
		return fail(kerr.InvalidRequest.Code)
	}
	if req.SubscriptionID != c.subscriptionID {
		return fail(kerr.UnknownSubscriptionID.Code)
	}
	// The first push after a subscription request may come early: the
	// client jitters its first push between half and one and a half
	// intervals.
	accept := c.lastPush.IsZero() || c.lastGet.After(c.lastPush) || now.Sub(c.lastPush) >= cfg.PushInterval
	if !accept && !req.Terminating {
		return fail(kerr.ThrottlingQuotaExceeded.Code)
	}
	if accept {
		c.lastPush = now
	}
	if req.Terminating {
		c.terminating = true
	}
	if req.CompressionType < codecNone || req.CompressionType > codecZstd {
		return fail(kerr.UnsupportedCompressionType.Code)
	}
	if len(req.Metrics) > int(cfg.MaxBytes) {
		return fail(kerr.TelemetryTooLarge.Code)
	}
	c.lastErr = 0
	c.pushes++
	return 0, c, c.pushes
}

func (m *Manager) count(code int16) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.countLocked(code)
	m.mu.Unlock()
}

func (m *Manager) countLocked(code int16) { m.pushes[code]++ }

// client returns the instance id, creating it (and evicting the least
// recently seen instance at MaxClients), and marks it seen.
func (m *Manager) client(id [16]byte, clientID string, now time.Time) *client {
	c, ok := m.clients[id]
	if !ok {
		if len(m.clients) >= m.cfg.MaxClients {
			m.remove(m.lru.Back().Value.(*client))
		}
		c = &client{id: id, idLabel: instanceIDString(id), subscriptionID: subscriptionID(m.cfg, id), series: map[seriesKey]*series{}}
		c.elem = m.lru.PushFront(c)
		m.clients[id] = c
	} else {
		m.lru.MoveToFront(c.elem)
	}
	c.seen = now
	c.clientID = label(clientID)
	return c
}

func (m *Manager) remove(c *client) {
	m.lru.Remove(c.elem)
	delete(m.clients, c.id)
	m.series -= len(c.series)
}

// expire forgets the instances not seen for Config.expiry.
func (m *Manager) expire(now time.Time) {
	for e := m.lru.Back(); e != nil; e = m.lru.Back() {
		c := e.Value.(*client)
		if now.Sub(c.seen) < m.cfg.expiry() {
			return
		}
		m.remove(c)
	}
}

// record stores the points of c's push number push: gauges take the
// pushed value and those the push left out are dropped (a client leaves
// out a gauge it has no value for, franz-go one that is zero: the old
// value would be a lie), delta sums add up, cumulative sums take the
// pushed value. New series beyond the caps are dropped and counted.
func (m *Manager) record(c *client, push uint64, points []point) {
	set := func(s *series, p point, existed bool) {
		if p.kind == kindDeltaSum && s.kind == kindDeltaSum && existed {
			s.value += p.value
		} else {
			s.value = p.value
		}
		s.kind, s.push = p.kind, push
	}
	// Known series first, then the gauges this push left out go, then
	// new series take what room the caps leave.
	var fresh []point
	for _, p := range points {
		if len(p.metric) > maxLabelBytes || len(p.attrs) > maxLabelBytes || p.metric == "" {
			m.dropped++
			continue
		}
		if s, ok := c.series[seriesKey{metric: p.metric, attrs: p.attrs}]; ok {
			set(s, p, true)
		} else {
			fresh = append(fresh, p)
		}
	}
	for key, s := range c.series {
		if s.kind == kindGauge && s.push != push {
			delete(c.series, key)
			m.series--
		}
	}
	for _, p := range fresh {
		key := seriesKey{metric: p.metric, attrs: p.attrs}
		s, ok := c.series[key]
		if !ok {
			if len(c.series) >= m.cfg.MaxSeriesPerClient || m.series >= m.cfg.MaxSeries {
				m.dropped++
				continue
			}
			s = &series{}
			c.series[key] = s
			m.series++
		}
		set(s, p, ok)
	}
}

// reserved reports whether id is one a client may not keep: Kafka's
// reserved UUIDs zero and one (the zero one asks for a new ID).
func reserved(id [16]byte) bool {
	var zero [16]byte
	one := zero
	one[15] = 1
	return id == zero || id == one
}

// newInstanceID returns a random (version 4) UUID that is not reserved
// and whose base64 form does not start with '-', as Kafka's
// Uuid.randomUuid.
func newInstanceID() [16]byte {
	for {
		var id [16]byte
		_, _ = rand.Read(id[:]) // never fails (crypto/rand)
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if !reserved(id) && !strings.HasPrefix(instanceIDString(id), "-") {
			return id
		}
	}
}

// instanceIDString is Kafka's string form of a Uuid: URL-safe base64
// without padding.
func instanceIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// subscriptionID identifies the subscription of instance id: a CRC-32C
// of the requested prefixes, the push interval and the instance ID, so it
// changes with the config and is the same on every broker that has it.
func subscriptionID(cfg Config, id [16]byte) int32 {
	h := crc32.New(castagnoli)
	for _, p := range cfg.RequestedMetrics {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(cfg.PushInterval/time.Millisecond)))
	h.Write(id[:])
	return int32(h.Sum32())
}

// label makes client input a bounded, valid label value.
func label(s string) string {
	if len(s) > maxLabelBytes {
		s = s[:maxLabelBytes]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
