package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestConsumerGroups: groups work in a cluster: each group is coordinated
// by one broker (FindCoordinator from any broker names it), offsets are
// committed to etcd, and a new member of the group resumes from them.
func TestConsumerGroups(t *testing.T) {
	c := brokertest.StartCluster(t, zones)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	createTopic(t, adm, "jobs", 3, nil)
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 60 {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "jobs", Value: fmt.Appendf(nil, "job-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(group string, n int) int {
		cl := newClient(t, c.Addrs(), kgo.ConsumerGroup(group), kgo.ConsumeTopics("jobs"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got := 0
		for got < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("group %s: consumed %d of %d", group, got, n)
			}
			got += fs.NumRecords()
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("group %s: commit: %v", group, err)
		}
		return got
	}
	for g := range 4 { // several groups, spread over the coordinators
		group := fmt.Sprintf("g%d", g)
		if n := consume(group, 60); n != 60 {
			t.Fatalf("group %s consumed %d", group, n)
		}
		lag, err := adm.Lag(context.Background(), group)
		if err != nil {
			t.Fatal(err)
		}
		if total := lag[group].Lag.Total(); total != 0 {
			t.Fatalf("group %s lag %d after committing everything", group, total)
		}
	}
}
