package replication

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestTieredTxnLeaderFailover: transactions on a tiered topic across a
// leader change. The first leader uploads an aborted transaction (data and
// marker) and local retention deletes it; the new leader, a follower
// until then (it re-read the manifest to let its own retention go on),
// continues the tier with a second aborted transaction. A read_committed
// consumer from offset 0 gets exactly the committed records, reading the
// first leader's transaction indexes from the tier through the new one.
func TestTieredTxnLeaderFailover(t *testing.T) {
	_, tiered := tierBucket(t)
	c := brokertest.StartCluster(t, zones, tiered...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	// retention.ms -1: the raw batches carry timestamp 0, which tier
	// retention would expire at once.
	on, one, seg, forever := "true", "1", "4096", "-1"
	createTopic(t, adm, "tiered-txn", 1, map[string]*string{"remote.storage.enable": &on, "local.retention.ms": &one, "segment.bytes": &seg, "retention.ms": &forever})
	st := state(t, c, "tiered-txn", 0)
	waitFor(t, "the leader in the metadata", 30*time.Second, func() bool {
		l, _ := leaderOf(adm, "tiered-txn")
		return l == st.Leader
	})
	tx := newTxnRaw(ctx, t, cl, "tiered-txn")
	var want []string
	next := int64(0) // the next offset
	// One aborted transaction interleaved with committed records, then
	// committed records to seal its marker's segment; returns the first
	// offset of the aborted transaction.
	round := func(tag string) int64 {
		t.Helper()
		aborted, committed := tx.newPID(), tx.newPID()
		first := next
		for i := range 20 {
			pad := strings.Repeat("x", 200)
			tx.produce(aborted, true, fmt.Sprintf("%s-aborted-%d|%s", tag, i, pad))
			tx.produce(committed, true, fmt.Sprintf("%s-committed-%d|%s", tag, i, pad))
			want = append(want, fmt.Sprintf("%s-committed-%d", tag, i))
			next += 2
		}
		tx.marker(aborted, false)
		tx.marker(committed, true)
		next += 2
		for i := range 20 {
			tx.produce(tx.pid, false, fmt.Sprintf("%s-plain-%d|%s", tag, i, strings.Repeat("x", 200)))
			want = append(want, fmt.Sprintf("%s-plain-%d", tag, i))
			next++
		}
		return first
	}
	localStartOver := func(id int32, off int64) {
		t.Helper()
		waitFor(t, fmt.Sprintf("broker %d's local log to start past %d (uploaded, deleted locally)", id, off), time.Minute, func() bool {
			p, err := brokerByID(c, id).Server().Broker().Partition("tiered-txn", 0)
			return err == nil && p.Log.StartOffset() > off
		})
	}
	firstAborted := round("one")
	localStartOver(st.Leader, firstAborted+41) // past the first transaction's markers

	brokerByID(c, st.Leader).Stop()
	var newLeader int32
	waitFor(t, "a new leader", time.Minute, func() bool {
		newLeader, _ = leaderOf(adm, "tiered-txn")
		return newLeader > 0 && newLeader != st.Leader
	})
	secondAborted := round("two")
	localStartOver(newLeader, secondAborted+41)

	got := readCommittedValues(ctx, t, c.Addrs(), "tiered-txn", len(want))
	for i := range got {
		got[i], _, _ = strings.Cut(got[i], "|")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer from 0 after the failover got %d records %q\nwant the committed ones %q", len(got), got, want)
	}
}
