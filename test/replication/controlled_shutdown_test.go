package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta"
)

// TestControlledShutdown stops (SIGTERM) the broker leading the most
// partitions of an RF 3 topic while an idempotent acks=all producer runs.
// The broker must have the controller move every leadership it holds to
// another ISR member while it is still registered — so before it closes
// its Kafka listener, which happens before it deregisters — and the
// producer must see no error. The etcd history is the witness: each
// partition's leadership left the stopped broker at a revision before the
// deletion of its registration. Without controlled shutdown the leaders
// move only after (the controller reacts to the deregistration).
//
// It also reports what the producer went through (retried request and
// partition errors, counted from franz-go's log), for the record.
func TestControlledShutdown(t *testing.T) {
	c := brokertest.StartProcessCluster(t, zones)
	etcd := etcdClient(t, c.Etcd)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two := "2"
	const partitions = 6
	createTopic(t, adm, "handoff", partitions, map[string]*string{"min.insync.replicas": &two})
	leaders := func() map[int32][]int32 {
		out := map[int32][]int32{}
		md, err := adm.Metadata(context.Background(), "handoff")
		if err != nil {
			return nil
		}
		for _, p := range md.Topics["handoff"].Partitions {
			if len(p.ISR) != 3 {
				return nil
			}
			out[p.Leader] = append(out[p.Leader], p.Partition)
		}
		return out
	}
	waitFor(t, "every partition led, with a full ISR", 60*time.Second, func() bool {
		l := leaders()
		n := 0
		for id, ps := range l {
			if id >= 1 {
				n += len(ps)
			}
		}
		return n == partitions
	})

	errs := &produceErrors{}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProduceRequestTimeout(5*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.WithLogger(errs))
	producer := startAckProducer(prod, "handoff", "rec", false)
	producer.waitMore(t, "progress before the stop", 2000)
	before := errs.snapshot()

	var victim int32
	for id, ps := range leaders() {
		if len(ps) > len(leaders()[victim]) || victim == 0 {
			victim = id
		}
	}
	led := leaders()[victim]
	start, err := etcd.Get(context.Background(), "/strata/test/meta/version")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping broker %d, leader of partitions %v", victim, led)
	c.Processes[victim-1].Stop()
	producer.waitMore(t, "progress after the stop", 2000)
	_, fails := producer.finish()
	after := errs.snapshot()

	moved, deregistered := leaderHistory(t, etcd, start.Header.Revision, victim)
	t.Logf("broker %d deregistered at etcd revision %d; leaderships moved at %v", victim, deregistered, moved)
	t.Logf("producer before the stop: %s; during and after it: %s (first failed request: %s)", before, after.minus(before), errs.firstRequestErr)
	if fails != 0 {
		t.Errorf("producer: %s", producer.errors())
	}
	for _, p := range led {
		rev, ok := moved[p]
		switch {
		case !ok:
			t.Errorf("partition %d: broker %d still led it when it deregistered (after closing its listener): no controlled shutdown", p, victim)
		case rev > deregistered:
			t.Errorf("partition %d: leadership left broker %d at revision %d, after its deregistration at %d: no controlled shutdown",
				p, victim, rev, deregistered)
		}
	}
	logs := c.Processes[victim-1].Logs()
	done, closing := strings.Index(logs, "controlled shutdown done"), strings.Index(logs, "closing the Kafka listener")
	if done >= 0 {
		line, _, _ := strings.Cut(logs[done:], "\n")
		t.Logf("broker %d: %s", victim, line)
	}
	if done < 0 || closing < done {
		t.Errorf("broker %d did not log a finished controlled shutdown before closing its listener (done at %d, closing at %d)", victim, done, closing)
	}
}

// etcdClient connects to the test cluster's etcd.
func etcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// leaderHistory replays the metadata changes of cluster "test" after
// revision from, up to the deletion of broker's registration, and returns
// for each partition of topic handoff the revision at which its leadership
// left broker, and the deletion's revision.
func leaderHistory(t *testing.T, etcd *clientv3.Client, from int64, broker int32) (map[int32]int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const root = "/strata/test/meta/"
	brokerKey := root + "brokers/" + strconv.Itoa(int(broker))
	moved := map[int32]int64{}
	for resp := range etcd.Watch(ctx, root, clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch the metadata history: %v", err)
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if key == brokerKey && ev.Type == clientv3.EventTypeDelete {
				return moved, ev.Kv.ModRevision
			}
			p, ok := strings.CutPrefix(key, root+"partitions/handoff/")
			if !ok || ev.Type != clientv3.EventTypePut {
				continue
			}
			var st meta.PartitionState
			if err := json.Unmarshal(ev.Kv.Value, &st); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			n, _ := strconv.Atoi(p)
			if _, done := moved[int32(n)]; !done && st.Leader != broker && st.Leader != meta.NoLeader {
				moved[int32(n)] = ev.Kv.ModRevision
			}
		}
	}
	t.Fatalf("broker %d's registration was not deleted (%v)", broker, ctx.Err())
	return nil, 0
}

// produceErrors is a kgo.Logger that counts the errors franz-go retried:
// failed produce requests (a closed connection, a timeout) and partition
// errors in produce responses (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS),
// which franz-go reports only in its debug log.
type produceErrors struct {
	mu              sync.Mutex
	n               produceErrorCounts
	firstRequestErr string
}

type produceErrorCounts struct {
	requests, notLeader, notEnoughReplicas int
}

func (c produceErrorCounts) minus(o produceErrorCounts) produceErrorCounts {
	return produceErrorCounts{c.requests - o.requests, c.notLeader - o.notLeader, c.notEnoughReplicas - o.notEnoughReplicas}
}

func (c produceErrorCounts) String() string {
	return fmt.Sprintf("%d failed produce requests, %d NOT_LEADER_OR_FOLLOWER and %d NOT_ENOUGH_REPLICAS partition errors retried",
		c.requests, c.notLeader, c.notEnoughReplicas)
}

func (e *produceErrors) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (e *produceErrors) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if strings.HasPrefix(msg, "produce request failed") || strings.HasPrefix(msg, "random error while producing") {
		e.n.requests++
		if e.firstRequestErr == "" {
			e.firstRequestErr = fmt.Sprint(keyvals...)
		}
	}
	if msg != "produced" {
		return
	}
	for _, kv := range keyvals {
		if s, ok := kv.(string); ok {
			e.n.notLeader += strings.Count(s, "NOT_LEADER_OR_FOLLOWER")
			e.n.notEnoughReplicas += strings.Count(s, "NOT_ENOUGH_REPLICAS")
			e.n.notLeader += strings.Count(s, "move:") // KIP-951: NOT_LEADER_OR_FOLLOWER naming the new leader
		}
	}
}

func (e *produceErrors) snapshot() produceErrorCounts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}
