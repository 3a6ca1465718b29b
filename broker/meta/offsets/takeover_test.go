package offsets

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
)

// placement is a fake cluster view: which broker coordinates every group,
// and the ownership epoch that changes with it.
type placement struct {
	mu    sync.Mutex
	owner int
	epoch uint64
}

func (p *placement) move(to int) {
	p.mu.Lock()
	p.owner, p.epoch = to, p.epoch+1
	p.mu.Unlock()
}

func (p *placement) coordinator(t *testing.T, s *Store, self int) *group.Coordinator {
	t.Helper()
	c, err := group.New(context.Background(), group.Config{
		Store: s,
		Owns:  func(string) bool { p.mu.Lock(); defer p.mu.Unlock(); return p.owner == self },
		OwnershipEpoch: func() uint64 {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.epoch
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func commitOffset(t *testing.T, c *group.Coordinator, g string, offset int64) {
	t.Helper()
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, g, -1
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = "t"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, offset
	tp.Partitions = append(tp.Partitions, p)
	r.Topics = append(r.Topics, tp)
	if code := c.OffsetCommit(context.Background(), r).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit %d: %v", offset, kerr.ErrorForCode(code))
	}
}

func fetchOffset(t *testing.T, c *group.Coordinator, g string, stable bool) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, g, stable
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp := c.OffsetFetch(context.Background(), r)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestGroupTakeoverReadsStore: a broker that becomes a group's
// coordinator (its previous coordinator died) serves the offsets committed
// since it started, not the ones it loaded at start. Regression: brokers
// loaded every group once at start, so after a failover a consumer group
// resumed from stale offsets (or from its reset policy for a group created
// after the new coordinator started) and records were consumed twice.
func TestGroupTakeoverReadsStore(t *testing.T) {
	client := metatest.Start(t)
	ms, err := meta.New(client, "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := New(ms)
	p := &placement{owner: 1, epoch: 1}
	a := p.coordinator(t, s, 1)
	commitOffset(t, a, "old", 5)
	b := p.coordinator(t, s, 2) // started now: loads "old" at 5
	commitOffset(t, a, "old", 9)
	commitOffset(t, a, "new", 3) // created after b started

	// Transactional offsets pending at a when it dies.
	tr := kmsg.NewPtrTxnOffsetCommitRequest()
	tr.Version, tr.TransactionalID, tr.Group, tr.ProducerID, tr.Generation = 3, "tx", "new", 42, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "t"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 7
	tt.Partitions = append(tt.Partitions, tp)
	tr.Topics = append(tr.Topics, tt)
	if code := a.TxnOffsetCommit(context.Background(), tr).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}

	p.move(2) // a died; b coordinates every group now
	if off, _ := fetchOffset(t, b, "old", false); off != 9 {
		t.Fatalf("new coordinator serves offset %d of group old, want 9 (committed at the previous coordinator)", off)
	}
	if off, _ := fetchOffset(t, b, "new", false); off != 3 {
		t.Fatalf("new coordinator serves offset %d of group new, want 3", off)
	}
	if _, code := fetchOffset(t, b, "new", true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("stable fetch of a partition with pending transactional offsets: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	// The transaction's commit marker reaches the new coordinator.
	if err := b.CompleteTxn(context.Background(), 42, true); err != nil {
		t.Fatal(err)
	}
	if off, code := fetchOffset(t, b, "new", true); off != 7 || code != 0 {
		t.Fatalf("after the commit marker: offset %d, %v; want 7", off, kerr.ErrorForCode(code))
	}
}
