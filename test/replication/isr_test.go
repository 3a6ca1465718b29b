package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestISRShrinkAndExpand: a follower that stops fetching while its broker
// stays registered (a frozen process, SIGSTOP; the session timeout is long)
// leaves the ISR after replica.lag.time.max.ms through the leader's
// compare-and-swap, acks=all keeps succeeding with min.insync.replicas=2,
// and once the process resumes and catches up it rejoins the ISR.
func TestISRShrinkAndExpand(t *testing.T) {
	c := brokertest.StartProcessCluster(t, zones,
		brokertest.WithSetting("broker.session.timeout.ms", "60000"),
		brokertest.WithSetting("replica.lag.time.max.ms", "1000"))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two := "2"
	createTopic(t, adm, "isr", 1, map[string]*string{"min.insync.replicas": &two})
	isrOf := func() (int32, []int32) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, "isr")
		if err != nil {
			return -1, nil
		}
		p := md.Topics["isr"].Partitions[0]
		return p.Leader, p.ISR
	}
	waitFor(t, "a leader with a full ISR", 30*time.Second, func() bool { l, isr := isrOf(); return l > 0 && len(isr) == 3 })
	leader, isr := isrOf()
	var follower int32
	for _, r := range isr {
		if r != leader {
			follower = r
			break
		}
	}
	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "isr", Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(20)
	c.Processes[follower-1].Pause()
	resumed := false
	defer func() {
		if !resumed {
			c.Processes[follower-1].Resume()
		}
	}()
	// The first acks=all after the pause waits until the leader shrank
	// the ISR (it cannot complete before), then succeeds.
	produce(20)
	// (Metadata requests that kgo sends to the frozen broker time out, so
	// ask until one is answered.)
	waitFor(t, "metadata showing the ISR without the frozen follower", 30*time.Second, func() bool {
		_, isr := isrOf()
		return isr != nil && !slices.Contains(isr, follower) && len(isr) == 2
	})
	c.Processes[follower-1].Resume()
	resumed = true
	waitFor(t, "the resumed follower back in the ISR", 30*time.Second, func() bool {
		produce(1)
		_, isr := isrOf()
		return slices.Contains(isr, follower)
	})
}
