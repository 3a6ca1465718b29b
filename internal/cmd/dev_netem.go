package cmd

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/internal/netem"
)

// devZones maps broker addresses to zones for the inter-zone latency of
// `strata dev --zone-latency`. A replica fetcher may dial a leader whose
// Start has not returned yet (it registers before); lookups of an unknown
// address wait until every broker has started.
type devZones struct {
	mu      sync.Mutex
	zones   map[string]string
	started chan struct{}
	once    sync.Once
}

func newDevZones() *devZones {
	return &devZones{zones: map[string]string{}, started: make(chan struct{})}
}

func (z *devZones) add(addr, zone string) {
	z.mu.Lock()
	z.zones[addr] = zone
	z.mu.Unlock()
}

// allStarted ends the waits of lookups (also on a failed start).
func (z *devZones) allStarted() { z.once.Do(func() { close(z.started) }) }

// zone returns addr's zone; ok is false for an address that is not a dev
// broker once all have started, or when ctx ends first.
func (z *devZones) zone(ctx context.Context, addr string) (string, bool) {
	for {
		z.mu.Lock()
		zone, ok := z.zones[addr]
		z.mu.Unlock()
		if ok {
			return zone, true
		}
		select {
		case <-z.started:
			z.mu.Lock()
			zone, ok = z.zones[addr]
			z.mu.Unlock()
			return zone, ok
		case <-ctx.Done():
			return "", false
		}
	}
}

// zoneStats is what one broker's inter-zone latency delayed.
type zoneStats struct {
	netem.Stats
	objectGets atomic.Int64 // GETs from other zones' buckets (delayed one round trip)
}

// replicaDialer is a broker's replica fetch dial: connections to leaders
// in other zones get the one-way latency on each direction.
func (z *devZones) replicaDialer(local string, latency time.Duration, st *zoneStats, log logr.Logger) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var warn sync.Once
	d := &netem.Dialer{Latency: latency, Stats: &st.Stats, Remote: func(ctx context.Context, addr string) (bool, error) {
		zone, ok := z.zone(ctx, addr)
		if !ok {
			warn.Do(func() { log.Info("replica fetch to an address of no dev broker: no zone latency", "addr", addr) })
			return false, nil
		}
		return zone != local, nil
	}}
	return d.DialContext
}

// registerZoneMetrics exports a broker's zone latency figures on its
// /metrics (strata bench reads them).
func registerZoneMetrics(reg prometheus.Registerer, latency time.Duration, st *zoneStats) error {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_dev_zone_latency_seconds",
			Help: "strata dev --zone-latency: one-way delay on each direction of inter-zone replica connections"},
			func() float64 { return latency.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_dev_zone_latency_connections_total",
			Help: "replica fetch connections to brokers of other zones opened with the injected latency"},
			func() float64 { return float64(st.Conns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_dev_zone_latency_bytes_total",
			Help: "bytes delayed by the injected inter-zone latency on replica fetch connections", ConstLabels: prometheus.Labels{"direction": "out"}},
			func() float64 { return float64(st.BytesOut()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_dev_zone_latency_bytes_total",
			Help: "bytes delayed by the injected inter-zone latency on replica fetch connections", ConstLabels: prometheus.Labels{"direction": "in"}},
			func() float64 { return float64(st.BytesIn()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_dev_zone_latency_object_gets_total",
			Help: "GETs from other zones' WAL buckets delayed by one inter-zone round trip"},
			func() float64 { return float64(st.objectGets.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
