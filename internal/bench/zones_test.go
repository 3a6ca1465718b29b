package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAssignZones(t *testing.T) {
	tests := []struct {
		n            int
		racks, zones []string
		want         []string
	}{
		{3, nil, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{4, nil, []string{"a", "b", "c"}, []string{"a", "b", "c", "a"}},
		{2, []string{"c"}, []string{"a", "b", "c"}, []string{"c", "c"}},
		{1, nil, nil, []string{""}},
		{0, nil, []string{"a"}, []string{}},
	}
	for _, tt := range tests {
		if got := AssignZones(tt.n, tt.racks, tt.zones); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("AssignZones(%d, %v, %v) = %v, want %v", tt.n, tt.racks, tt.zones, got, tt.want)
		}
	}
}

func TestClientZonesRemote(t *testing.T) {
	z := &ClientZones{brokerZone: map[string]string{"127.0.0.1:1": "a", "127.0.0.1:2": "b"}}
	for _, tt := range []struct {
		zone, addr string
		want       bool
	}{
		{"a", "127.0.0.1:1", false},
		{"a", "127.0.0.1:2", true},
		{"b", "127.0.0.1:1", true},
		{"a", "localhost:1", false}, // a seed by another name: not delayed
	} {
		if got := z.remote(tt.zone, tt.addr); got != tt.want {
			t.Errorf("client in %s to %s: remote %v, want %v", tt.zone, tt.addr, got, tt.want)
		}
	}
}

const zoneBefore = `# TYPE strata_dev_zone_latency_connections_total counter
strata_dev_zone_latency_connections_total 2
# TYPE strata_dev_zone_latency_bytes_total counter
strata_dev_zone_latency_bytes_total{direction="out"} 100
strata_dev_zone_latency_bytes_total{direction="in"} 1000
# TYPE strata_dev_zone_latency_object_gets_total counter
strata_dev_zone_latency_object_gets_total 5
`

const zoneAfter = `# TYPE strata_dev_zone_latency_connections_total counter
strata_dev_zone_latency_connections_total 2
# TYPE strata_dev_zone_latency_bytes_total counter
strata_dev_zone_latency_bytes_total{direction="out"} 600
strata_dev_zone_latency_bytes_total{direction="in"} 9000
# TYPE strata_dev_zone_latency_object_gets_total counter
strata_dev_zone_latency_object_gets_total 25
`

func TestZoneLatencyResult(t *testing.T) {
	before, after := mustParse(t, zoneBefore), mustParse(t, zoneAfter)
	cz := &ClientZones{Producers: []string{"a", "b"}, Consumers: []string{"c"}}
	z := zoneLatencyResult(time.Millisecond, cz, []Scrape{before, before}, []Scrape{after, after})
	if val(z.ReplicaBytesDelayed) != 2*8500.0 || val(z.CrossZoneObjectGets) != 40.0 || val(z.ReplicaConnections) != 4.0 {
		t.Errorf("replica bytes %v, GETs %v, connections %v; want 17000 (window), 40 (window), 4 (total)",
			val(z.ReplicaBytesDelayed), val(z.CrossZoneObjectGets), val(z.ReplicaConnections))
	}
	if z.OneWay != time.Millisecond || !reflect.DeepEqual(z.ProducerZones, []string{"a", "b"}) || !reflect.DeepEqual(z.ConsumerZones, []string{"c"}) {
		t.Errorf("result %+v", z)
	}
	// A broker that does not export the metrics (an older dev): n/a.
	bare := mustParse(t, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
	z = zoneLatencyResult(time.Millisecond, nil, []Scrape{before, bare}, []Scrape{after, bare})
	if z.ReplicaBytesDelayed != nil || z.ReplicaConnections != nil || z.CrossZoneObjectGets != nil {
		t.Errorf("figures %v %v %v with a broker lacking them, want n/a", val(z.ReplicaBytesDelayed), val(z.ReplicaConnections), val(z.CrossZoneObjectGets))
	}
}

func TestZoneLatencyNeedsEmbeddedClusters(t *testing.T) {
	_, err := Run(t.Context(), Config{Bootstrap: []string{"127.0.0.1:1"}, Load: DefaultLoadOptions(), Cluster: ClusterOptions{ZoneLatency: time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "needs embedded clusters") {
		t.Fatalf("err %v, want --zone-latency refused with --bootstrap", err)
	}
	_, err = Run(t.Context(), Config{Modes: []string{ModeClassic}, Starter: &DevStarter{}, Load: DefaultLoadOptions(), Cluster: ClusterOptions{ZoneLatency: -time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "zone latency -1ms") {
		t.Fatalf("err %v, want a negative zone latency refused", err)
	}
}
