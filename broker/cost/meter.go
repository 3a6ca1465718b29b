package cost

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Cost paths: the path label of strata_replication_cost_usd_total.
const (
	// CostWAL: the fast tier's requests (PUTs, GETs, their bytes beyond
	// the included ones) and the pointers sent to other zones.
	CostWAL = "wal"
	// CostInline: record bytes replicated to other zones over replica
	// fetches (all of classic replication; WAL's fallbacks and inline by
	// policy).
	CostInline = "inline"
	// CostClassicEquivalent: what classic replication of the same leader
	// appends would have cost (their cross-zone follower copies).
	CostClassicEquivalent = "classic_equivalent"
)

// Client paths: the path label of strata_client_cross_zone_bytes_total and
// strata_client_cost_usd_total.
const (
	// ClientProduce: Produce requests from, and their answers to, clients
	// of another zone.
	ClientProduce = "produce"
	// ClientConsume: Fetch requests from, and the records sent to,
	// consumers of another zone.
	ClientConsume = "consume"
)

// Meter counts a broker's replication work in bytes and dollars. Safe for
// concurrent use; register Collectors once.
type Meter struct {
	prices    Prices
	start     prometheus.Gauge
	produced  prometheus.Counter
	classic   prometheus.Counter
	crossZone *prometheus.CounterVec
	czInline  prometheus.Counter
	czWAL     prometheus.Counter
	usd       *prometheus.CounterVec
	usdWAL    prometheus.Counter
	usdInline prometheus.Counter
	usdClass  prometheus.Counter
	// Client traffic across zones (the rest of the transfer bill).
	clientCZ  *prometheus.CounterVec
	clientUSD *prometheus.CounterVec
}

// NewMeter returns a meter pricing with prices.
func NewMeter(prices Prices) *Meter {
	m := &Meter{
		prices: prices,
		start: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_replication_cost_start_time_seconds",
			Help: "Unix time the replication cost counters started (the operator turns them into rates with it).",
		}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_replication_produced_bytes_total",
			Help: "Record bytes this broker appended as leader (the input of replication).",
		}),
		classic: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_replication_classic_bytes_total",
			Help: "Bytes classic replication would have sent across zones for this broker's leader appends: each appended byte times its partition's follower replicas in other zones.",
		}),
		crossZone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_replication_cross_zone_bytes_total",
			Help: "Replication bytes this broker sent to brokers in other zones, by path (inline: record bytes and requests of replica fetches; wal: replica fetches carrying WAL pointers).",
		}, []string{"path"}),
		usd: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_replication_cost_usd_total",
			Help: "Estimated replication cost in US dollars from the price table (cost.price.*), by path: wal (object-store requests and pointers), inline (record bytes across zones), classic_equivalent (what classic replication would have cost).",
		}, []string{"path"}),
	}
	m.clientCZ = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_client_cross_zone_bytes_total",
		Help: "Bytes this broker exchanged (both directions) with clients of another zone, by path (produce, consume); a client's zone is its client.rack or strata_az=<zone> in its client ID, clients of unknown zone are not counted.",
	}, []string{"path"})
	m.clientUSD = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_client_cost_usd_total",
		Help: "Estimated cross-zone transfer cost in US dollars of this broker's client traffic (strata_client_cross_zone_bytes_total priced with cost.price.cross.zone.*), by path.",
	}, []string{"path"})
	// Both paths exported from the start (0 until a client of another
	// zone comes): a reader tells "none" from "not exported".
	m.clientCZ.WithLabelValues(ClientProduce)
	m.clientCZ.WithLabelValues(ClientConsume)
	m.clientUSD.WithLabelValues(ClientProduce)
	m.clientUSD.WithLabelValues(ClientConsume)
	m.start.SetToCurrentTime()
	m.czInline = m.crossZone.WithLabelValues(CostInline)
	m.czWAL = m.crossZone.WithLabelValues(CostWAL)
	m.usdWAL = m.usd.WithLabelValues(CostWAL)
	m.usdInline = m.usd.WithLabelValues(CostInline)
	m.usdClass = m.usd.WithLabelValues(CostClassicEquivalent)
	return m
}

// Prices returns the meter's price table.
func (m *Meter) Prices() Prices { return m.prices }

// Collectors returns the meter's metrics.
func (m *Meter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.produced, m.classic, m.crossZone, m.usd, m.start, m.clientCZ, m.clientUSD}
}

// Produced counts leader appends: n bytes, and classic bytes (n times the
// follower replicas in other zones).
func (m *Meter) Produced(n, classic int64) {
	if n > 0 {
		m.produced.Add(float64(n))
	}
	if classic > 0 {
		m.classic.Add(float64(classic))
		m.usdClass.Add(m.prices.CrossZone(classic))
	}
}

// CrossZone counts n replication bytes sent to a broker in another zone;
// wal: on a replica fetch that carried WAL pointers.
func (m *Meter) CrossZone(n int64, wal bool) {
	if n <= 0 {
		return
	}
	c := m.prices.CrossZone(n)
	if wal {
		m.czWAL.Add(float64(n))
		m.usdWAL.Add(c)
		return
	}
	m.czInline.Add(float64(n))
	m.usdInline.Add(c)
}

// Client counts n bytes exchanged with a client of another zone on path
// (ClientProduce or ClientConsume), in either direction: the transfer
// bill charges both.
func (m *Meter) Client(path string, n int64) {
	if n <= 0 {
		return
	}
	m.clientCZ.WithLabelValues(path).Add(float64(n))
	m.clientUSD.WithLabelValues(path).Add(m.prices.CrossZone(n))
}

// Put counts one PUT of n bytes, Get one GET of n bytes (failed calls are
// billed too).
func (m *Meter) Put(n int64) { m.usdWAL.Add(m.prices.Put(n)) }

// Get counts one GET returning n bytes.
func (m *Meter) Get(n int64) { m.usdWAL.Add(m.prices.Get(n)) }

// GetCrossZone prices the transfer of n bytes a GET read from a fast
// bucket in another zone (Prices.FastCrossZoneRead; 0 at AWS's prices).
func (m *Meter) GetCrossZone(n int64) { m.usdWAL.Add(m.prices.FastCrossZoneRead(n)) }
