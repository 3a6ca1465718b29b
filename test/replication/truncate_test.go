package replication

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/internal/freeport"
)

// TestOldLeaderTruncatesUnacknowledgedTail: the leader appends records
// (acks=1) that its frozen followers never fetch, then is killed; a
// follower takes over at a new leader epoch, and when the old leader comes
// back it truncates those records at the divergence point and follows the
// new leader's log.
func TestOldLeaderTruncatesUnacknowledgedTail(t *testing.T) {
	// Each broker serves metrics, so that the test can see when no replica
	// fetch is parked on the leader.
	c := &brokertest.Cluster{Etcd: metatest.Start(t).Endpoints()}
	var metricsAddrs []string
	for i, z := range zones {
		addr := freeAddr(t)
		metricsAddrs = append(metricsAddrs, addr)
		c.Processes = append(c.Processes, brokertest.StartProcess(t, brokertest.ClusterOptions(c.Etcd, i+1, z,
			brokertest.WithSetting("broker.session.timeout.ms", "3000"),
			brokertest.WithSetting("replica.lag.time.max.ms", "60000"),
			brokertest.WithSetting("replica.fetch.wait.max.ms", "100"),
			brokertest.WithArgs("--metrics-listen", addr))...))
	}
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "tail", 1, nil)
	meta := func() (int32, []int32) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, "tail")
		if err != nil {
			return -1, nil
		}
		p := md.Topics["tail"].Partitions[0]
		return p.Leader, p.ISR
	}
	waitFor(t, "a leader with a full ISR", 30*time.Second, func() bool { l, isr := meta(); return l > 0 && len(isr) == 3 })
	leader, _ := meta()
	all := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	for i := range 10 {
		if err := all.ProduceSync(context.Background(), &kgo.Record{Topic: "tail", Value: fmt.Appendf(nil, "committed-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Freeze the followers (for less than the session timeout, so they
	// stay registered) and append to the leader alone.
	var followers []*brokertest.Process
	for i, p := range c.Processes {
		if int32(i+1) != leader {
			followers = append(followers, p)
		}
	}
	one := newClient(t, []string{c.Processes[leader-1].Addr()}, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for _, f := range followers {
		f.Pause()
	}
	// The followers' parked fetches end (answered empty after
	// replica.fetch.wait.max.ms) and no new ones come: from then on
	// nothing the leader appends can reach them.
	waitFor(t, "no replica fetch parked on the leader", 30*time.Second, func() bool {
		return fetchesInFlight(t, metricsAddrs[leader-1]) == 0
	})
	for i := range 5 {
		if err := one.ProduceSync(context.Background(), &kgo.Record{Topic: "tail", Value: fmt.Appendf(nil, "unreplicated-%d", i)}).FirstErr(); err != nil {
			for _, f := range followers {
				f.Resume()
			}
			t.Fatal(err)
		}
	}
	c.Processes[leader-1].Kill()
	for _, f := range followers {
		f.Resume()
	}
	waitFor(t, "a new leader", 60*time.Second, func() bool { l, _ := meta(); return l > 0 && l != leader })
	for i := range 3 {
		if err := all.ProduceSync(context.Background(), &kgo.Record{Topic: "tail", Value: fmt.Appendf(nil, "new-leader-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.Processes[leader-1].Start()
	waitFor(t, "the old leader back in the ISR", 60*time.Second, func() bool {
		_, isr := meta()
		return len(isr) == 3
	})
	if !strings.Contains(c.Processes[leader-1].Logs(), "truncated to the leader's divergence point") {
		t.Fatalf("the old leader did not truncate:\n%s", c.Processes[leader-1].Logs())
	}
	// Read from the old leader's replica (a consumer in its zone is sent
	// there, KIP-392): the unreplicated records are gone, the new
	// leader's are there.
	cons := newClient(t, c.Addrs(), kgo.Rack(zones[leader-1]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tail": {0: kgo.NewOffset().AtStart()}}))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < 13 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 13 records: %v", len(got), got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("committed-%d", i))
	}
	for i := range 3 {
		want = append(want, fmt.Sprintf("new-leader-%d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// freeAddr is an address for a broker process to bind (freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// fetchesInFlight reads strata_requests_in_flight{api="Fetch"} from a
// broker's /metrics (-1 if unreadable).
func fetchesInFlight(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `strata_requests_in_flight{api="Fetch"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return 0
}
