package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/strata-dev/strata/broker/placement"
)

// ControllerOptions tunes the controller.
type ControllerOptions struct {
	// UncleanLeaderElection is the cluster default for topics that do not set
	// unclean.leader.election.enable: elect a live out-of-sync replica when
	// no ISR member is alive (availability over durability). Default false.
	UncleanLeaderElection bool
	// AutoLeaderRebalance moves leadership back to a partition's preferred
	// replica as soon as it is alive and in the ISR again (Kafka's
	// auto.leader.rebalance.enable, acting on the event instead of a timer),
	// so that leaders return after a rolling restart. Default false.
	AutoLeaderRebalance bool
	// LeaderZone is the cluster default of the leader.placement.zone topic
	// config (leader.placement.policy=Zone): the controller keeps the
	// preferred leader (first replica) of every partition of a topic that
	// does not set the config in this zone, and elects it whenever it is
	// alive and in the ISR, whatever AutoLeaderRebalance says. "" (policy
	// Balanced): only topics that set the config are pinned.
	LeaderZone string
}

// Controller campaigns for the controller role with the broker's
// registration lease (so losing the broker loses the role) and, while it
// holds it, keeps every partition led by a live ISR member.
//
// Every write it makes is fenced: the transaction also compares its
// election key's create revision, so a controller that lost the role (its
// lease expired while it was paused) cannot overwrite its successor's work.
type Controller struct {
	store *Store
	reg   *Registration
	opts  ControllerOptions

	mu      sync.Mutex
	leading *leadership // nil when not the controller
}

// leadership is one term as controller: the election key and its create
// revision, captured when the term began (the Election forgets its key on
// Resign, and a late caller must still be fenced, not fail oddly).
type leadership struct {
	key   string
	rev   int64
	fence clientv3.Cmp
	// written is the highest etcd revision this term wrote. Snapshots
	// older than it predate the term's own writes: deciding on them again
	// would redo those writes and lose every compare.
	written atomic.Int64
}

// wrote records a revision the term wrote at.
func (l *leadership) wrote(rev int64) {
	for {
		cur := l.written.Load()
		if rev <= cur || l.written.CompareAndSwap(cur, rev) {
			return
		}
	}
}

func newLeadership(key string, rev int64) *leadership {
	return &leadership{key: key, rev: rev, fence: clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}
}

// NewController returns a controller for the registered broker. Run it.
func (s *Store) NewController(reg *Registration, opts ControllerOptions) *Controller {
	return &Controller{store: s, reg: reg, opts: opts}
}

// IsController reports whether this broker currently holds the role.
func (c *Controller) IsController() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading != nil
}

// Run campaigns and, when elected, controls until ctx ends (returns nil) or
// the registration's lease is lost (returns ErrSessionLost: register again
// and run a new Controller). Failures inside a term (lost fencing, a broken
// watch) end the term and Run campaigns again.
func (c *Controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("controller").WithValues("broker", c.reg.info.ID)
	ctx = logr.NewContext(ctx, log)
	// End the term's context when the session dies: Campaign and the watch
	// would otherwise not notice.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.reg.Done():
			cancel(ErrSessionLost)
		case <-ctx.Done():
		}
	}()
	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		election := concurrency.NewElection(c.reg.session, c.store.keys.controller())
		err := campaign(ctx, election, strconv.Itoa(int(c.reg.info.ID)))
		if err == nil {
			backoff.reset()
			err = c.lead(ctx, election)
		}
		if cause := context.Cause(ctx); cause != nil {
			if errors.Is(cause, ErrSessionLost) {
				log.Info("lost the etcd session; no longer campaigning")
				return ErrSessionLost
			}
			if !errors.Is(err, errCampaignAbandoned) {
				c.resign(election)
			}
			return nil
		}
		log.Error(err, "controller term ended; campaigning again")
		c.resign(election)
		if !backoff.wait(ctx) {
			continue // the loop head reports why ctx ended
		}
	}
}

// errCampaignAbandoned: campaign returned without waiting for etcd's
// Campaign, which still runs (see campaign).
var errCampaignAbandoned = errors.New("campaign abandoned: its context ended and etcd did not answer")

// campaignCleanupWait is how long campaign waits, once its context ended,
// for etcd's Campaign to clean up before abandoning it.
const campaignCleanupWait = 2 * time.Second

// campaign is election.Campaign, except that it returns once ctx has ended
// even when etcd cannot be reached. When its context ends while it waits
// for the role, etcd's Campaign withdraws the candidacy with the client's
// own context, which ends only when the client is closed: with etcd gone
// it blocks until then, and the broker's shutdown waited for it forever
// (the e2e journey's delete-cluster step, where the managed etcd goes
// before the brokers; goroutine dump: Controller.Run -> Election.Campaign
// -> Election.Resign -> txn.Commit). campaign gives that cleanup
// campaignCleanupWait, then returns errCampaignAbandoned and leaves it
// running: it ends when etcd answers or the client closes, and the
// candidacy key lives on the session's lease, which the registration
// revokes or lets expire. The election must not be used after
// errCampaignAbandoned.
func campaign(ctx context.Context, e *concurrency.Election, val string) error {
	done := make(chan error, 1)
	go func() { done <- e.Campaign(ctx, val) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(campaignCleanupWait)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errCampaignAbandoned
	}
}

// resign gives the role up promptly on a clean stop, so that another broker
// takes over without waiting for the lease to expire.
func (c *Controller) resign(election *concurrency.Election) {
	select {
	case <-c.reg.Done():
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = election.Resign(ctx) // best effort: the lease ends the role anyway
}

// lead runs one term: follow the metadata and reconcile every snapshot.
func (c *Controller) lead(ctx context.Context, election *concurrency.Election) error {
	log := logr.FromContextOrDiscard(ctx)
	term := newLeadership(election.Key(), election.Rev())
	c.mu.Lock()
	c.leading = term
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.leading = nil
		c.mu.Unlock()
	}()
	log.Info("became controller", "electionRevision", election.Rev())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var prev *ClusterState
	for st := range c.store.Watch(ctx) {
		if st.controllerKey != term.key {
			// The election key went without the session ending (deleted by
			// hand, or by a compaction of a lease we did not see expire).
			return fmt.Errorf("%w: controller is now broker %d", errFenced, st.ControllerID)
		}
		if st.Revision < term.written.Load() {
			continue // our own writes are not in this view yet
		}
		if err := c.reconcile(ctx, term, prev, st); err != nil {
			return err
		}
		prev = st
	}
	return ctx.Err()
}

// errFenced: a write failed because this broker no longer holds the role.
var errFenced = fmt.Errorf("%w: election key gone", ErrNotController)

// reconcile brings the partitions of st to the state controllerWants. When
// the broker set is the same as in prev, only topics whose partitions or
// config changed since prev are examined (snapshots share unchanged topics'
// partition lists, so a pointer comparison finds them); otherwise all. A
// lost compare-and-swap is skipped: the watch delivers the newer state and
// the next pass decides again.
func (c *Controller) reconcile(ctx context.Context, term *leadership, prev, st *ClusterState) error {
	// A change of the cluster-wide unclean.leader.election.enable
	// concerns every topic without its own value.
	full := prev == nil || !sameBrokers(prev, st) ||
		prev.BrokerConfigs[""][ConfigUncleanLeaderElection] != st.BrokerConfigs[""][ConfigUncleanLeaderElection]
	var writes []partitionWrite
	var clusterLoad map[int32]placement.Load
	load := func() map[int32]placement.Load {
		if clusterLoad == nil {
			clusterLoad = st.placementLoad("")
		}
		return clusterLoad
	}
	for _, topic := range slices.Sorted(maps.Keys(st.parts)) {
		view := st.parts[topic]
		if !full && prev.parts[topic] == view && prev.topicRevs[topic] == st.topicRevs[topic] {
			continue
		}
		unclean := c.unclean(st, topic)
		zone := st.Topics[topic].LeaderZone(c.opts.LeaderZone)
		for p, cur := range view.states {
			if cur.Replicas == nil {
				continue
			}
			next, changed := controllerWants(cur, st.Brokers, unclean)
			if !changed && zone != "" && !cur.Reassigning() {
				next, changed = pinLeaderZone(ctx, TopicPartition{topic, int32(p)}, cur, st, zone, load)
			}
			if zone != "" || (!changed && c.opts.AutoLeaderRebalance) {
				// A pinned topic's preferred leader leads as soon as it
				// can: after a reorder above, and after a failover once it
				// is back in the ISR.
				if moved, err := electPreferred(next, st.Brokers); err == nil {
					next, changed = stampLeader(cur, moved, st.Brokers), true
				}
			}
			if changed {
				writes = append(writes, partitionWrite{tp: TopicPartition{topic, int32(p)}, rev: view.revs[p], cur: cur, next: next})
			}
		}
	}
	_, err := c.store.writePartitionStates(ctx, term, writes)
	return err
}

// pinLeaderZone is the controller's leader-zone decision for one partition
// of a topic pinned to zone (placement.LeaderZoneTarget): when a replica
// sits in zone it becomes the first replica (metadata only, partition epoch
// +1); otherwise a reassignment starts that brings a broker of zone in as the
// first replica. The preferred election that follows moves the leader.
func pinLeaderZone(ctx context.Context, tp TopicPartition, cur PartitionState, st *ClusterState, zone string, load func() map[int32]placement.Load) (PartitionState, bool) {
	target, changed := placement.LeaderZoneTarget(st.placementBrokers(), cur.Replicas, zone, load)
	if !changed {
		return cur, false
	}
	if sameSet(target, cur.Replicas) {
		next := cur.Clone()
		next.Replicas = target
		next.PartitionEpoch++
		return next, true
	}
	next, err := startReassignment(cur, target, st.Live)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "cannot move a replica into the leader zone", "partition", tp.String(), "zone", zone, "target", target)
		return cur, false
	}
	return next, true
}

func sameSet(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id int32) bool { return !slices.Contains(b, id) })
}

// partitionWrite is one controller decision: cur (at etcd revision rev)
// becomes next.
type partitionWrite struct {
	tp        TopicPartition
	rev       int64
	cur, next PartitionState
}

// writePartitionStates applies the controller's decisions in batches, one
// fenced transaction (and one metadata version) per batch, so that a broker
// loss touching thousands of partitions takes tens of round trips, not
// thousands. A batch whose compare fails because one partition changed
// meanwhile is retried partition by partition; the changed ones are left to
// the next snapshot.
// It reports which partitions were written.
func (s *Store) writePartitionStates(ctx context.Context, term *leadership, writes []partitionWrite) (map[TopicPartition]bool, error) {
	applied := make(map[TopicPartition]bool, len(writes))
	log := logr.FromContextOrDiscard(ctx)
	done := func(w partitionWrite) {
		applied[w.tp] = true
		log.Info("partition state changed", "partition", w.tp.String(), "change", describe(w.cur, w.next),
			"leader", w.next.Leader, "leaderEpoch", w.next.LeaderEpoch, "isr", w.next.ISR)
	}
	batch := max(s.maxTxnOps-2, 1) // room for the fence and the version bump
	for len(writes) > 0 {
		n := min(len(writes), batch)
		chunk := writes[:n]
		writes = writes[n:]
		if n > 1 {
			cmps := []clientv3.Cmp{term.fence}
			ops := make([]clientv3.Op, 0, n)
			for _, w := range chunk {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.keys.partition(w.tp)), "=", w.rev))
				ops = append(ops, clientv3.OpPut(s.keys.partition(w.tp), encode(w.next)))
			}
			resp, err := s.commit(ctx, fmt.Sprintf("controller: %d partitions, first %s: %s", n, chunk[0].tp, describe(chunk[0].cur, chunk[0].next)),
				cmps, ops, clientv3.OpGet(term.key))
			if err != nil {
				return applied, err
			}
			if resp.Succeeded {
				term.wrote(resp.Header.Revision)
				for _, w := range chunk {
					done(w)
				}
				continue
			}
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != term.rev {
				return applied, errFenced
			}
		}
		for _, w := range chunk {
			ok, err := s.casPartition(ctx, term, w.tp, w.rev, w.next, "controller: "+describe(w.cur, w.next))
			if err != nil {
				return applied, err
			}
			if ok {
				done(w)
			}
		}
	}
	return applied, nil
}

// sameBrokers reports whether a and b have the same registrations (a broker
// that re-registered in between has a new epoch) in the same state (a
// broker entering controlled shutdown needs its leaderships moved).
func sameBrokers(a, b *ClusterState) bool {
	if len(a.Brokers) != len(b.Brokers) {
		return false
	}
	for id, x := range a.Brokers {
		if y, ok := b.Brokers[id]; !ok || x.Epoch != y.Epoch || x.ShuttingDown != y.ShuttingDown {
			return false
		}
	}
	return true
}

func (c *Controller) unclean(st *ClusterState, topic string) bool {
	if v, ok := st.Topics[topic].Config[ConfigUncleanLeaderElection]; ok {
		b, err := strconv.ParseBool(v)
		return err == nil && b
	}
	// The cluster-wide dynamic default (kafka-configs --entity-default
	// --entity-type brokers) wins over the controller's config file.
	if v, ok := st.BrokerConfigs[""][ConfigUncleanLeaderElection]; ok {
		b, err := strconv.ParseBool(v)
		return err == nil && b
	}
	return c.opts.UncleanLeaderElection
}

func describe(cur, next PartitionState) string {
	switch {
	case next.Leader == NoLeader && cur.Leader != NoLeader:
		return fmt.Sprintf("offline (leader %d lost, no live ISR member in %v)", cur.Leader, cur.ISR)
	case next.Leader != cur.Leader:
		return fmt.Sprintf("leader %d -> %d", cur.Leader, next.Leader)
	case cur.Reassigning() && !next.Reassigning():
		return fmt.Sprintf("reassignment done, replicas %v", next.Replicas)
	case !slices.Equal(cur.Replicas, next.Replicas) && !next.Reassigning() && sameSet(cur.Replicas, next.Replicas):
		return fmt.Sprintf("preferred replica order %v -> %v", cur.Replicas, next.Replicas)
	case !slices.Equal(cur.Replicas, next.Replicas):
		return fmt.Sprintf("reassigning %v -> %v (adding %v, removing %v)", cur.Replicas, next.Replicas, next.AddingReplicas, next.RemovingReplicas)
	default:
		return fmt.Sprintf("isr %v -> %v", cur.ISR, next.ISR)
	}
}

// casPartition writes next if the partition's ModRevision is still rev and
// the term's fence holds. It reports false when the partition changed; a
// lost fence is errFenced.
func (s *Store) casPartition(ctx context.Context, term *leadership, tp TopicPartition, rev int64, next PartitionState, reason string) (bool, error) {
	resp, err := s.commit(ctx, reason,
		[]clientv3.Cmp{term.fence, clientv3.Compare(clientv3.ModRevision(s.keys.partition(tp)), "=", rev)},
		[]clientv3.Op{clientv3.OpPut(s.keys.partition(tp), encode(next))},
		clientv3.OpGet(term.key))
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		term.wrote(resp.Header.Revision)
		return true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || kvs[0].CreateRevision != term.rev {
		return false, errFenced
	}
	return false, nil
}

// PreferredLeaderElection moves leadership of the given partitions (all
// partitions when nil) to their preferred replica where it is alive, in the
// ISR and not already leading: Kafka's ElectLeaders with type PREFERRED.
// The per-partition result is nil (moved), ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrUnknownTopic or ErrStaleState. The
// call fails with ErrNotController unless this broker holds the role.
func (c *Controller) PreferredLeaderElection(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]error, error) {
	return c.eachPartition(ctx, partitions, "preferred leader election", func(st *ClusterState, _ TopicPartition, cur PartitionState) (PartitionState, error) {
		return electPreferred(cur, st.Brokers)
	})
}

// UncleanLeaderElection is ElectLeaders with type UNCLEAN for the given
// partitions (all when nil): a partition without a live ISR member gets a
// live out-of-sync replica as leader. Results as PreferredLeaderElection, plus
// ErrEligibleLeadersNotAvailable.
func (c *Controller) UncleanLeaderElection(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]error, error) {
	return c.eachPartition(ctx, partitions, "unclean leader election", func(st *ClusterState, _ TopicPartition, cur PartitionState) (PartitionState, error) {
		return uncleanLeader(cur, st.Live)
	})
}

// eachPartition applies decide to each partition (all when nil) with a
// fenced compare-and-swap, retrying partitions that changed meanwhile.
func (c *Controller) eachPartition(ctx context.Context, partitions []TopicPartition, what string,
	decide func(st *ClusterState, tp TopicPartition, cur PartitionState) (PartitionState, error)) (map[TopicPartition]error, error) {
	c.mu.Lock()
	term := c.leading
	c.mu.Unlock()
	if term == nil {
		return nil, ErrNotController
	}
	results := make(map[TopicPartition]error, len(partitions))
	for attempt := 0; attempt < casAttempts; attempt++ {
		st, err := c.store.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		todo := partitions
		if todo == nil {
			todo = st.SortedPartitions()
		}
		var writes []partitionWrite
		for _, tp := range todo {
			if err, done := results[tp]; done && !errors.Is(err, ErrStaleState) {
				continue
			}
			cur, rev, ok := st.partition(tp)
			if !ok {
				results[tp] = fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
				continue
			}
			next, err := decide(st, tp, cur)
			if err != nil {
				results[tp] = err
				continue
			}
			writes = append(writes, partitionWrite{tp: tp, rev: rev, cur: cur, next: stampLeader(cur, next, st.Brokers)})
		}
		applied, err := c.store.writePartitionStates(ctx, term, writes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var retry []TopicPartition
		for _, w := range writes {
			if applied[w.tp] {
				results[w.tp] = nil
				continue
			}
			results[w.tp] = fmt.Errorf("%w: %s changed during the %s", ErrStaleState, w.tp, what)
			retry = append(retry, w.tp)
		}
		if len(retry) == 0 {
			break
		}
		partitions = retry
	}
	return results, nil
}

// AlterPartitionReassignments starts, replaces or (nil target) cancels
// reassignments: Kafka's AlterPartitionReassignments. Each partition first
// gets the union of old and target replicas; the controller completes the
// move when every new replica is in the ISR. The per-partition result is
// nil, ErrUnknownTopic, ErrInvalidReplicaAssignment (a new replica on a
// cordoned broker among them),
// ErrNoReassignmentInProgress or ErrStaleState. Fails with ErrNotController
// unless this broker holds the role.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, targets map[TopicPartition][]int32) (map[TopicPartition]error, error) {
	if len(targets) == 0 {
		return map[TopicPartition]error{}, nil // eachPartition reads nil as "all partitions"
	}
	return c.eachPartition(ctx, slices.Collect(maps.Keys(targets)), "reassignment", func(st *ClusterState, tp TopicPartition, cur PartitionState) (PartitionState, error) {
		if err := st.checkNotCordoned(targets[tp], originalReplicas(cur)); err != nil {
			return cur, err
		}
		return startReassignment(cur, targets[tp], st.Live)
	})
}
