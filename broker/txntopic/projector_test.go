package txntopic

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/txn"
)

// decoded is a record as a reader of the topic sees it.
type decoded struct {
	owner, id string
	tomb      bool
	v         kmsg.TxnMetadataValue
	ts        int64
}

func decode(t *testing.T, owner string, r *record.Record) decoded {
	t.Helper()
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil || k.Version != 0 {
		t.Fatalf("key %x: %v (version %d)", r.Key, err, k.Version)
	}
	d := decoded{owner: owner, id: k.TransactionalID, tomb: r.Value == nil, ts: r.TimestampDelta}
	if !d.tomb {
		if err := d.v.ReadFrom(r.Value); err != nil || d.v.Version != 0 {
			t.Fatalf("value of %s: %v (version %d)", k.TransactionalID, err, d.v.Version)
		}
	}
	return d
}

// TestTxnProjection: a snapshot writes every transactional id's state in
// Kafka's format (partitions grouped by topic, a group's offsets as its
// __consumer_offsets partition), a change writes the new state, a delete
// a tombstone, a later snapshot only what differs, and State the whole
// state of the owners asked for.
func TestTxnProjection(t *testing.T) {
	x := &txns{mirror: map[string]txn.Metadata{}, offsetsPartitions: func() int32 { return 10 }}
	var got []decoded
	out := func(owner string, r *record.Record) { got = append(got, decode(t, owner, r)) }

	a := txn.Metadata{TransactionalID: "app-a", ProducerID: 7, ProducerEpoch: 3, TimeoutMillis: 60000, State: txn.Ongoing,
		Partitions: []txn.TopicPartition{{Topic: "orders", Partition: 2}, {Topic: "audit", Partition: 0}, {Topic: "orders", Partition: 0}},
		Groups:     []string{"my-group"}, StartMillis: 1000, UpdateMillis: 1500}
	b := txn.Metadata{TransactionalID: "app-b", ProducerID: 8, State: txn.CompleteCommit, StartMillis: -1, UpdateMillis: 900}
	x.Apply(feedMsg{snapshot: []txn.Metadata{b, a}, isSnap: true}, 5000, out)
	if len(got) != 2 || got[0].id != "app-a" || got[1].id != "app-b" || got[0].owner != "app-a" {
		t.Fatalf("snapshot wrote %+v", got)
	}
	va := got[0].v
	topics := fmt.Sprint(va.Topics)
	// my-group is in partition 1 of 10 (Java hashCode).
	if want := fmt.Sprint([]kmsg.TxnMetadataValueTopic{{Topic: "__consumer_offsets", Partitions: []int32{internaltopic.PartitionFor("my-group", 10)}},
		{Topic: "audit", Partitions: []int32{0}}, {Topic: "orders", Partitions: []int32{0, 2}}}); topics != want {
		t.Errorf("topics %s, want %s", topics, want)
	}
	if va.ProducerID != 7 || va.ProducerEpoch != 3 || va.TimeoutMillis != 60000 || va.State != kmsg.TransactionState(txn.Ongoing) ||
		va.StartTimestamp != 1000 || va.LastUpdateTimestamp != 1500 || got[0].ts != 1500 {
		t.Errorf("value %+v (timestamp %d)", va, got[0].ts)
	}
	if got[1].v.State != 4 || got[1].v.StartTimestamp != -1 || len(got[1].v.Topics) != 0 {
		t.Errorf("app-b %+v: want CompleteCommit (4), no start, no topics", got[1].v)
	}

	got = nil
	a2 := a
	a2.State, a2.UpdateMillis = txn.PrepareCommit, 2000
	x.Apply(feedMsg{changes: []txn.Change{{ID: "app-a", Metadata: &a2}, {ID: "app-b"}}}, 6000, out)
	if len(got) != 2 || got[0].v.State != 2 || !got[1].tomb || got[1].id != "app-b" || got[1].ts != 6000 {
		t.Fatalf("changes wrote %+v", got)
	}

	// A later snapshot (the feed broke): c appeared, a is unchanged and
	// not rewritten, a deleted id that came back is written.
	got = nil
	c := txn.Metadata{TransactionalID: "app-c", ProducerID: 9, State: txn.Empty}
	x.Apply(feedMsg{snapshot: []txn.Metadata{a2, c, b}, isSnap: true}, 7000, out)
	if ids := []string{got[0].id, got[1].id}; len(got) != 2 || !slices.Equal(ids, []string{"app-b", "app-c"}) || got[1].ts != 7000 {
		t.Fatalf("resnapshot wrote %+v", got)
	}
	got = nil
	x.Apply(feedMsg{snapshot: []txn.Metadata{c}, isSnap: true}, 8000, out)
	if len(got) != 2 || !got[0].tomb || !got[1].tomb {
		t.Fatalf("snapshot without a and b wrote %+v, want their tombstones", got)
	}

	got = nil
	x.State(9000, func(id string) bool { return id != "app-x" }, out)
	if len(got) != 1 || got[0].id != "app-c" || got[0].v.ProducerID != 9 {
		t.Fatalf("State wrote %+v", got)
	}
	if x.Empty() {
		t.Fatal("Empty with app-c in the mirror")
	}
}

// TestPollFeed: the file store's feed reports its records on start and
// after every change, deletes included.
func TestPollFeed(t *testing.T) {
	fs, err := txn.OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps := make(chan []txn.Metadata, 100)
	done := make(chan error, 1)
	f := &PollFeed{Store: fs, Version: fs.Version, Interval: time.Millisecond}
	go func() { done <- f.Follow(ctx, func(m []txn.Metadata) { snaps <- m }, nil) }()
	wait := func(what string, n int) []txn.Metadata {
		t.Helper()
		for deadline := time.After(10 * time.Second); ; {
			select {
			case m := <-snaps:
				if len(m) == n {
					return m
				}
			case <-deadline:
				t.Fatalf("%s: no snapshot of %d records", what, n)
			}
		}
	}
	wait("empty", 0)
	rev, err := fs.Put(ctx, txn.Metadata{TransactionalID: "a", State: txn.Empty}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := wait("put", 1); m[0].TransactionalID != "a" {
		t.Fatalf("snapshot %+v", m)
	}
	if err := fs.Delete(ctx, "a", rev); err != nil {
		t.Fatal(err)
	}
	wait("delete", 0)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
