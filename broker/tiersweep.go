package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
)

// The slow tier's orphan sweep as the TierManager runs it (package tier,
// sweep.go, says why it is safe): leaders sweep their partitions' objects
// that no manifest names, the controller broker (a standalone broker
// itself) sweeps the prefixes of deleted topics, all once older than the
// grace period (tier.orphan.grace.ms).

// DefaultOrphanGrace is tier.orphan.grace.ms's default: far above the
// longest an upload can take between its first object and its manifest.
const DefaultOrphanGrace = time.Hour

const (
	// sweepBudget bounds the objects one round deletes (one DeleteObjects
	// request on S3); the rest waits for the next round.
	sweepBudget = objstore.MaxDeleteBatch
	// sweepPartitionsPerRound bounds the partitions listed per round (a
	// LIST each).
	sweepPartitionsPerRound = 16
)

// SetOrphanGrace sets tier.orphan.grace.ms; 0 or less turns the sweep
// off. Call before Run.
func (m *TierManager) SetOrphanGrace(d time.Duration) {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	m.grace, m.sweepOff = d, d <= 0
}

// sweepEvery is how often one partition (and the deleted topics) is
// swept: an orphan must age by the grace anyway.
func (m *TierManager) sweepEvery() time.Duration {
	return max(m.graceOrDefault()/2, followerRefreshRounds*m.interval)
}

func (m *TierManager) graceOrDefault() time.Duration {
	if m.grace > 0 {
		return m.grace
	}
	return DefaultOrphanGrace
}

// sweepRound is the per-round state of the sweep (called under runMu).
type sweepRound struct {
	budget, partitions int
}

func (m *TierManager) newSweepRound() *sweepRound {
	return &sweepRound{budget: sweepBudget, partitions: sweepPartitionsPerRound}
}

// sweepLed sweeps a led partition's orphans when its turn has come.
func (m *TierManager) sweepLed(ctx context.Context, r *sweepRound, p *Partition, tp *tier.Partition, epoch int32) error {
	now := time.Now()
	if m.sweepOff || r.budget <= 0 || r.partitions <= 0 || now.Before(m.nextSweep[tp]) {
		return nil
	}
	r.partitions--
	res, err := tp.SweepOrphans(ctx, epoch, m.graceOrDefault(), r.budget)
	r.budget -= res.Deleted
	if err != nil {
		if errors.Is(err, tier.ErrFenced) {
			return nil
		}
		return fmt.Errorf("sweep %s-%d: %w", p.Topic, p.Index, err)
	}
	if res.More {
		m.nextSweep[tp] = now // the next round goes on
	} else {
		m.nextSweep[tp] = now.Add(m.sweepEvery())
	}
	return nil
}

// sweepDeletedTopics runs on the controller broker (or a standalone one)
// once per sweepEvery: the live topic IDs come from the cluster metadata,
// and only once it has been loaded.
func (m *TierManager) sweepDeletedTopics(ctx context.Context, r *sweepRound) error {
	now := time.Now()
	t := m.b.Tier()
	if m.sweepOff || t == nil || r.budget <= 0 || now.Before(m.nextTopicSweep) {
		return nil
	}
	live := map[string]bool{}
	if m.b.Replicas() != nil { // in a cluster
		c := m.b.Controller()
		st := m.b.ClusterState()
		if c == nil || !c.IsController() || st == nil || st.Revision == 0 || st.ClusterID == "" {
			return nil
		}
		for _, ti := range st.Topics {
			live[ti.ID.String()] = true
		}
	} else {
		for _, ti := range m.b.Topics() {
			live[meta.TopicID(ti.ID).String()] = true
		}
	}
	res, err := t.SweepDeletedTopics(ctx, m.b.ClusterID(), live, m.graceOrDefault(), r.budget)
	r.budget -= res.Deleted
	if res.More {
		m.nextTopicSweep = now
	} else {
		m.nextTopicSweep = now.Add(m.sweepEvery())
	}
	if errors.Is(err, tier.ErrNotOwner) {
		m.b.log.Info("not sweeping deleted topics' tier objects", "reason", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep deleted topics: %w", err)
	}
	return nil
}
