package cmd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/cost"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestDevFlagErrors: bad flag combinations fail before anything starts.
func TestDevFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replication", "raft"}, `--replication "raft": want wal or classic`},
		{[]string{"--replication", "classic", "--s3-put-latency", "1ms"}, "need --replication wal"},
		{[]string{"--replication", "classic", "--s3-dir", "/dev/shm/x"}, "--s3-dir needs --replication wal"},
		{[]string{"--zone-latency", "-1ms"}, "must not be negative"},
		{[]string{"--zones", ""}, "at least one zone"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := newDevCmd()
			cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0"}, tc.args...))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if def := newDevCmd().Flags().Lookup("replication").DefValue; def != "wal" {
		t.Errorf("default --replication %q, want wal", def)
	}
}

// TestDevZonesLookup: a known address answers at once; an unknown one
// waits until every broker has started, then is not a dev broker; a
// cancelled lookup gives up.
func TestDevZonesLookup(t *testing.T) {
	z := newDevZones()
	z.add("127.0.0.1:1", "a")
	if zone, ok := z.zone(context.Background(), "127.0.0.1:1"); !ok || zone != "a" {
		t.Fatalf("known address: %q %v", zone, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := z.zone(ctx, "127.0.0.1:2"); ok {
		t.Fatal("cancelled lookup of an unknown address succeeded")
	}
	got := make(chan string, 1)
	go func() {
		zone, _ := z.zone(context.Background(), "127.0.0.1:2")
		got <- zone
	}()
	z.add("127.0.0.1:2", "b") // registered while the lookup waits
	z.allStarted()
	if zone := <-got; zone != "b" {
		t.Fatalf("waiting lookup: %q, want b", zone)
	}
	if _, ok := z.zone(context.Background(), "127.0.0.1:3"); ok {
		t.Fatal("an address of no broker has a zone")
	}
}

// TestDevReplicaDialer: only connections to brokers of other zones are
// wrapped.
func TestDevReplicaDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	for _, tc := range []struct {
		leaderZone string
		wrapped    int64
	}{{"a", 0}, {"b", 1}} {
		z := newDevZones()
		z.add(addr, tc.leaderZone)
		z.allStarted()
		var st zoneStats
		c, err := z.replicaDialer("a", time.Millisecond, &st, logr.Discard())(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if st.Conns() != tc.wrapped {
			t.Errorf("follower in a, leader in %s: %d connections wrapped, want %d", tc.leaderZone, st.Conns(), tc.wrapped)
		}
	}
}

// TestDevStore: the first WAL object is announced with a ready-to-paste
// inspect command and survives its deletion (single and batched); other
// objects are deleted; a GET from another zone's bucket is counted and
// takes at least one zone round trip.
func TestDevStore(t *testing.T) {
	var out bytes.Buffer
	w := &devWAL{srv: &s3server.Server{Endpoint: "http://127.0.0.1:1234", Region: "us-east-1", AccessKey: "AK", SecretKey: "SK"},
		bucketsDir: "/data/s3/buckets", zones: []string{"a", "b"}, out: &out, exe: "strata",
		putLatency: time.Millisecond, getLatency: 3 * time.Millisecond}
	ctx := context.Background()
	var zs zoneStats
	const zoneLatency = 5 * time.Millisecond
	own := w.wrapper("a", zoneLatency, &zs)(objstore.NewMem("strata-wal-a"))
	other := w.wrapper("a", zoneLatency, &zs)(objstore.NewMem("strata-wal-b"))
	for _, k := range []string{"other/x", "wal/dev/a/0/1/00000000000000000000", "wal/dev/a/0/1/00000000000000000001", "wal/dev/a/0/1/00000000000000000002"} {
		if err := own.Put(ctx, k, []byte("obj")); err != nil {
			t.Fatal(err)
		}
	}
	want := "AWS_ACCESS_KEY_ID=AK AWS_SECRET_ACCESS_KEY=SK strata wal inspect --endpoint http://127.0.0.1:1234 --region us-east-1 s3://strata-wal-a/wal/dev/a/0/1/00000000000000000000"
	if !strings.Contains(out.String(), "\n  "+want+"\n") || strings.Count(out.String(), "wal inspect") != 1 {
		t.Errorf("output:\n%s\nwant one command line %q", out.String(), want)
	}
	if err := own.Delete(ctx, "wal/dev/a/0/1/00000000000000000000"); err != nil {
		t.Fatal(err)
	}
	if err := own.Delete(ctx, "wal/dev/a/0/1/00000000000000000001"); err != nil {
		t.Fatal(err)
	}
	if err := objstore.DeleteAll(ctx, own, []string{"wal/dev/a/0/1/00000000000000000000", "wal/dev/a/0/1/00000000000000000002"}); err != nil {
		t.Fatal(err)
	}
	left, err := own.List(ctx, "wal/")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Key != "wal/dev/a/0/1/00000000000000000000" {
		t.Errorf("objects left %v, want only the kept one", left)
	}
	if _, ok := own.(objstore.BatchDeleter); !ok {
		t.Error("the dev store hides batched deletion")
	}

	if err := other.Put(ctx, "wal/dev/b/1/1/00000000000000000000", []byte("remote")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if b, err := other.Get(ctx, "wal/dev/b/1/1/00000000000000000000", 0, -1); err != nil || string(b) != "remote" {
		t.Fatalf("get: %q %v", b, err)
	}
	// The zone round trip comes on top of the emulated store latency.
	if d := time.Since(start); d < w.getLatency+2*zoneLatency {
		t.Errorf("GET from another zone took %v, want at least the store's %v plus a round trip of %v", d, w.getLatency, 2*zoneLatency)
	}
	start = time.Now()
	if _, err := own.Get(ctx, "wal/dev/a/0/1/00000000000000000000", 0, -1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < w.getLatency {
		t.Errorf("GET from the own bucket took %v, want at least the emulated %v", d, w.getLatency)
	}
	if n := zs.objectGets.Load(); n != 1 {
		t.Errorf("%d cross-zone GETs counted, want 1 (the own bucket's GET is not)", n)
	}
}

// TestDevZoneLatencyClassic runs `strata dev --replication classic
// --zone-latency 2ms` in process, produces with acks=all and checks on the
// brokers' /metrics that the replica fetches went through the delayed
// connections. (The WAL mode is exercised end to end by
// test/integration TestStrataDev and internal/bench TestTwoModesOneRun.)
func TestDevZoneLatencyClassic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := newDevCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--replication", "classic", "--zone-latency", "2ms", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(runCtx)
		pw.Close()
		done <- err
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	ready := regexp.MustCompile(`^strata dev ready: bootstrap=(\S+) metrics=(\S+)$`)
	sc := bufio.NewScanner(pr)
	var bootstrap, metrics []string
	var sawLatency bool
	for sc.Scan() {
		if strings.Contains(sc.Text(), "inter-zone latency 2ms one-way") {
			sawLatency = true
		}
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			bootstrap, metrics = strings.Split(m[1], ","), strings.Split(m[2], ",")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if bootstrap == nil {
		t.Fatal("no ready line")
	}
	if !sawLatency {
		t.Error("dev did not announce the zone latency")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic("zl"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// acks=all with RF 3 over 3 zones: followers fetched through the
	// delayed connections before the records were acknowledged.
	var total, conns float64
	for _, u := range metrics {
		body := scrape(t, u)
		total += metricSum(body, "strata_dev_zone_latency_bytes_total")
		conns += metricSum(body, "strata_dev_zone_latency_connections_total")
		if v := metricSum(body, "strata_dev_zone_latency_seconds"); v != 0.002 {
			t.Errorf("%s: strata_dev_zone_latency_seconds %v, want 0.002", u, v)
		}
	}
	if total <= 0 || conns < 2 {
		t.Errorf("delayed bytes %v on %v connections, want > 0 on at least 2 (one per follower)", total, conns)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricSum adds the samples of a metric in a text exposition.
func metricSum(body, name string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestDevWALPolicy: dev's WAL replication runs wal.policy=latency (every
// append through an object, as the demo shows) unless the user gives a
// policy with --set or in the config file; the broker default, auto,
// would replicate a demo's few records inline.
func TestDevWALPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broker.properties")
	if err := os.WriteFile(file, []byte("wal.policy=cost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    brokerFlags
		want cost.Policy
	}{
		{"default", brokerFlags{}, cost.PolicyLatency},
		{"other settings", brokerFlags{set: []string{"log.flush.interval.ms=0"}}, cost.PolicyLatency},
		{"--set", brokerFlags{set: []string{" wal.policy = auto"}}, cost.PolicyAuto},
		{"config file", brokerFlags{configFile: file}, cost.PolicyCost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if err := f.devWALPolicy(); err != nil {
				t.Fatal(err)
			}
			kv := map[string]string{}
			if f.configFile != "" {
				kv, _ = server.ReadConfigFile(f.configFile)
			}
			for _, s := range f.set {
				k, v, _ := strings.Cut(s, "=")
				kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			cfg := server.DefaultConfig()
			if _, err := server.ApplySettings(&cfg, kv); err != nil {
				t.Fatal(err)
			}
			if cfg.Cluster.WAL.Policy != tc.want {
				t.Fatalf("wal.policy %q, want %q (settings %q)", cfg.Cluster.WAL.Policy, tc.want, f.set)
			}
		})
	}
}
