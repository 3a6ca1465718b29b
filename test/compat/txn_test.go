package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestConfluentKafkaPythonTransactions: librdkafka (confluent-kafka-python)
// commits 1,000 and aborts 1,000 transactional records (20 transactions
// of 100, alternately committed and aborted). A read_committed consumer
// sees exactly the committed ones, in order per partition; a
// read_uncommitted one sees both.
func TestConfluentKafkaPythonTransactions(t *testing.T) {
	py := pythonPath(t)
	b := brokertest.Start(t)
	out := runTool(t, nil, py, "txn_clients.py", "produce", b.Addr(), "txn-py", "py-app", "20", "100")
	if !strings.Contains(out, "ok") {
		t.Fatalf("produce: %s", out)
	}
	read := func(isolation string) []string {
		var vals []string
		for _, l := range strings.Split(runTool(t, nil, py, "txn_clients.py", "consume", b.Addr(), "txn-py", isolation), "\n") {
			if l = strings.TrimSpace(l); l != "" && (strings.HasPrefix(l, "c-") || strings.HasPrefix(l, "a-")) {
				vals = append(vals, l)
			}
		}
		return vals
	}
	committed := read("read_committed")
	count := func(vals []string, prefix string) int {
		n := 0
		for _, v := range vals {
			if strings.HasPrefix(v, prefix) {
				n++
			}
		}
		return n
	}
	if c, a := count(committed, "c-"), count(committed, "a-"); c != 1000 || a != 0 {
		t.Fatalf("read_committed saw %d committed and %d aborted records, want 1000 and 0", c, a)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(committed)))) != 1000 {
		t.Fatalf("read_committed saw duplicates")
	}
	all := read("read_uncommitted")
	if c, a := count(all, "c-"), count(all, "a-"); c != 1000 || a != 1000 {
		t.Fatalf("read_uncommitted saw %d committed and %d aborted records, want 1000 and 1000", c, a)
	}
}

// TestConfluentKafkaPythonZombieFenced: a second producer with the same
// transactional.id fences the first; the first's commit fails with a
// fatal fencing error, the second commits.
func TestConfluentKafkaPythonZombieFenced(t *testing.T) {
	py := pythonPath(t)
	b := brokertest.Start(t)
	out := runTool(t, nil, py, "txn_clients.py", "zombie", b.Addr(), "txn-zombie", "zombie-app")
	// The zombie's commit fails with a fencing error; librdkafka 2.0
	// takes the one on its produce as abortable, and the coordinator then
	// refuses its abort with the old epoch: fatal.
	if !strings.Contains(out, "fenced PRODUCER_FENCED") || !strings.Contains(out, "fatal=True") || strings.Contains(out, "abort accepted") {
		t.Fatalf("zombie producer was not fenced: %s", out)
	}
	var got []string
	for _, l := range strings.Split(runTool(t, nil, py, "txn_clients.py", "consume", b.Addr(), "txn-zombie", "read_committed"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, " ") {
			got = append(got, l)
		}
	}
	if !slices.Equal(got, []string{"after-fence"}) {
		t.Fatalf("read_committed after the fencing: %q, want only the new producer's record", got)
	}
}

// TestSaramaTransactions: Sarama's transactional producer commits and
// aborts; a franz-go read_committed consumer sees only the committed
// records, a read_uncommitted one both.
func TestSaramaTransactions(t *testing.T) {
	b := brokertest.Start(t)
	cfg := sarama.NewConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-app"
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for txn := range 4 {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		prefix := "c"
		if txn%2 == 1 {
			prefix = "a"
		}
		for i := range 50 {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "txn-sarama", Value: sarama.StringEncoder(fmt.Sprintf("%s-%d-%d", prefix, txn, i))}); err != nil {
				t.Fatal(err)
			}
		}
		if prefix == "c" {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatalf("end of transaction %d: %v", txn, err)
		}
	}
	if c, a := countTxnRecords(t, b.Addr(), "txn-sarama", kgo.ReadCommitted()); c != 100 || a != 0 {
		t.Fatalf("read_committed: %d committed, %d aborted; want 100, 0", c, a)
	}
	if c, a := countTxnRecords(t, b.Addr(), "txn-sarama", kgo.ReadUncommitted()); c != 100 || a != 100 {
		t.Fatalf("read_uncommitted: %d committed, %d aborted; want 100, 100", c, a)
	}
}

// countTxnRecords reads topic from the start with a franz-go consumer at
// level, until nothing comes for 3 s, and counts the values of committed
// ("c-…") and aborted (any other) transactions.
func countTxnRecords(t *testing.T, addr, topic string, level kgo.IsolationLevel) (committed, aborted int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 && ctx.Err() != nil {
			return committed, aborted
		}
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "c-") {
				committed++
			} else {
				aborted++
			}
		})
	}
}
