package traffic

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Path is a data path.
type Path string

// The paths counted.
const (
	Produce                Path = "produce"
	Consume                Path = "consume"
	ReplicationInline      Path = "replication-inline"
	ReplicationWALMetadata Path = "replication-wal-metadata"
	ObjectPut              Path = "object-put"
	ObjectGet              Path = "object-get"
)

// Direction is in (received) or out (sent).
type Direction string

// Directions.
const (
	In  Direction = "in"
	Out Direction = "out"
)

// UnknownZone is the peer zone of a client that did not say its rack.
const UnknownZone = "unknown"

// OtherZone is the peer zone of a client whose rack is not a known zone
// (Counter.KnownZone): racks come from clients, and every distinct label
// value is a new Prometheus series.
const OtherZone = "other"

// Counter counts one broker's traffic.
type Counter struct {
	zone string
	vec  *prometheus.CounterVec

	// KnownZone, when set before the counter is used, tells the zones
	// that may be label values (the brokers' racks); other peer zones
	// are counted as OtherZone.
	KnownZone func(zone string) bool
	// OnCrossZone, when set before the counter is used, is called with
	// the bytes exchanged with a known other zone on every path, in
	// either direction. The cost meter prices the replication paths'
	// direction out (the receiving broker's in is its sender's out) and
	// the client paths both ways (a client is no broker: only this
	// broker sees its bytes).
	OnCrossZone func(path Path, dir Direction, n int)

	mu    sync.Mutex
	cache map[key]prometheus.Counter
}

type key struct {
	peer string
	path Path
	dir  Direction
}

// New returns a counter for a broker in zone ("" is reported as
// "unknown").
func New(zone string) *Counter {
	if zone == "" {
		zone = UnknownZone
	}
	return &Counter{zone: zone, cache: map[key]prometheus.Counter{}, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_traffic_bytes_total",
		Help: "Bytes sent (direction=out) and received (direction=in) by this broker, by its zone, the peer's zone and the data path.",
	}, []string{"local_zone", "peer_zone", "path", "direction"})}
}

// Zone is the local zone.
func (c *Counter) Zone() string { return c.zone }

// Collector registers the counter on a registry.
func (c *Counter) Collector() prometheus.Collector { return c.vec }

// Add counts n bytes.
func (c *Counter) Add(peerZone string, path Path, dir Direction, n int) {
	if c == nil || n <= 0 {
		return
	}
	if peerZone == "" {
		peerZone = UnknownZone
	}
	k := key{peerZone, path, dir}
	c.mu.Lock()
	ctr, ok := c.cache[k]
	if !ok && peerZone != UnknownZone && peerZone != c.zone && c.KnownZone != nil && !c.KnownZone(peerZone) {
		k.peer = OtherZone
		ctr, ok = c.cache[k]
	}
	if !ok {
		ctr = c.vec.WithLabelValues(c.zone, k.peer, string(path), string(dir))
		c.cache[k] = ctr
	}
	c.mu.Unlock()
	ctr.Add(float64(n))
	if c.OnCrossZone != nil && k.peer != c.zone && k.peer != UnknownZone && k.peer != OtherZone {
		c.OnCrossZone(path, dir, n)
	}
}

// Bytes returns the bytes counted so far for one series (0 if none).
func (c *Counter) Bytes(peerZone string, path Path, dir Direction) float64 {
	c.mu.Lock()
	ctr, ok := c.cache[key{peerZone, path, dir}]
	c.mu.Unlock()
	if !ok {
		return 0
	}
	var m dto.Metric
	if err := ctr.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// CrossZone returns the bytes of a path exchanged with other zones
// (unknown and other zones excluded), in the given direction.
func (c *Counter) CrossZone(path Path, dir Direction) float64 {
	c.mu.Lock()
	var keys []key
	for k := range c.cache {
		if k.path == path && k.dir == dir && k.peer != c.zone && k.peer != UnknownZone && k.peer != OtherZone {
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	total := 0.0
	for _, k := range keys {
		total += c.Bytes(k.peer, k.path, k.dir)
	}
	return total
}
