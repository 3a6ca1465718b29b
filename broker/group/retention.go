package group

import (
	"context"
)

// scheduleRetention arms the next offsets retention sweep. Callers hold
// c.mu.
func (c *Coordinator) scheduleRetention() {
	seq := c.retention.seq
	c.retention.t = c.clock.AfterFunc(c.cfg.RetentionCheckInterval, func() {
		c.mu.Lock()
		if c.closed || c.retention.seq != seq {
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.ExpireOffsets(context.Background())
		c.mu.Lock()
		if !c.closed && c.retention.seq == seq {
			c.retention.seq++
			c.scheduleRetention()
		}
		c.mu.Unlock()
	})
}

// ExpireOffsets applies offsets.retention.minutes once (it also runs every
// RetentionCheckInterval): groups Empty for longer than the retention lose
// their offsets and are deleted; in groups that never used group
// management (no protocol type) each offset expires on its own, counted
// from its commit. Groups with members keep their offsets. It returns the
// number of offsets removed.
func (c *Coordinator) ExpireOffsets(ctx context.Context) int {
	if c.cfg.OffsetsRetention <= 0 {
		return 0
	}
	now := c.clock.Now()
	cutoff := now.Add(-c.cfg.OffsetsRetention).UnixMilli()
	removed := 0
	var drop []string
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		if g.state != stateEmpty || len(g.pending) > 0 {
			g.mu.Unlock()
			continue
		}
		var expired []TopicPartition
		wholeGroup := g.protocolType != "" && now.Sub(g.emptySince) >= c.cfg.OffsetsRetention
		for tp, oc := range g.offsets {
			if wholeGroup || (g.protocolType == "" && oc.CommitTimeMillis <= cutoff) {
				expired = append(expired, tp)
			}
		}
		if len(expired) > 0 {
			if err := c.store.DeleteOffsets(ctx, g.id, expired); err != nil {
				c.log.Error(err, "expiring offsets failed", "group", g.id)
				g.storeFailed(err)
				g.mu.Unlock()
				continue
			}
			for _, tp := range expired {
				delete(g.offsets, tp)
			}
			removed += len(expired)
		}
		if len(g.offsets) == 0 && (g.protocolType == "" || wholeGroup) {
			drop = append(drop, g.id)
		}
		g.mu.Unlock()
	}
	for _, id := range drop {
		c.dropExpired(ctx, id)
	}
	if removed > 0 || len(drop) > 0 {
		c.log.Info("expired committed offsets", "offsets", removed, "groups", len(drop), "retention", c.cfg.OffsetsRetention.String())
	}
	return removed
}

// dropExpired deletes a group whose offsets all expired, if it is still
// empty and unused.
func (c *Coordinator) dropExpired(ctx context.Context, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil || c.closed {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != stateEmpty || len(g.members) > 0 || (g.consumer != nil && len(g.consumer.members) > 0) || len(g.pending) > 0 || len(g.offsets) > 0 || len(g.txnOffsets) > 0 {
		return
	}
	if _, ok := c.store.(MembershipStore); ok || g.generation > 0 {
		// Drop the stored membership record too.
		if err := c.store.DeleteGroup(ctx, id); err != nil {
			c.log.Error(err, "deleting expired group failed", "group", id)
			g.storeFailed(err)
			return
		}
	}
	g.shutdown()
	delete(c.groups, id)
}
