package bench

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/internal/netem"
)

// ClientZones places the load's clients in the brokers' zones and delays
// their connections to brokers of other zones.
type ClientZones struct {
	// Latency is the one-way delay on each direction of a cross-zone
	// client connection.
	Latency time.Duration
	// Zones are the brokers' racks, sorted.
	Zones []string
	// Producers[i] and Consumers[j] are the clients' zones.
	Producers, Consumers []string
	// brokerZone maps a broker's host:port to its rack.
	brokerZone map[string]string
	stats      netem.Stats
}

// Conns is the number of client connections opened across zones.
func (z *ClientZones) Conns() int64 { return z.stats.Conns() }

// Bytes is the number of client bytes delayed, both directions.
func (z *ClientZones) Bytes() int64 { return z.stats.BytesOut() + z.stats.BytesIn() }

// AssignZones gives n clients a zone each: racks[i mod len(racks)] when
// racks are given (the consumers' client.rack), else zones[i mod
// len(zones)].
func AssignZones(n int, racks, zones []string) []string {
	from := racks
	if len(from) == 0 {
		from = zones
	}
	if len(from) == 0 {
		return make([]string, n)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = from[i%len(from)]
	}
	return out
}

// newClientZones reads the brokers' racks and assigns the clients' zones.
func newClientZones(ctx context.Context, adm *kadm.Client, opts LoadOptions) (*ClientZones, error) {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list brokers for the zone latency: %w", err)
	}
	z := &ClientZones{Latency: opts.ZoneLatency, brokerZone: map[string]string{}}
	seen := map[string]bool{}
	for _, b := range brokers {
		if b.Rack == nil || *b.Rack == "" {
			return nil, fmt.Errorf("zone latency: broker %d has no rack, so no client can be placed in a zone", b.NodeID)
		}
		z.brokerZone[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = *b.Rack
		if !seen[*b.Rack] {
			seen[*b.Rack] = true
			z.Zones = append(z.Zones, *b.Rack)
		}
	}
	sort.Strings(z.Zones)
	z.Producers = AssignZones(opts.Producers, opts.ClientRacks, z.Zones)
	z.Consumers = AssignZones(min(opts.Consumers, int(opts.Partitions)), opts.ClientRacks, z.Zones)
	return z, nil
}

// remote reports whether a client in zone dialing addr crosses zones; an
// address that is no known broker (a seed given by another name) is not
// delayed.
func (z *ClientZones) remote(zone, addr string) bool {
	bz, ok := z.brokerZone[addr]
	return ok && bz != zone
}

// dialer is the kgo option of a client in zone.
func (z *ClientZones) dialer(zone string) kgo.Opt {
	return kgo.Dialer(z.dial(zone))
}

// dial is the dial function of a client in zone.
func (z *ClientZones) dial(zone string) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &netem.Dialer{Latency: z.Latency, Stats: &z.stats, Remote: func(_ context.Context, addr string) (bool, error) {
		return z.remote(zone, addr), nil
	}}
	return d.DialContext
}
