package replication

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// consumerSessions is strata_fetch_sessions{kind="consumer"} of b.
func consumerSessions(t *testing.T, b *brokertest.Broker) float64 {
	t.Helper()
	mfs, err := b.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "strata_fetch_sessions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "consumer" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal("no strata_fetch_sessions{kind=consumer}")
	return 0
}

// TestConsumerFetchSessions: franz-go consumers, which use fetch sessions
// when the broker gives them one (KIP-227), read every record of a topic
// of many partitions exactly once and in order while it is produced to
// (acks=all): from the leaders, from a follower in their rack (KIP-392:
// its HWM moves when it learns the leader's), and read_committed with a
// transaction committed and one aborted.
func TestConsumerFetchSessions(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	const parts = 24
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// consume reads want (partition → values in order) from topic and
	// fails on anything else: a record twice, out of order, or one
	// never coming (a stall). Then, its client still open (a client
	// closes its sessions), the brokers that served it, served (nil:
	// any), must hold a consumer session.
	consume := func(t *testing.T, topic string, want map[int32][]string, served []*brokertest.Broker, opts ...kgo.Opt) {
		t.Helper()
		cons := newClient(t, c.Addrs(), append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
		got, n, total := map[int32][]string{}, 0, 0
		for _, v := range want {
			total += len(v)
		}
		for n < total {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d records: %v", n, total, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], string(r.Value))
				n++
			})
		}
		for p := range int32(parts) {
			if !slices.Equal(got[p], want[p]) {
				t.Fatalf("partition %d: consumed %d records %v..., want %d in order", p, len(got[p]), got[p][:min(len(got[p]), 5)], len(want[p]))
			}
		}
		sessions := 0.0
		if served == nil {
			served = c.Brokers
		}
		for _, b := range served {
			sessions += consumerSessions(t, b)
		}
		if sessions < 1 {
			t.Fatalf("the brokers that served the consumer hold %v consumer fetch sessions, want its own", sessions)
		}
	}

	t.Run("leaders and a follower while producing", func(t *testing.T) {
		const topic, perPart = "sessions", 40
		createTopic(t, adm, topic, parts, nil)
		for p := range int32(parts) {
			state(t, c, topic, p)
		}
		want := map[int32][]string{}
		for p := range int32(parts) {
			for i := range perPart {
				want[p] = append(want[p], fmt.Sprintf("%d-%d", p, i))
			}
		}
		// Produce in rounds while the consumers read: their sessions
		// see partitions come and go quiet, and must wake for each.
		prod := newClient(t, c.Addrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPart {
				var recs []*kgo.Record
				for p := range int32(parts) {
					recs = append(recs, &kgo.Record{Partition: p, Value: []byte(want[p][i])})
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * time.Millisecond) // pacing, not synchronization
			}
		}()
		var consumers sync.WaitGroup
		for _, r := range []string{"", "b"} {
			consumers.Add(1)
			go func() {
				defer consumers.Done()
				t.Run("rack="+r, func(t *testing.T) {
					var opts []kgo.Opt
					var served []*brokertest.Broker
					if r != "" {
						// Zone b's broker (ID 2) serves it.
						opts, served = append(opts, kgo.Rack(r)), []*brokertest.Broker{brokerByID(c, 2)}
					}
					consume(t, topic, want, served, opts...)
				})
			}()
		}
		consumers.Wait()
		wg.Wait()
	})

	t.Run("read_committed", func(t *testing.T) {
		const topic = "sessions-txn"
		createTopic(t, adm, topic, parts, nil)
		for p := range int32(parts) {
			state(t, c, topic, p)
		}
		txn := newClient(t, c.Addrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionalID("sessions-txn"))
		want := map[int32][]string{}
		// Committed, aborted, committed, each on every partition.
		for round, commit := range []bool{true, false, true} {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			for p := range int32(parts) {
				v := fmt.Sprintf("%d-txn%d", p, round)
				recs = append(recs, &kgo.Record{Partition: p, Value: []byte(v)})
				if commit {
					want[p] = append(want[p], v)
				}
			}
			if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
		consume(t, topic, want, nil, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		consume(t, topic, want, []*brokertest.Broker{brokerByID(c, 3)}, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.Rack("c"))
	})
}

// TestConsumerSessionWakesOnHWM: a consumer's incremental fetch parked on
// the leader is answered with a record once the HWM moves past it: an
// acks=1 record is appended at once, with a follower stopped, and becomes
// visible when the HWM moves (the other follower fetched it, or the ISR
// dropped the stopped one); the parked fetch, which left the partition
// out (the session remembers its offset), then returns it from that
// offset, before its MaxWait. (A missed wake would show as latency only:
// a quiet partition is read again at least every quietRefresh.)
func TestConsumerSessionWakesOnHWM(t *testing.T) {
	c := brokertest.StartCluster(t, zones, brokertest.WithSetting("replica.lag.time.max.ms", "1500"))
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	const topic = "hwm-wake"
	createTopic(t, adm, topic, 2, nil)
	st := state(t, c, topic, 0)
	leader := brokerByID(c, st.Leader)
	waitFor(t, "the leader in the metadata", 30*time.Second, func() bool {
		l, _ := leaderOf(adm, topic)
		return l == st.Leader
	})
	md, err := adm.ListTopics(context.Background(), topic)
	if err != nil || md[topic].Err != nil {
		t.Fatalf("metadata: %v %v", err, md[topic].Err)
	}
	id := md[topic].ID
	direct := newClient(t, []string{leader.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fetch := func(session, epoch, maxWait int32, offsets map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := brokertest.ConsumerFetch(topic, id, session, epoch, maxWait, offsets)
		resp, err := req.RequestWith(ctx, direct.Broker(int(st.Leader)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		return resp
	}
	// Open the session on partition 0 only (the leader of 1 may be
	// another broker), and take its first incremental fetch, which
	// subscribes it.
	full := fetch(0, 0, 0, map[int32]int64{0: 0})
	session := full.SessionID
	if session == 0 {
		t.Fatal("the consumer got no fetch session")
	}
	fetch(session, 1, 0, nil)

	// Stop a follower: the HWM cannot move until the ISR drops it.
	brokerByID(c, st.Replicas[slices.IndexFunc(st.Replicas, func(r int32) bool { return r != st.Leader })]).Stop()
	done := make(chan *kmsg.FetchResponse, 1)
	go func() { done <- fetch(session, 2, 50_000, nil) }()
	prod := newClient(t, []string{leader.Addr()}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("visible at the HWM")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var resp *kmsg.FetchResponse
	select {
	case resp = <-done:
	case <-ctx.Done():
		t.Fatal("the parked fetch was not answered")
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("answer %+v, want partition 0", resp.Topics)
	}
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode != 0 || part.HighWatermark != 1 || len(part.RecordBatches) == 0 {
		t.Fatalf("partition 0: error %v, HWM %d, %d record bytes; want the record (woken at the HWM move, not its MaxWait)",
			kerr.ErrorForCode(part.ErrorCode), part.HighWatermark, len(part.RecordBatches))
	}
}
