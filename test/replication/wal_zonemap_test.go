package replication

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/broker/traffic"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestWALZoneMap: zone a's bucket is on one Versity Gateway, zone b's and
// c's on another with other keys, as with one S3-compatible server per
// zone. Brokers a and b know every zone's bucket (wal.zone.*, keys from
// STRATA_WAL_ZONE_<ZONE>_*): they download each leader's objects from the
// right endpoint with the right keys, so nothing replicates inline. No
// broker has wal.bucket.*: its own bucket is its zone's entry. Broker
// c's map lacks zone a: the bucket of a's leader is unknown to it, so it
// replicates that partition inline, and loses nothing.
func TestWALZoneMap(t *testing.T) {
	s1 := s3server.Start(t, "alpha-wal")
	s2 := s3server.Start(t, "beta-wal", "gamma-wal")
	srv := map[string]*s3server.Server{"a": s1, "b": s2, "c": s2}
	bucket := map[string]string{"a": "alpha-wal", "b": "beta-wal", "c": "gamma-wal"}
	zoneMap := map[string]string{}
	for _, z := range zones {
		s, p, env := srv[z], "wal.zone."+z+".bucket.", "STRATA_WAL_ZONE_"+strings.ToUpper(z)
		maps.Copy(zoneMap, map[string]string{p + "name": bucket[z], p + "region": s.Region, p + "endpoint": s.Endpoint,
			p + "force.path.style": "true", p + "credentials.env": env})
		t.Setenv(env+"_ACCESS_KEY_ID", s.AccessKey)
		t.Setenv(env+"_SECRET_ACCESS_KEY", s.SecretKey)
	}
	c := &brokertest.Cluster{Etcd: metatest.Start(t).Endpoints()}
	for i, z := range zones {
		opts := []brokertest.Option{
			brokertest.WithSetting("replica.lag.time.max.ms", "10000"),
			brokertest.WithSetting("wal.enable", "true"),
			brokertest.WithConfig(func(cfg *server.Config) { cfg.Cluster.WAL.Bucket.MaxAttempts = 1 }),
		}
		for k, v := range zoneMap {
			if z == "c" && strings.HasPrefix(k, "wal.zone.a.") {
				continue // broker c does not know zone a's bucket
			}
			opts = append(opts, brokertest.WithSetting(k, v))
		}
		c.Brokers = append(c.Brokers, brokertest.Start(t, brokertest.ClusterOptions(c.Etcd, i+1, z, opts...)...))
	}

	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two := "2"
	const topic, partitions = "zonemap", 3
	createTopic(t, adm, topic, partitions, map[string]*string{"min.insync.replicas": &two})
	leaders := map[string]bool{}
	waitFor(t, "full ISRs", 30*time.Second, func() bool {
		for p := range int32(partitions) {
			if len(state(t, c, topic, p).ISR) != 3 {
				return false
			}
		}
		return true
	})
	for p := range int32(partitions) {
		leaders[zones[state(t, c, topic, p).Leader-1]] = true
	}
	cl := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	acked := produceAll(t, cl, topic, "zonemap", 600)
	checkReplicas(t, c, topic, partitions, []map[int32]map[int64]string{acked})

	for _, z := range []string{"a", "b"} {
		if !leaders[z] {
			t.Fatalf("no partition led in zone %s (leaders %v)", z, leaders)
		}
	}
	// The traffic counters and metrics are updated after the records are
	// appended (and a leader's after its answer is written): what they
	// must show is polled for, and the last findings reported.
	var findings []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		findings = zoneMapFindings(t, c, leaders, bucket)
		if len(findings) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// zoneMapFindings is what TestWALZoneMap finds wrong in the brokers'
// traffic counters and WAL metrics (nothing: empty).
func zoneMapFindings(t *testing.T, c *brokertest.Cluster, leaders map[string]bool, bucket map[string]string) []string {
	t.Helper()
	var out []string
	// Brokers a and b: every record from the other one's leader came
	// through its bucket on the other gateway. (Their inline bytes in
	// from zone c are not checked: leader a counts c's inline fetch
	// requests there.)
	for i, z := range zones[:2] {
		tr := c.Brokers[i].Server().Traffic()
		other := zones[1-i]
		if inline := tr.Bytes(other, traffic.ReplicationInline, traffic.In); inline != 0 {
			out = append(out, fmt.Sprintf("broker %s: %v bytes from zone %s's leader replicated inline; its zone map has that bucket", z, inline, other))
		}
		for leader := range leaders {
			if leader != z && tr.Bytes(leader, traffic.ObjectGet, traffic.In) == 0 {
				out = append(out, fmt.Sprintf("broker %s downloaded nothing from zone %s's bucket (%s)", z, leader, bucket[leader]))
			}
		}
	}
	// The WAL metrics are exported: leader a served c inline.
	mfs, err := c.Brokers[0].Server().Metrics().Registry.Gather()
	if err != nil {
		return append(out, err.Error())
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			found[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if _, ok := found["strata_wal_degraded"]; !ok {
		out = append(out, "broker a exports no strata_wal_degraded")
	}
	if found["strata_wal_inline_bytes_total"] == 0 {
		out = append(out, "broker a's strata_wal_inline_bytes_total is missing or 0 although it served broker c inline")
	}

	trc := c.Brokers[2].Server().Traffic()
	if trc.Bytes("a", traffic.ReplicationInline, traffic.In) == 0 {
		out = append(out, "broker c replicated zone a's leader through WAL although its zone map lacks zone a's bucket")
	}
	if trc.Bytes("a", traffic.ObjectGet, traffic.In) != 0 || trc.Bytes("", traffic.ObjectGet, traffic.In) != 0 {
		out = append(out, "broker c downloaded from a bucket outside its zone map")
	}
	if leaders["b"] && trc.Bytes("b", traffic.ObjectGet, traffic.In) == 0 {
		out = append(out, "broker c downloaded nothing from zone b's bucket")
	}
	return out
}
