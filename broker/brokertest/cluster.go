package brokertest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/meta/metatest"
)

// Cluster is a replicated cluster for tests: a real embedded etcd and one
// broker per zone entry, broker IDs 1..n, each broker in its zone (rack).
type Cluster struct {
	// Etcd holds the etcd client endpoints.
	Etcd []string
	// Brokers are the in-process brokers (StartCluster), index i = ID i+1.
	Brokers []*Broker
	// Processes are the subprocess brokers (StartProcessCluster).
	Processes []*Process
}

// ClusterOptions are the settings every cluster broker gets: the etcd
// endpoints, its ID and zone, a 2 s session timeout (a killed broker is
// declared dead quickly) and groups that form at once; opts are appended
// (they override). StartCluster and StartProcessCluster use it; tests that
// start brokers one by one can too.
func ClusterOptions(etcd []string, id int, zone string, opts ...Option) []Option {
	return clusterOptions(etcd, id, zone, opts)
}

func clusterOptions(etcd []string, id int, zone string, opts []Option) []Option {
	base := []Option{
		WithSetting("metadata.etcd.endpoints", strings.Join(etcd, ",")),
		WithSetting("cluster.name", "test"),
		WithSetting("broker.id", strconv.Itoa(id)),
		WithSetting("broker.rack", zone),
		WithSetting("broker.session.timeout.ms", "2000"),
		WithSetting("group.initial.rebalance.delay.ms", "0"),
		WithSetting("group.min.session.timeout.ms", "100"),
	}
	return append(base, opts...)
}

// StartCluster starts etcd and one in-process broker per zone (IDs 1..n).
// Everything stops when the test ends.
func StartCluster(t testing.TB, zones []string, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{Etcd: metatest.Start(t).Endpoints()}
	for i, z := range zones {
		c.Brokers = append(c.Brokers, Start(t, clusterOptions(c.Etcd, i+1, z, opts)...))
	}
	return c
}

// StartProcessCluster starts etcd (in the test process) and one `strata
// broker` subprocess per zone (IDs 1..n).
func StartProcessCluster(t testing.TB, zones []string, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{Etcd: metatest.Start(t).Endpoints()}
	for i, z := range zones {
		c.Processes = append(c.Processes, StartProcess(t, clusterOptions(c.Etcd, i+1, z, opts)...))
	}
	return c
}

// Addrs returns the brokers' addresses (in-process or subprocess) as
// bootstrap servers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, b := range c.Brokers {
		if b.srv != nil {
			out = append(out, b.Addr())
		}
	}
	for _, p := range c.Processes {
		out = append(out, p.Addr())
	}
	return out
}
