package replication

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-dev/strata/broker/brokertest"
)

// Zone-local produce with librdkafka clients (issue #30): kcat and
// confluent-kafka-python produce and consume through the zone-b broker
// with nothing changed but their client.id. The franz-go producers are in
// zonelocal_test.go; these tests reuse its cluster, counters and
// read-back.

// clientTool returns the path of a client tool from env (or def), and
// skips the test when it is not installed: these tests are about the
// broker's zone-local path, the clients' own suite (test/compat) fails
// on a missing tool.
func clientTool(t *testing.T, env, def string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = def
	}
	path, err := exec.LookPath(p)
	if err != nil {
		t.Skipf("%s not found (set %s; `make test-deps` installs it): %v", p, env, err)
	}
	return path
}

// confluentPython returns Debian's python3 with confluent_kafka
// importable, skipping the test when either is missing.
func confluentPython(t *testing.T) string {
	t.Helper()
	py := clientTool(t, "STRATA_PYTHON", "/usr/bin/python3")
	out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No module named") {
			t.Skipf("%s cannot import confluent_kafka (`make test-deps` installs python3-confluent-kafka): %s", py, out)
		}
		t.Fatalf("%s -c 'import confluent_kafka': %v\n%s", py, err, out)
	}
	return py
}

// runClient runs a client tool to its end and returns its stdout and
// stderr; it fails the test when the tool fails.
func runClient(t *testing.T, stdin []byte, path string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", path, strings.Join(args, " "), err, tail(out.String()), tail(errOut.String()))
	}
	return out.String(), errOut.String()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// clientRecord is a record as a client printed it.
type clientRecord struct {
	partition int32
	offset    int64
	key       string
}

// parseRecords reads the "<partition> <offset> <key>" lines of out.
func parseRecords(out string) []clientRecord {
	var recs []clientRecord
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		recs = append(recs, clientRecord{int32(p), o, f[2]})
	}
	return recs
}

// deliveredOffsets checks a producer's delivery reports for the records
// keyed "<prefix>-<p>-<i>": n per partition, each once, each on the
// partition its key names, offsets increasing with i. It returns the
// offsets by partition in i order (checkRecords' form).
//
// implicit allows reports without an offset: librdkafka acknowledges a
// batch implicitly, without its offset, when its request failed in a way
// that may have persisted it (a timeout) and a later batch of the same
// idempotent producer was acknowledged, which proves it was. Such a
// record keeps offset -1 here, and checkRecords then checks it is in the
// log once and in order, at whatever offset.
func deliveredOffsets(t *testing.T, recs []clientRecord, prefix string, n int, implicit bool) map[int32][]int64 {
	t.Helper()
	const noReport = -2 // (a report without an offset says -1)
	offsets := map[int32][]int64{}
	for p := range int32(zlPartitions) {
		offsets[p] = make([]int64, n)
		for i := range offsets[p] {
			offsets[p][i] = noReport
		}
	}
	for _, r := range recs {
		var p int32
		var i int
		if !strings.HasPrefix(r.key, prefix+"-") {
			continue
		}
		if _, err := fmt.Sscanf(strings.TrimPrefix(r.key, prefix+"-"), "%d-%d", &p, &i); err != nil || p < 0 || p >= zlPartitions || i < 0 || i >= n {
			t.Fatalf("delivery report for an unexpected key %q", r.key)
		}
		if r.partition != p {
			t.Fatalf("%s delivered to partition %d", r.key, r.partition)
		}
		if offsets[p][i] != noReport {
			t.Fatalf("%s delivered twice, at %d and %d", r.key, offsets[p][i], r.offset)
		}
		if r.offset < 0 && !implicit {
			t.Fatalf("%s delivered without an offset (acknowledged implicitly after an error)", r.key)
		}
		if r.offset < 0 {
			t.Logf("%s acknowledged implicitly (without its offset)", r.key)
			r.offset = -1
		}
		offsets[p][i] = r.offset
	}
	for p := range int32(zlPartitions) {
		for i, o := range offsets[p] {
			if o == noReport {
				t.Fatalf("%s-%d-%d: no delivery report", prefix, p, i)
			}
			if i > 0 && o >= 0 && offsets[p][i-1] >= 0 && o <= offsets[p][i-1] {
				t.Fatalf("%s-%d-%d delivered at %d, not after %s-%d-%d (%d)", prefix, p, i, o, prefix, p, i-1, offsets[p][i-1])
			}
		}
	}
	return offsets
}

// checkConsumed checks what a client consumer read: every record of
// offsets (keys "<prefix>-<p>-<i>") once, at its delivered offset, each
// partition in offset order, and no record keyed with a prefix of
// absent.
func checkConsumed(t *testing.T, who string, recs []clientRecord, prefix string, offsets map[int32][]int64, absent ...string) {
	t.Helper()
	seen := map[string]int64{}
	last := map[int32]int64{}
	for _, r := range recs {
		for _, a := range absent {
			if strings.HasPrefix(r.key, a+"-") {
				t.Fatalf("%s read %s (partition %d offset %d)", who, r.key, r.partition, r.offset)
			}
		}
		if l, ok := last[r.partition]; ok && r.offset <= l {
			t.Fatalf("%s read partition %d offset %d after offset %d", who, r.partition, r.offset, l)
		}
		last[r.partition] = r.offset
		if !strings.HasPrefix(r.key, prefix+"-") {
			continue
		}
		if o, dup := seen[r.key]; dup {
			t.Fatalf("%s read %s twice, at %d and %d", who, r.key, o, r.offset)
		}
		seen[r.key] = r.offset
	}
	for p, offs := range offsets {
		for i, want := range offs {
			key := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			got, ok := seen[key]
			if !ok {
				t.Fatalf("%s did not read %s (delivered at %d)", who, key, want)
			}
			if want >= 0 && got != want { // -1: acknowledged implicitly
				t.Fatalf("%s read %s at %d, delivered at %d", who, key, got, want)
			}
		}
	}
}

// checkConsumedFromB checks that a zone-b consumer's bytes since before
// came from broker 2: consumed through its zone's replica, not the
// leaders.
func checkConsumedFromB(t *testing.T, c *brokertest.Cluster, before []float64, payload float64) {
	t.Helper()
	var out []float64
	waitUntil(time.Now().Add(5*time.Second), func() bool {
		out = zoneConsumeOut(c, "b")
		return out[1]-before[1] >= payload
	})
	t.Logf("consume bytes to zone b by broker: %.0f %.0f %.0f (payload %.0f)", out[0]-before[0], out[1]-before[1], out[2]-before[2], payload)
	if got := out[1] - before[1]; got < payload {
		t.Fatalf("broker 2 sent zone b %.0f consume bytes, less than the payload %.0f", got, payload)
	}
	for _, i := range []int{0, 2} {
		if got := out[i] - before[i]; got > payload/10 {
			t.Fatalf("broker %d sent zone b %.0f consume bytes: records crossed zones", i+1, got)
		}
	}
}

// zlTopic creates a topic of zlPartitions partitions, some of them led
// outside broker 2.
func zlTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	createTopic(t, adm, topic, zlPartitions, nil)
	if ledElsewhere(t, adm, topic, 2) == 0 {
		t.Fatal("every partition is led by broker 2: nothing to forward")
	}
}

var (
	kcatLeader    = regexp.MustCompile(`partition (\d+), leader (-?\d+),`)
	kcatDelivered = regexp.MustCompile(`Message delivered to partition (\d+) \(offset (-?\d+)\) on broker (-?\d+)`)
)

// TestZoneLocalKcat: kcat (librdkafka) with -X client.id=strata_az=b
// sees broker 2 as every partition's leader, produces (its defaults:
// acks=all, not idempotent) through broker 2 to leaders in other zones
// and consumes everything back from broker 2: every record once, at the
// offset its delivery report gave, in order.
func TestZoneLocalKcat(t *testing.T) {
	kcat := clientTool(t, "STRATA_KCAT", "/usr/bin/kcat")
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"))
	addrs := wc.Addrs()
	bootstrap := strings.Join(addrs, ",")
	const topic, n = "zl-kcat", 20
	zlTopic(t, kadm.NewClient(newClient(t, addrs)), topic)
	const clientID = "client.id=strata_az=b"

	// Metadata as kcat sees it: broker 2 leads every partition.
	waitFor(t, "kcat -L showing broker 2 as every leader", 20*time.Second, func() bool {
		out, _ := runClient(t, nil, kcat, "-b", bootstrap, "-L", "-t", topic, "-X", clientID)
		m := kcatLeader.FindAllStringSubmatch(out, -1)
		for _, l := range m {
			if l[2] != "2" {
				return false
			}
		}
		return len(m) == zlPartitions
	})

	before := zoneLocalSnapshot(wc.Cluster)
	// One kcat per partition (-p): its delivery reports (-vv, on
	// stderr) come in produce order, the i-th is record i's.
	var delivered []clientRecord
	for p := range zlPartitions {
		var in bytes.Buffer
		for i := range n {
			value := make([]byte, 500)
			_, _ = rand.Read(value)
			fmt.Fprintf(&in, "kcat-%d-%d:%s\n", p, i, hex.EncodeToString(value)) // 1000 bytes
		}
		_, stderr := runClient(t, in.Bytes(), kcat, "-b", bootstrap, "-P", "-t", topic, "-p", strconv.Itoa(p), "-K", ":", "-vv", "-X", clientID)
		i := 0
		for _, m := range kcatDelivered.FindAllStringSubmatch(stderr, -1) {
			part, _ := strconv.ParseInt(m[1], 10, 32)
			off, _ := strconv.ParseInt(m[2], 10, 64)
			if m[3] != "2" {
				t.Fatalf("kcat-%d-%d delivered by broker %s, not broker 2 (zone b)", p, i, m[3])
			}
			delivered = append(delivered, clientRecord{int32(part), off, fmt.Sprintf("kcat-%d-%d", p, i)})
			i++
		}
		if i != n {
			t.Fatalf("partition %d: %d delivery reports from kcat, want %d:\n%s", p, i, n, tail(stderr))
		}
	}
	offsets := deliveredOffsets(t, delivered, "kcat", n, false)
	checkForwardedFromB(t, wc.Cluster, before, float64(n*zlPartitions*1000))

	consBefore := zoneConsumeOut(wc.Cluster, "b")
	// -c: until every record is read; broker 2 serves the fetches as a
	// follower and may be a moment behind (-e could end early).
	out, _ := runClient(t, nil, kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-c", strconv.Itoa(n*zlPartitions),
		"-f", `%p %o %k\n`, "-X", clientID)
	checkConsumed(t, "kcat", parseRecords(out), "kcat", offsets)
	checkConsumedFromB(t, wc.Cluster, consBefore, float64(n*zlPartitions*1000))
	checkRecords(t, addrs, topic, "kcat", n, offsets)
}

// TestZoneLocalConfluentKafkaPython: confluent-kafka-python (librdkafka)
// with client.id "orders-svc,strata_az=b" produces through broker 2 as a
// plain (acks=1), an idempotent (also with many small requests in flight:
// the forwarder must keep their order) and a transactional producer
// (committed, aborted, committed), and reads back with a zone-b group consumer
// (read_committed for the transactions): every record once, at the offset
// delivered, in order; no aborted record.
func TestZoneLocalConfluentKafkaPython(t *testing.T) {
	py := confluentPython(t)
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"))
	addrs := wc.Addrs()
	bootstrap := strings.Join(addrs, ",")
	adm := kadm.NewClient(newClient(t, addrs))
	const n = 20
	const clientID = "orders-svc,strata_az=b"

	for _, mode := range []string{"plain", "idempotent", "pipelined", "transactional"} {
		t.Run(mode, func(t *testing.T) {
			n := n
			if mode == "pipelined" {
				n = 200
			}
			topic := "zl-py-" + mode
			zlTopic(t, adm, topic)
			before := zoneLocalSnapshot(wc.Cluster)
			out, _ := runClient(t, nil, py, "zonelocal_clients.py", "produce", bootstrap, topic, clientID, mode, strconv.Itoa(n), strconv.Itoa(zlPartitions))
			// The producer's metadata: broker 2 leads every partition.
			shown := 0
			for _, l := range strings.Split(out, "\n") {
				var p, leader int32
				if _, err := fmt.Sscanf(l, "leader %d %d", &p, &leader); err == nil {
					if leader != 2 {
						t.Fatalf("the producer was shown broker %d as partition %d's leader, want broker 2 (zone b)", leader, p)
					}
					shown++
				}
			}
			if shown != zlPartitions {
				t.Fatalf("the producer printed %d partitions' leaders, want %d:\n%s", shown, zlPartitions, tail(out))
			}
			recs := parseRecords(out)
			prefix, records, isolation := mode, n, "read_uncommitted"
			var absent []string
			produced := n * zlPartitions
			if mode == "transactional" {
				prefix, records, isolation, absent = "txc", 2*n, "read_committed", []string{"txa"}
				produced = 3 * n * zlPartitions
				aborted := deliveredOffsets(t, recs, "txa", n, false)
				t.Logf("aborted records delivered at %v", aborted)
			}
			offsets := deliveredOffsets(t, recs, prefix, records, false)
			checkForwardedFromB(t, wc.Cluster, before, float64(produced*1000))

			consBefore := zoneConsumeOut(wc.Cluster, "b")
			out, _ = runClient(t, nil, py, "zonelocal_clients.py", "consume", bootstrap, topic, clientID, isolation, strconv.Itoa(records*zlPartitions))
			checkConsumed(t, "the "+isolation+" consumer", parseRecords(out), prefix, offsets, absent...)
			checkConsumedFromB(t, wc.Cluster, consBefore, float64(records*zlPartitions*1000))
			checkRecords(t, addrs, topic, prefix, records, offsets)
		})
	}
}

// TestZoneLocalConfluentKafkaPythonLeaderMoves: a pipelined idempotent
// confluent-kafka-python producer tagged strata_az=b runs while every
// partition's leader moves four times (leader.placement.zone c, b — broker
// 2 itself —, a, c) and then broker 3, leading them all, stops. librdkafka
// keeps broker 2 as their leader throughout (the zone-local metadata),
// and broker 2 keeps each partition's batches in order across the moves
// (zonelocal_order.go): the producer neither dies of a sequence
// desynchronisation nor acknowledges records without an offset, every
// record is in the log once at the offset delivered, and a zone-b
// consumer reads them all back.
func TestZoneLocalConfluentKafkaPythonLeaderMoves(t *testing.T) {
	py := confluentPython(t)
	wc := startWALCluster(t, brokertest.WithSetting("wal.zonelocal.produce.enable", "true"),
		brokertest.WithSetting("leader.placement.policy", "Zone"), brokertest.WithSetting("leader.placement.zone", "a"))
	addrs := wc.Addrs()
	adm := kadm.NewClient(newClient(t, addrs))
	const topic, n, clientID = "zl-py-move", 150, "strata_az=b"
	createTopic(t, adm, topic, zlPartitions, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	waitLeaders(t, adm, topic, zlPartitions, []int32{1}, "leaders in zone a")

	fwdBefore, _ := zoneLocalStats(wc.Cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "zonelocal_clients.py", "produce", strings.Join(addrs, ","), topic, clientID, "moving", strconv.Itoa(n), strconv.Itoa(zlPartitions))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	delivered := 0
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			if !strings.HasPrefix(sc.Text(), "leader ") {
				delivered++
			}
			mu.Unlock()
		}
	}()
	// Move the leaders at fixed shares of the records delivered; a
	// producer that dies stops the moves (its output says why).
	deliveredAtLeast := func(share float64) bool {
		return waitUntil(time.Now().Add(time.Minute), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return delivered >= int(share*n*zlPartitions)
		})
	}
	for i, zone := range []string{"c", "b", "a", "c"} {
		if !deliveredAtLeast(float64(i+1) / 6) {
			break
		}
		alter(t, adm, topic, zone, nil)
	}
	if deliveredAtLeast(5.0 / 6) {
		wc.Brokers[2].Stop()
	}
	<-read
	if err := cmd.Wait(); err != nil {
		t.Fatalf("producer: %v\nstdout:\n%s\nstderr:\n%s", err, tail(out.String()), tail(stderr.String()))
	}
	if fwd, _ := zoneLocalStats(wc.Cluster); fwd[1] == fwdBefore[1] {
		t.Fatal("broker 2 forwarded nothing")
	}
	offsets := deliveredOffsets(t, parseRecords(out.String()), "moving", n, true)

	live := addrs[:2]
	consumed, _ := runClient(t, nil, py, "zonelocal_clients.py", "consume", strings.Join(live, ","), topic, clientID, "read_uncommitted", strconv.Itoa(n*zlPartitions))
	checkConsumed(t, "the consumer", parseRecords(consumed), "moving", offsets)
	checkRecords(t, live, topic, "moving", n, offsets)
}
