package replication

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestExactlyOnceAcrossBrokerKill: franz-go's GroupTransactSession
// consume-transform-produce from topic "in" to topic "out" on three
// broker processes, the transaction coordinator's process SIGKILLed in the
// middle (and started again). A read_committed consumer of "out" then
// finds every input record exactly once: transactions cut by the kill were
// aborted (their output invisible, their input offsets not committed) and
// redone.
func TestExactlyOnceAcrossBrokerKill(t *testing.T) {
	const n = 3000
	c := brokertest.StartProcessCluster(t, zones,
		brokertest.WithSetting("replica.lag.time.max.ms", "3000"),
		brokertest.WithSetting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "1000"))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "in", 3, nil)
	createTopic(t, adm, "out", 3, nil)
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "v-%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	newSession := func() *kgo.GroupTransactSession {
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(c.Addrs()...),
			kgo.MetadataMinAge(100*time.Millisecond),
			kgo.TransactionalID("eos-transform"),
			kgo.TransactionTimeout(10*time.Second),
			kgo.ConsumerGroup("eos-group"),
			kgo.ConsumeTopics("in"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	sess := newSession()
	defer func() { sess.Close() }()

	transformed := 0 // records of committed transactions
	killed := false
	var coordinator int32 = -1
	for transformed < n {
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d records in committed transactions before the deadline", transformed, n)
		}
		fs := sess.PollRecords(ctx, 100) // many small transactions
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			// kgo gives up on a producer ID whose transaction
			// coordinator left its metadata before it learned the new
			// one ("unknown broker"): an application starts a new
			// session with the same transactional ID, which fences
			// the old producer; its open transaction is aborted and
			// its input offsets, never committed, are read again.
			t.Logf("begin: %v: a new session", err)
			sess.Close()
			sess = newSession()
			continue
		}
		// kgo commits whatever was produced when asked to (unlike Java,
		// which refuses a commit after a failed produce): an application
		// aborts a transaction any of whose records failed, as kgo's
		// AbortingFirstErrPromise is for. CI once saw a whole batch
		// refused (INVALID_TXN_STATE) after the coordinator's failover
		// and the commit go through without it: 100 inputs consumed,
		// their outputs never written.
		produced := kgo.AbortingFirstErrPromise(sess.Client())
		for _, r := range recs {
			sess.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value}, produced.Promise())
		}
		if !killed && transformed > n/3 {
			// Kill the transaction coordinator while this
			// transaction is open.
			coordinator = txnCoordinator(t, newClient(t, c.Addrs()), "eos-transform")
			t.Logf("SIGKILL broker %d (transaction coordinator) with a transaction open, %d records transformed", coordinator, transformed)
			c.Processes[coordinator-1].Kill()
			killed = true
		}
		perr := produced.Err()
		if perr != nil {
			t.Logf("transactional produce: %v (aborting the transaction)", perr)
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(perr == nil))
		switch {
		case err != nil:
			t.Logf("end of transaction: %v (aborted, redone)", err)
		case committed:
			transformed += len(recs)
		}
		if killed && coordinator > 0 && transformed > 2*n/3 {
			c.Processes[coordinator-1].Start()
			coordinator = 0
		}
	}
	if !killed {
		t.Fatal("the kill never happened")
	}

	// Every input record exactly once among the committed output.
	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	total := 0
	deadline := time.Now().Add(2 * time.Minute)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read_committed consumer of out saw %d distinct of %d records (%d in all)", len(seen), n, total)
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}
	// Drain what else is committed: duplicates would be behind.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		if errors.Is(pctx.Err(), context.DeadlineExceeded) && fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}
	for i := range n {
		if k := fmt.Sprintf("v-%d", i); seen[k] != 1 {
			t.Fatalf("%s is in the committed output %d times", k, seen[k])
		}
	}
	if total != n {
		t.Fatalf("committed output holds %d records, want %d", total, n)
	}
	t.Logf("%d records transformed exactly once across a SIGKILL of the transaction coordinator", n)
}
