package meta

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A broker kept registered by Maintain comes back under a new epoch after
// its lease is lost, runs its controller again each time, and deregisters
// when stopped.
func TestMaintain(t *testing.T) {
	c := newTestCluster(t)
	ctx, cancel := context.WithCancel(c.ctx)
	var mu sync.Mutex
	var regs []*Registration
	done := make(chan error, 1)
	go func() {
		done <- c.store.Maintain(ctx, BrokerInfo{ID: 7, Zone: "a"}, 2*time.Second, func(ctx context.Context, reg *Registration) {
			mu.Lock()
			regs = append(regs, reg)
			mu.Unlock()
			err := c.store.NewController(reg, ControllerOptions{}).Run(ctx)
			if err != nil && !errors.Is(err, ErrSessionLost) {
				t.Errorf("controller: %v", err)
			}
		})
	}()
	first := c.waitFor("broker 7 controller", func(st *ClusterState) bool { return st.Live(7) && st.ControllerID == 7 })
	epoch := first.Brokers[7].Epoch
	mu.Lock()
	lease := regs[0].Lease()
	mu.Unlock()
	if _, err := c.client.Revoke(c.ctx, lease); err != nil {
		t.Fatal(err)
	}
	c.waitFor("broker 7 back under a new epoch, controller again", func(st *ClusterState) bool {
		return st.Live(7) && st.Brokers[7].Epoch > epoch && st.ControllerID == 7
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	c.waitFor("broker 7 deregistered", func(st *ClusterState) bool { return !st.Live(7) })
	mu.Lock()
	defer mu.Unlock()
	if len(regs) != 2 {
		t.Errorf("%d registrations, want 2", len(regs))
	}
}
