package compat

// Share groups (KIP-932) against franz-go's share consumer: every record
// delivered, unacknowledged records redelivered once their acquisition
// lock expires (to another member), delivery counts, the delivery limit
// archiving a record that keeps being released, rejected records never
// coming back, acknowledged records not redelivered after a broker
// restart, and in a cluster DeleteGroups and AlterShareGroupOffsets
// followed by every partition's leader.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-dev/strata/broker/brokertest"
	sgroup "github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/server"
)

const shareGroupID = "compat-share"

// startShareBroker starts a broker whose share groups start at the log
// start and lock acquired records for lock.
func startShareBroker(t *testing.T, lock time.Duration, opts ...brokertest.Option) *brokertest.Broker {
	opts = append(opts, brokertest.WithConfig(func(c *server.Config) {
		c.Share = sgroup.ShareConfig{RecordLockDuration: lock, AutoOffsetReset: "earliest"}
	}))
	return brokertest.Start(t, opts...)
}

func createShareTopic(t *testing.T, addr, topic string, partitions int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func newShareClient(t *testing.T, addr, name, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(name), kgo.ShareGroup(shareGroupID), kgo.ConsumeTopics(topic)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// shareStartOffsets returns the group's share-partition start offsets.
func shareStartOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	described, err := adm.DescribeShareGroupOffsets(ctx, shareGroupID)
	if err != nil {
		return nil, err
	}
	g, ok := described[shareGroupID]
	if !ok {
		return nil, fmt.Errorf("group %s not described", shareGroupID)
	}
	if g.Err != nil {
		return nil, g.Err
	}
	out := map[int32]int64{}
	for _, p := range g.Offsets[topic] {
		if p.Err != nil {
			return nil, p.Err
		}
		out[p.Partition] = p.StartOffset
	}
	return out, nil
}

// delivery is one record delivered to a member.
type delivery struct {
	member string
	key    string
	count  int32
}

type deliveries struct {
	mu  sync.Mutex
	all []delivery
}

func (d *deliveries) add(member string, r *kgo.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, delivery{member, string(r.Key), r.DeliveryCount()})
}

func (d *deliveries) snapshot() []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]delivery(nil), d.all...)
}

// TestShareGroupFranzGoPair: two franz-go share consumers on one
// single-partition topic (both are assigned partition 0: share partitions
// are shared). The holder polls a few records and never acknowledges them
// nor polls again; the worker accepts everything it gets. Every record is
// accepted by the worker, and those the holder sat on reach the worker
// after their acquisition lock expired, with a delivery count of 2.
func TestShareGroupFranzGoPair(t *testing.T) {
	const (
		topic = "share-pair"
		n     = 60
	)
	b := startShareBroker(t, 3*time.Second)
	createShareTopic(t, b.Addr(), topic, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	holder := newShareClient(t, b.Addr(), "holder", topic, kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	defer holder.Close()
	held := map[string]bool{}
	for len(held) == 0 {
		fs := holder.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("holder got nothing")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.DeliveryCount() != 1 {
				t.Errorf("holder: %s delivered with count %d, want 1", r.Key, r.DeliveryCount())
			}
			held[string(r.Key)] = true
		})
	}
	t.Logf("holder holds %d records without acknowledging them", len(held))

	var got deliveries
	worker := newShareClient(t, b.Addr(), "worker", topic)
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			fs := worker.PollFetches(wctx)
			fs.EachRecord(func(r *kgo.Record) { got.add("worker", r) })
			worker.MarkAcks(kgo.AckAccept)
		}
	}()
	defer func() {
		wcancel()
		<-done
		worker.Close()
	}()

	adm := kadm.NewClient(worker)
	waitUntil(t, "both members assigned partition 0", time.Minute, func() (bool, string) {
		ds, err := adm.DescribeShareGroups(ctx, shareGroupID)
		if err != nil {
			return false, err.Error()
		}
		g := ds[shareGroupID]
		assigned := 0
		for _, m := range g.Members {
			if ps := m.Assignment[topic]; len(ps) == 1 {
				if _, ok := ps[0]; ok {
					assigned++
				}
			}
		}
		return g.Err == nil && g.GroupState == "Stable" && assigned == 2, fmt.Sprintf("state %s, %d members, %d assigned, err %v", g.GroupState, len(g.Members), assigned, g.Err)
	})
	waitUntil(t, "every record acknowledged (SPSO at the log end)", time.Minute, func() (bool, string) {
		offs, err := shareStartOffsets(ctx, adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return offs[0] == n, fmt.Sprintf("SPSO %v", offs)
	})

	byKey := map[string][]int32{}
	for _, d := range got.snapshot() {
		byKey[d.key] = append(byKey[d.key], d.count)
	}
	if len(byKey) != n {
		t.Errorf("worker saw %d distinct records, want %d", len(byKey), n)
	}
	redelivered := 0
	for k := range held {
		counts := byKey[k]
		if len(counts) == 0 {
			t.Errorf("%s, held by the holder, never reached the worker", k)
			continue
		}
		if counts[len(counts)-1] < 2 {
			t.Errorf("%s reached the worker with delivery count %v, want >= 2 (redelivered after its lock expired)", k, counts)
		}
		redelivered++
	}
	for k, counts := range byKey {
		if !held[k] && len(counts) > 1 {
			// A record the worker acquired once and accepted is never
			// delivered again.
			t.Errorf("%s delivered to the worker %d times: %v", k, len(counts), counts)
		}
	}
	t.Logf("%d records redelivered to the worker after lock expiry", redelivered)
}

// TestShareGroupDeliveryLimit: a record that is released every time is
// delivered share.delivery.count.limit (5) times with counts 1..5 and then
// archived; a rejected record is delivered once. Both are behind the SPSO
// at the end: never delivered again.
func TestShareGroupDeliveryLimit(t *testing.T) {
	const (
		topic = "share-limit"
		n     = 20
	)
	b := startShareBroker(t, 30*time.Second)
	createShareTopic(t, b.Addr(), topic, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const poison, rejected = "k005", "k007"
	var got deliveries
	cl := newShareClient(t, b.Addr(), "member", topic)
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				got.add("member", r)
				switch string(r.Key) {
				case poison:
					cl.MarkAcks(kgo.AckRelease, r)
				case rejected:
					cl.MarkAcks(kgo.AckReject, r)
				default:
					cl.MarkAcks(kgo.AckAccept, r)
				}
			})
		}
	}()
	defer func() {
		ccancel()
		<-done
		cl.Close()
	}()

	adm := kadm.NewClient(cl)
	waitUntil(t, "SPSO past every record", time.Minute, func() (bool, string) {
		offs, err := shareStartOffsets(ctx, adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return offs[0] == n, fmt.Sprintf("SPSO %v", offs)
	})
	byKey := map[string][]int32{}
	for _, d := range got.snapshot() {
		byKey[d.key] = append(byKey[d.key], d.count)
	}
	if want := []int32{1, 2, 3, 4, 5}; fmt.Sprint(byKey[poison]) != fmt.Sprint(want) {
		t.Errorf("released record delivered with counts %v, want %v", byKey[poison], want)
	}
	if fmt.Sprint(byKey[rejected]) != "[1]" {
		t.Errorf("rejected record delivered with counts %v, want [1]", byKey[rejected])
	}
	if len(byKey) != n {
		t.Errorf("%d distinct records delivered, want %d", len(byKey), n)
	}
}

// TestShareGroupBrokerRestart: records accepted before a broker restart
// are not delivered after it; the others are.
func TestShareGroupBrokerRestart(t *testing.T) {
	const (
		topic = "share-restart"
		n     = 40
	)
	b := startShareBroker(t, 30*time.Second)
	createShareTopic(t, b.Addr(), topic, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := newShareClient(t, b.Addr(), "first", topic, kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict())
	accepted := map[string]bool{}
	for len(accepted) == 0 {
		fs := first.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("first member got nothing")
		}
		fs.EachRecord(func(r *kgo.Record) { accepted[string(r.Key)] = true })
	}
	first.MarkAcks(kgo.AckAccept)
	if err := first.FlushAcks(ctx); err != nil {
		t.Fatalf("flush acks: %v", err)
	}
	first.Close() // releases whatever it still had buffered
	t.Logf("accepted %d records before the restart", len(accepted))

	b.Restart()

	var got deliveries
	second := newShareClient(t, b.Addr(), "second", topic)
	sctx, scancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			fs := second.PollFetches(sctx)
			fs.EachRecord(func(r *kgo.Record) { got.add("second", r) })
			second.MarkAcks(kgo.AckAccept)
		}
	}()
	defer func() {
		scancel()
		<-done
		second.Close()
	}()
	adm := kadm.NewClient(second)
	waitUntil(t, "SPSO at the log end after the restart", time.Minute, func() (bool, string) {
		offs, err := shareStartOffsets(ctx, adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return offs[0] == n, fmt.Sprintf("SPSO %v", offs)
	})
	seen := map[string]bool{}
	var again []string
	for _, d := range got.snapshot() {
		if accepted[d.key] {
			again = append(again, d.key)
		}
		seen[d.key] = true
	}
	sort.Strings(again)
	if len(again) > 0 {
		t.Errorf("records accepted before the restart delivered again: %v", again)
	}
	if len(seen)+len(accepted) != n {
		t.Errorf("%d records after the restart + %d before, want %d", len(seen), len(accepted), n)
	}
}

// TestShareGroupACLs: as Kafka, share-group membership and fetching need
// READ on the group, and on the topic for fetching (DESCRIBE on it for the
// heartbeat's subscription); describing needs DESCRIBE on the group.
func TestShareGroupACLs(t *testing.T) {
	const topic, groupID = "share-acl", "share-acl-group"
	sb := startSecureBroker(t,
		brokertest.WithSetting("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
		brokertest.WithSetting("super.users", "User:ANONYMOUS"),
		brokertest.WithConfig(func(c *server.Config) { c.Share.AutoOffsetReset = "earliest" }))
	createShareTopic(t, sb.b.Addr(), topic, 1, 3)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(sb.b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := topics[topic].ID

	pem, err := os.ReadFile(sb.ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	alice, err := kgo.NewClient(kgo.SeedBrokers(sb.saslSSL), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: sb.user, Pass: sb.password}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	broker := alice.Broker(0)

	heartbeat := func() int16 {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.SubscribedTopicNames = groupID, "alice-member-id-0001", []string{topic}
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	describe := func() int16 {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{groupID}
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0].ErrorCode
	}
	// fetch opens a share session and returns the top-level and the
	// partition's error codes and the records acquired.
	fetch := func() (int16, int16, int) {
		req := kmsg.NewPtrShareFetchRequest()
		g, m := groupID, "alice-member-id-0001"
		req.GroupID, req.MemberID, req.MaxRecords, req.BatchSize = &g, &m, 10, 10
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		var code int16
		n := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				code = rp.ErrorCode
				for _, a := range rp.AcquiredRecords {
					n += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
		return resp.ErrorCode, code, n
	}
	allow := func(acls *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, acls)
		if err == nil {
			for _, r := range res {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	wantCode(t, "heartbeat without ACLs", heartbeat(), kerr.GroupAuthorizationFailed)
	wantCode(t, "describe without ACLs", describe(), kerr.GroupAuthorizationFailed)
	top, _, _ := fetch()
	wantCode(t, "fetch without ACLs", top, kerr.GroupAuthorizationFailed)

	allow(kadm.NewACLs().Allow("User:" + sb.user).Groups(groupID).Operations(kadm.OpRead))
	wantCode(t, "heartbeat with READ on the group only", heartbeat(), kerr.TopicAuthorizationFailed)
	wantCode(t, "describe with READ on the group, no such share group yet", describe(), kerr.GroupIDNotFound)
	top, part, _ := fetch()
	wantCode(t, "fetch with READ on the group only", top, nil)
	wantCode(t, "fetched partition with READ on the group only", part, kerr.TopicAuthorizationFailed)

	allow(kadm.NewACLs().Allow("User:" + sb.user).Topics(topic).Operations(kadm.OpRead))
	wantCode(t, "heartbeat with READ on both", heartbeat(), nil)
	wantCode(t, "describe with READ on the group", describe(), nil)
	top, part, n := fetch()
	if top != 0 || part != 0 || n != 3 {
		t.Fatalf("fetch with READ on both: %s/%s, %d records acquired, want 3", kerr.ErrorForCode(top), kerr.ErrorForCode(part), n)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if (want == nil && got != 0) || (want != nil && got != want.Code) {
		t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestShareGroupCluster: two franz-go share consumers against a 3-broker
// cluster, a 3-partition topic whose leaders are spread over the brokers:
// each broker keeps the share state of the partitions it leads (in etcd),
// the group coordinator serves the membership and reads every partition's
// start offset back from etcd.
func TestShareGroupCluster(t *testing.T) { runShareCluster(t, false) }

// TestShareGroupClusterFailover: as TestShareGroupCluster, then the broker
// leading partition 0 stops (controlled shutdown) and more records are
// produced: the new leaders continue from the share state in etcd, no
// record accepted before the failover is delivered again and the new ones
// are all delivered.
func TestShareGroupClusterFailover(t *testing.T) { runShareCluster(t, true) }

func runShareCluster(t *testing.T, failover bool) {
	const (
		topic = "share-cluster"
		n     = 90
	)
	c := brokertest.StartCluster(t, []string{"a", "b", "c"}, brokertest.WithConfig(func(c *server.Config) {
		c.Share = sgroup.ShareConfig{AutoOffsetReset: "earliest"}
	}))
	addrs := c.Addrs()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopics(ctx, 3, 3, nil, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte("v")})
		}
		if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0, n)
	leaders := map[int32]int32{}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics[topic].Partitions {
		leaders[p.Partition] = p.Leader
	}
	t.Logf("partition leaders %v", leaders)

	var got deliveries
	var wg sync.WaitGroup
	mctx, mcancel := context.WithCancel(ctx)
	for _, name := range []string{"m1", "m2"} {
		cl := newShareClient(t, addrs[0], name, topic, kgo.SeedBrokers(addrs...))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for mctx.Err() == nil {
				fs := cl.PollFetches(mctx)
				fs.EachRecord(func(r *kgo.Record) { got.add(name, r) })
				cl.MarkAcks(kgo.AckAccept)
			}
		}()
	}
	defer func() {
		mcancel()
		wg.Wait()
	}()
	atEnd := func(what string) {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
		waitUntil(t, what, time.Minute, func() (bool, string) {
			offs, err := shareStartOffsets(ctx, adm, topic)
			if err != nil {
				return false, err.Error()
			}
			return fmt.Sprint(offs) == fmt.Sprint(want), fmt.Sprintf("SPSO %v, ends %v", offs, want)
		})
	}
	atEnd("every partition's SPSO at its end")
	total := n
	if failover {
		stopped := leaders[0]
		c.Brokers[stopped-1].Stop()
		t.Logf("stopped broker %d, the leader of partition 0", stopped)
		produce(n, n+60)
		total += 60
		atEnd("every partition's SPSO at its end after the failover")
	}
	seen := map[string]int{}
	members := map[string]bool{}
	for _, d := range got.snapshot() {
		seen[d.key]++
		members[d.member] = true
	}
	if len(seen) != total {
		t.Errorf("%d distinct records delivered, want %d", len(seen), total)
	}
	for k, times := range seen {
		if times != 1 {
			t.Errorf("%s delivered %d times", k, times)
		}
	}
	t.Logf("records consumed by %d members", len(members))
}

// TestShareGroupClusterDeleteAndAlter: a franz-go share consumer reads a
// 3-partition topic whose leaders are spread over a 3-broker cluster and
// stops. kadm's DeleteGroups of the share group (served by its
// coordinator) deletes its state on every partition: the next consumer of
// that group id gets every record again. Then AlterShareGroupOffsets moves
// every partition's start offset to 20: the next consumer gets the records
// from 20 on. The partitions led by brokers other than the coordinator
// follow both (they had the state loaded).
func TestShareGroupClusterDeleteAndAlter(t *testing.T) {
	const (
		topic = "share-cluster-admin"
		n     = 90 // 30 per partition
	)
	c := brokertest.StartCluster(t, []string{"a", "b", "c"}, brokertest.WithConfig(func(c *server.Config) {
		c.Share = sgroup.ShareConfig{AutoOffsetReset: "earliest"}
	}))
	addrs := c.Addrs()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopics(ctx, 3, 3, nil, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp[topic].Err)
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte("v")})
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// consume reads with a new member until want records came, accepting
	// them, and stops; it returns how many records each partition gave.
	consume := func(member string, want int) map[int32]int {
		t.Helper()
		cl := newShareClient(t, addrs[0], member, topic, kgo.SeedBrokers(addrs...))
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		defer pcancel()
		got := map[int32]int{}
		total := 0
		for total < want && pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition]++
				total++
			})
			cl.MarkAcks(kgo.AckAccept)
		}
		if total != want {
			t.Fatalf("%s: %d records (%v per partition), want %d", member, total, got, want)
		}
		return got
	}
	// Wait until the records are acknowledged everywhere and the member
	// has left (the admin requests need an empty group).
	settle := func(what string, starts map[int32]int64, admin func() error) {
		t.Helper()
		waitUntil(t, what, time.Minute, func() (bool, string) {
			offs, err := shareStartOffsets(ctx, adm, topic)
			if err != nil {
				return false, err.Error()
			}
			if fmt.Sprint(offs) != fmt.Sprint(starts) {
				return false, fmt.Sprintf("SPSO %v, want %v", offs, starts)
			}
			if err := admin(); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	}
	all := map[int32]int{0: 30, 1: 30, 2: 30}
	if got := consume("first", n); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("first consumer got %v per partition, want %v", got, all)
	}
	atEnd := map[int32]int64{0: 30, 1: 30, 2: 30}
	settle("the group deleted", atEnd, func() error {
		resp, err := adm.DeleteGroups(ctx, shareGroupID)
		if err != nil {
			return err
		}
		return resp[shareGroupID].Err
	})
	if got := consume("after-delete", n); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("after DeleteGroups a consumer got %v per partition, want %v", got, all)
	}
	settle("the start offsets altered", atEnd, func() error {
		os := kadm.Offsets{}
		for p := range int32(3) {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: 20, LeaderEpoch: -1})
		}
		resp, err := adm.AlterShareGroupOffsets(ctx, shareGroupID, os)
		if err != nil {
			return err
		}
		for _, ps := range resp { // by topic, then partition
			for _, err := range ps {
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	tail := map[int32]int{0: 10, 1: 10, 2: 10}
	if got := consume("after-alter", 30); fmt.Sprint(got) != fmt.Sprint(tail) {
		t.Fatalf("after AlterShareGroupOffsets a consumer got %v per partition, want %v", got, tail)
	}
}
