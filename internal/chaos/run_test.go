package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

func TestMain(m *testing.M) {
	brokertest.Main(m)
}

// TestChaosShort runs the real thing in short form: broker processes,
// producers, consumers and the seed's nemesis, then the checks; every run
// must come out ok. Seeds and durations as in `make test` (issue #10):
// seed 1 and 2 with WAL replication, seed 3 classic, 45 s each; then a
// 25 s run of seed 4 with zone-local producers (--zone-local-producers)
// and the faults that meet their path (a leader killed, the forwarder cut
// from it, its zone isolated, its bucket down, an object damaged), which
// must also show forwarded produce. -short skips it.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no chaos runs")
	}
	runs := []struct {
		seed        int64
		replication string
		zoneLocal   bool
		duration    time.Duration
		kinds       []string // nil: every kind of the mode
	}{
		{seed: 1, replication: "wal"},
		{seed: 3, replication: "classic"},
		{seed: 2, replication: "wal"},
		{seed: 4, replication: "wal", zoneLocal: true, duration: 25 * time.Second,
			kinds: []string{KindKill, KindPartition, KindZoneIsolation, KindBucketOutage, KindCorrupt}},
	}
	for _, r := range runs {
		name := fmt.Sprintf("%s-seed-%d", r.replication, r.seed)
		if r.zoneLocal {
			name += "-zone-local"
		}
		t.Run(name, func(t *testing.T) {
			// Not t.TempDir: a failed run's data and broker logs are kept.
			dir, err := os.MkdirTemp("", fmt.Sprintf("strata-chaos-test-%d-", r.seed))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("data and broker logs (broker-<id>.log) kept in %s", dir)
					return
				}
				os.RemoveAll(dir)
			})
			duration := r.duration
			if duration == 0 {
				duration = 45 * time.Second
			}
			o := Options{Seed: r.seed, Duration: duration, Replication: r.replication, ZoneLocalProducers: r.zoneLocal, Kinds: r.kinds,
				Binary: brokertest.Binary(t), Dir: dir, Log: testWriter{t}, Verbose: true, History: filepath.Join(dir, "history.jsonl")}
			// Both modes need the S3 server: the tiered workload's tier
			// bucket; WAL mode the zone buckets too.
			if _, err := s3server.Binary(); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("CI must run the chaos runs: %v", err)
				}
				t.Skipf("chaos run skipped: %v", err)
			}
			buckets := []string{TierBucket}
			if r.replication == "wal" {
				for _, z := range []string{"a", "b", "c"} {
					buckets = append(buckets, BucketPrefix+z)
				}
			}
			srv := s3server.Start(t, buckets...)
			o.S3 = &S3{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			res, err := Run(ctx, o)
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			out, _ := json.MarshalIndent(res, "", "  ")
			if !res.OK {
				t.Fatalf("seed %d (%s) failed its checks:\n%s", r.seed, r.replication, out)
			}
			if res.Acked == 0 || res.Consumed == 0 {
				t.Fatalf("nothing acknowledged or consumed:\n%s", out)
			}
			// The history, judged again offline, gives the same verdict.
			hf, err := os.Open(o.History)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			again, err := CheckHistory(hf)
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if again.OK != res.OK || again.Acked != res.Acked || again.Consumed != res.Consumed || again.Lost != res.Lost ||
				again.DivergentReplicas != res.DivergentReplicas || again.PhantomReads != res.PhantomReads ||
				!reflect.DeepEqual(again.Workloads, res.Workloads) || !reflect.DeepEqual(again.ZoneLocal, res.ZoneLocal) {
				t.Fatalf("the history judged offline differs: ok %v acked %d consumed %d; the run's:\n%s", again.OK, again.Acked, again.Consumed, out)
			}
			t.Logf("seed %d %s: acked %d, consumed %d, faults %v, not applied %v, overlapping %d, max brokers down %d, workloads %v",
				r.seed, r.replication, res.Acked, res.Consumed, res.Faults, res.FaultErrors, res.OverlappingFaults, res.MaxBrokersDown, res.Workloads)
			if z := res.ZoneLocal; z != nil {
				t.Logf("zone-local: %d objects with forwarded records (%d shared with WAL uploads), %d own objects put, %d read, %d failed requests; partitions forwarded %d, appended %d",
					z.ForwardedObjects, z.SharedObjects, z.ObjectsPut, z.ObjectsRead, z.ObjectRequestsFailed, z.ForwardedPartitions, z.AppendedPartitions)
			}
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
