package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/freeport"
)

// Burrow, LinkedIn's consumer lag monitor, as Debian packages it (1.2.1),
// reads committed offsets from __consumer_offsets in Kafka's record format
// and the partitions' end offsets with ListOffsets, and needs a ZooKeeper
// ensemble for itself (Debian's zookeeper package, run standalone on a
// loopback port).

func burrowPath(t *testing.T) string { return binary(t, "STRATA_BURROW", "/usr/bin/Burrow") }

func zookeeperJar(t *testing.T) string {
	t.Helper()
	jar := os.Getenv("STRATA_ZOOKEEPER_JAR")
	if jar == "" {
		jar = "/usr/share/java/zookeeper.jar"
	}
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("%s not found (set STRATA_ZOOKEEPER_JAR): run `make test` (or `make test-deps`) to install Debian's zookeeper", jar)
	}
	return jar
}

// freePort is a loopback port for a daemon to bind, below the kernel's
// ephemeral range (freeport).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startDaemon runs a process until the test ends, its output in a file
// the failure message shows.
func startDaemon(t *testing.T, dir, name string, cmd *exec.Cmd) {
	t.Helper()
	logPath := filepath.Join(dir, name+".out")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("%s output (tail):\n%s", name, out)
		}
	})
}

func waitListening(t *testing.T, addr, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %v", what, addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitZooKeeper waits until ZooKeeper serves requests: it accepts
// connections before, and closes the sessions Burrow opens then.
func waitZooKeeper(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Write([]byte("srvr"))
			out, _ := io.ReadAll(c)
			c.Close()
			if last = string(out); strings.Contains(last, "Mode:") {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("zookeeper on %s does not serve: %s", addr, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// burrowLag is the part of Burrow's /v3/kafka/<cluster>/consumer/<group>/lag
// answer the test reads.
type burrowLag struct {
	Error   bool   `json:"error"`
	Message string `json:"message"`
	Status  struct {
		TotalLag   uint64 `json:"totallag"`
		Partitions []struct {
			Topic      string `json:"topic"`
			Partition  int32  `json:"partition"`
			CurrentLag uint64 `json:"current_lag"`
		} `json:"partitions"`
	} `json:"status"`
}

// TestBurrowLag: Burrow, started on a fresh three-broker Strata cluster
// before any group exists (its Metadata request creates
// __consumer_offsets), reports
// the lag of a group that commits offsets short of the end within 10 % of
// the true lag, and follows the group as it commits further.
func TestBurrowLag(t *testing.T) {
	burrow := burrowPath(t)
	jar := zookeeperJar(t)
	java := binary(t, "STRATA_JAVA", "java")
	dir := t.TempDir()

	zkPort := freePort(t)
	zkCfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n", filepath.Join(dir, "zk"), zkPort)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(zkCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, dir, "zookeeper", exec.Command(java, "-Xmx256m", "-cp", "/etc/zookeeper/conf:"+jar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg")))

	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	addrs := c.Addrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("orders"), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopics(ctx, 3, 3, nil, "orders"); err != nil || resp["orders"].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp["orders"].Err)
	}
	const perPartition = 1000
	var recs []*kgo.Record
	for p := range int32(3) {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl2.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl2.Close()

	// Burrow starts before any group exists, as on a fresh cluster: its
	// Metadata request for __consumer_offsets creates the topic, as
	// Kafka creates its internal topics on request.
	httpPort := freePort(t)
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = strconv.Quote(a)
	}
	servers := "[" + strings.Join(quoted, ",") + "]"
	cfg := fmt.Sprintf(`[general]
pidfile="burrow.pid"
access-control-allow-origin="*"

[logging]
level="info"

[zookeeper]
servers=["127.0.0.1:%d"]
timeout=6
root-path="/burrow"

[client-profile.strata]
client-id="burrow"
kafka-version="2.0.0"

[cluster.local]
class-name="kafka"
servers=%s
client-profile="strata"
topic-refresh=2
offset-refresh=1

[consumer.local]
class-name="kafka"
cluster="local"
servers=%s
client-profile="strata"
offsets-topic="__consumer_offsets"

[httpserver.default]
address="127.0.0.1:%d"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
`, zkPort, servers, servers, httpPort)
	if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	waitZooKeeper(t, fmt.Sprintf("127.0.0.1:%d", zkPort))
	startDaemon(t, dir, "burrow", exec.Command(burrow, "-config-dir", dir))
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", httpPort), "Burrow's HTTP server")

	// The group commits its position every 500 ms, as a consumer's
	// auto-commit does; the test moves the position.
	var mu sync.Mutex
	position := map[int32]int64{0: 400, 1: 500, 2: 600}
	commitCtx, stopCommits := context.WithCancel(ctx)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for commitCtx.Err() == nil {
			mu.Lock()
			os := kadm.Offsets{}
			for p, o := range position {
				os.Add(kadm.Offset{Topic: "orders", Partition: p, At: o, LeaderEpoch: -1})
			}
			mu.Unlock()
			if resp, err := adm.CommitOffsets(commitCtx, "billing", os); err == nil {
				if err := resp.Error(); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
			}
			select {
			case <-commitCtx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() { stopCommits(); <-committed }()

	lagURL := fmt.Sprintf("http://127.0.0.1:%d/v3/kafka/local/consumer/billing/lag", httpPort)
	waitLag := func(what string, trueLag uint64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		var last string
		for {
			var lag burrowLag
			resp, err := http.Get(lagURL)
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&lag)
				resp.Body.Close()
			}
			switch {
			case err != nil:
				last = err.Error()
			case lag.Error:
				last = lag.Message
			default:
				last = fmt.Sprintf("total lag %d, partitions %+v", lag.Status.TotalLag, lag.Status.Partitions)
				diff := float64(lag.Status.TotalLag) - float64(trueLag)
				if len(lag.Status.Partitions) == 3 && diff <= 0.1*float64(trueLag) && -diff <= 0.1*float64(trueLag) {
					t.Logf("%s: Burrow reports %s; true lag %d", what, last, trueLag)
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Burrow reports %s; true lag %d", what, last, trueLag)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitLag("lagging group", 3*perPartition-400-500-600)

	mu.Lock()
	position = map[int32]int64{0: 950, 1: 900, 2: 1000}
	mu.Unlock()
	waitLag("group caught up further", 3*perPartition-950-900-1000)
}
