package offsetstopic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/record"
)

// Topic is the name of the offsets topic.
const Topic = group.OffsetsTopic

// Defaults of the offsets topic's configs (offsets.topic.*).
const (
	// DefaultPartitions is smaller than Kafka's 50: in Strata the topic
	// is a projection read by monitoring tools, not the store the group
	// coordinators are placed by, so it needs no write parallelism, and
	// every partition costs the replication path per-partition work.
	DefaultPartitions         = 10
	DefaultReplicationFactor  = 3
	defaultSegmentBytes       = "104857600"
	maxRecordsPerProduce      = 500
	maxPendingRecords         = 20000
	defaultLeadershipInterval = time.Second
	produceTimeout            = 15 * time.Second
	createRetry               = 10 * time.Second
)

// Feed follows the group store: snapshot receives the store's whole
// content, then changes every later change in the store's order (a feed
// may also report later states as further snapshots), until ctx ends
// (nil) or the feed breaks (an error); Follow is then called again and
// starts with a fresh snapshot.
type Feed interface {
	Follow(ctx context.Context, snapshot func(group.StoreSnapshot), changes func([]group.StoreChange)) error
}

// Broker is what the projector needs of the broker.
type Broker interface {
	NodeID() int32
	Topic(name string) (broker.TopicInfo, bool)
	PartitionView(topic string, index int32) (broker.PartitionView, bool)
	Brokers() []broker.BrokerInfo
	Clustered() bool
	CreateInternalTopic(ctx context.Context, spec broker.TopicSpec) (broker.TopicInfo, error)
}

// Produce appends one record batch to a partition of the offsets topic
// this broker leads, acks=all, and returns once it is acknowledged.
type Produce func(ctx context.Context, partition int32, batch []byte) error

// Config configures a Projector.
type Config struct {
	Feed    Feed
	Broker  Broker
	Produce Produce
	// Partitions and ReplicationFactor are used when the projector
	// creates the topic (offsets.topic.num.partitions,
	// offsets.topic.replication.factor; the factor is capped at the
	// number of live brokers).
	Partitions        int32
	ReplicationFactor int16
	// Interval is how often leadership of the topic's partitions is
	// checked (default 1 s).
	Interval time.Duration
	Log      logr.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Projector writes the group store to the __consumer_offsets topic, in
// Kafka's record format, for the partitions of the topic this broker
// leads. See doc.go.
//
// One goroutine (Run) owns every field below; the feed's callbacks hand
// their content to it through msgs.
type Projector struct {
	cfg  Config
	msgs chan feedMsg

	// mirror is the store's content as the feed reported it.
	mirror map[string]*groupState
	// partitions is the topic's partition count (0: no topic yet).
	partitions int32
	// synced holds the partitions this broker leads whose full state was
	// queued since leadership began; only those get incremental records.
	synced map[int32]bool
	// pending holds records waiting to be appended, per partition.
	pending map[int32][]record.Record
	// nextCreate is when creating the topic may be tried again after a
	// failure (a partition limit, no controller): not every second.
	nextCreate time.Time
}

type groupState struct {
	offsets    map[group.TopicPartition]group.OffsetCommit
	membership *group.GroupMetadata
}

type feedMsg struct {
	snapshot *group.StoreSnapshot
	changes  []group.StoreChange
}

// New returns a projector; Run starts it.
func New(cfg Config) *Projector {
	if cfg.Partitions <= 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.ReplicationFactor <= 0 {
		cfg.ReplicationFactor = DefaultReplicationFactor
	}
	if cfg.Interval <= 0 {
		cfg.Interval = defaultLeadershipInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Projector{
		cfg:     cfg,
		msgs:    make(chan feedMsg),
		mirror:  map[string]*groupState{},
		synced:  map[int32]bool{},
		pending: map[int32][]record.Record{},
	}
}

// Run follows the feed and writes the topic until ctx ends.
func (p *Projector) Run(ctx context.Context) {
	go p.follow(ctx)
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-p.msgs:
			p.apply(m)
			// Take what else is queued before writing: one produce per
			// partition for a burst of commits.
			for more := true; more; {
				select {
				case m := <-p.msgs:
					p.apply(m)
				default:
					more = false
				}
			}
		case <-tick.C:
			p.checkLeadership(ctx)
		}
		p.flush(ctx)
	}
}

// follow runs the feed, restarting it with a backoff when it breaks.
func (p *Projector) follow(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.cfg.Feed.Follow(ctx,
			func(s group.StoreSnapshot) { p.send(ctx, feedMsg{snapshot: &s}) },
			func(cs []group.StoreChange) { p.send(ctx, feedMsg{changes: cs}) })
		if ctx.Err() != nil {
			return
		}
		p.cfg.Log.V(1).Info("group store feed broke, following it afresh", "reason", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func (p *Projector) send(ctx context.Context, m feedMsg) {
	select {
	case p.msgs <- m:
	case <-ctx.Done():
	}
}

// apply updates the mirror and queues the records that change for the
// partitions this broker writes.
func (p *Projector) apply(m feedMsg) {
	now := p.cfg.Now().UnixMilli()
	if m.snapshot != nil {
		next := map[string]*groupState{}
		for g, cs := range m.snapshot.Offsets {
			gs := next[g]
			if gs == nil {
				gs = &groupState{offsets: map[group.TopicPartition]group.OffsetCommit{}}
				next[g] = gs
			}
			for _, c := range cs {
				gs.offsets[group.TopicPartition{Topic: c.Topic, Partition: c.Partition}] = c
			}
		}
		for g, md := range m.snapshot.Groups {
			gs := next[g]
			if gs == nil {
				gs = &groupState{offsets: map[group.TopicPartition]group.OffsetCommit{}}
				next[g] = gs
			}
			gs.membership = &md
		}
		// Write the difference: what changed while the feed was not
		// followed.
		for g, gs := range next {
			old := p.mirror[g]
			for tp, c := range gs.offsets {
				if old == nil || old.offsets[tp] != c {
					p.queue(g, offsetRecord(g, tp, c))
				}
			}
			if gs.membership != nil && (old == nil || old.membership == nil || !reflect.DeepEqual(*old.membership, *gs.membership)) {
				p.queue(g, groupRecord(g, *gs.membership, now))
			}
		}
		for g, old := range p.mirror {
			gs := next[g]
			for tp := range old.offsets {
				if _, ok := gs.offsetsOrNil()[tp]; !ok {
					p.queue(g, tombstone(offsetKey(g, tp), now))
				}
			}
			if old.membership != nil && (gs == nil || gs.membership == nil) {
				p.queue(g, tombstone(groupKey(g), now))
			}
		}
		p.mirror = next
		return
	}
	for _, c := range m.changes {
		gs := p.mirror[c.Group]
		if gs == nil {
			gs = &groupState{offsets: map[group.TopicPartition]group.OffsetCommit{}}
			p.mirror[c.Group] = gs
		}
		switch {
		case c.Offset != nil:
			tp := group.TopicPartition{Topic: c.Offset.Topic, Partition: c.Offset.Partition}
			gs.offsets[tp] = *c.Offset
			p.queue(c.Group, offsetRecord(c.Group, tp, *c.Offset))
		case c.OffsetDeleted != nil:
			delete(gs.offsets, *c.OffsetDeleted)
			p.queue(c.Group, tombstone(offsetKey(c.Group, *c.OffsetDeleted), now))
		case c.Membership != nil:
			md := *c.Membership
			gs.membership = &md
			p.queue(c.Group, groupRecord(c.Group, md, now))
		case c.MembershipDeleted:
			gs.membership = nil
			p.queue(c.Group, tombstone(groupKey(c.Group), now))
		}
		if len(gs.offsets) == 0 && gs.membership == nil {
			delete(p.mirror, c.Group)
		}
	}
}

func (gs *groupState) offsetsOrNil() map[group.TopicPartition]group.OffsetCommit {
	if gs == nil {
		return nil
	}
	return gs.offsets
}

// queue adds a record for group g if this broker writes g's partition now.
func (p *Projector) queue(g string, r *record.Record) {
	if r == nil || p.partitions == 0 {
		return
	}
	part := PartitionFor(g, p.partitions)
	if !p.synced[part] {
		return
	}
	if len(p.pending[part]) >= maxPendingRecords {
		// The partition cannot be written (its appends keep failing):
		// drop the backlog and write the whole state again once it can.
		p.cfg.Log.Info("offsets topic partition fell behind; rewriting its groups' whole state", "partition", part)
		delete(p.pending, part)
		delete(p.synced, part)
		return
	}
	p.pending[part] = append(p.pending[part], *r)
}

// checkLeadership creates the topic when the store has groups and it does
// not exist, and starts (with the whole state of their groups) or stops
// writing partitions as this broker gains or loses their leadership.
func (p *Projector) checkLeadership(ctx context.Context) {
	t, ok := p.cfg.Broker.Topic(Topic)
	if !ok {
		p.partitions = 0
		clear(p.synced)
		clear(p.pending)
		if len(p.mirror) > 0 {
			p.createTopic(ctx)
		}
		return
	}
	if t.Partitions != p.partitions {
		p.partitions = t.Partitions
		clear(p.synced)
		clear(p.pending)
	}
	self := p.cfg.Broker.NodeID()
	var gained []int32
	for i := range p.partitions {
		v, ok := p.cfg.Broker.PartitionView(Topic, i)
		leads := ok && v.Leader == self
		switch {
		case leads && !p.synced[i]:
			p.synced[i] = true
			gained = append(gained, i)
		case !leads && p.synced[i]:
			delete(p.synced, i)
			delete(p.pending, i)
		}
	}
	if len(gained) == 0 {
		return
	}
	now := p.cfg.Now().UnixMilli()
	groups := make([]string, 0, len(p.mirror))
	for g := range p.mirror {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		part := PartitionFor(g, p.partitions)
		if !slices.Contains(gained, part) {
			continue
		}
		gs := p.mirror[g]
		if gs.membership != nil {
			p.queue(g, groupRecord(g, *gs.membership, now))
		}
		tps := make([]group.TopicPartition, 0, len(gs.offsets))
		for tp := range gs.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b group.TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		for _, tp := range tps {
			p.queue(g, offsetRecord(g, tp, gs.offsets[tp]))
		}
	}
	p.cfg.Log.V(1).Info("writing offsets topic partitions", "partitions", gained)
}

func (p *Projector) createTopic(ctx context.Context) {
	now := p.cfg.Now()
	if now.Before(p.nextCreate) {
		return
	}
	p.nextCreate = now.Add(createRetry)
	cctx, cancel := context.WithTimeout(ctx, produceTimeout)
	defer cancel()
	if err := CreateTopic(cctx, p.cfg.Broker, p.cfg.Partitions, p.cfg.ReplicationFactor); err != nil {
		p.cfg.Log.Error(err, "creating the offsets topic failed; will retry", "topic", Topic)
		return
	}
	p.cfg.Log.Info("offsets topic created", "topic", Topic)
}

// CreateTopic creates the offsets topic with partitions partitions and
// replicationFactor replicas (capped at the live brokers; 1 on a single
// broker), compacted. It exists already: nil.
func CreateTopic(ctx context.Context, b Broker, partitions int32, replicationFactor int16) error {
	if partitions <= 0 {
		partitions = DefaultPartitions
	}
	if replicationFactor <= 0 {
		replicationFactor = DefaultReplicationFactor
	}
	rf := int16(1)
	if b.Clustered() {
		rf = min(replicationFactor, int16(max(1, len(b.Brokers()))))
	}
	compact, segment := "compact", defaultSegmentBytes
	spec := broker.TopicSpec{
		Name: Topic, Partitions: partitions, ReplicationFactor: rf,
		Configs: map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segment},
	}
	if _, err := b.CreateInternalTopic(ctx, spec); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	return nil
}

// flush appends the pending records of every partition, in batches. A
// partition whose append fails keeps its records for the next round.
func (p *Projector) flush(ctx context.Context) {
	parts := make([]int32, 0, len(p.pending))
	for part := range p.pending {
		parts = append(parts, part)
	}
	slices.Sort(parts)
	for _, part := range parts {
		recs := p.pending[part]
		for len(recs) > 0 && ctx.Err() == nil {
			n := min(len(recs), maxRecordsPerProduce)
			if err := p.write(ctx, part, recs[:n]); err != nil {
				p.cfg.Log.V(1).Info("appending to the offsets topic failed; will retry", "partition", part, "records", len(recs), "reason", err.Error())
				break
			}
			recs = recs[n:]
		}
		if len(recs) == 0 {
			delete(p.pending, part)
		} else {
			p.pending[part] = recs
		}
	}
}

func (p *Projector) write(ctx context.Context, part int32, recs []record.Record) error {
	base := recs[0].TimestampDelta
	for _, r := range recs {
		base = min(base, r.TimestampDelta)
	}
	batch := make([]record.Record, len(recs))
	for i, r := range recs {
		r.TimestampDelta -= base // records hold absolute times until here
		batch[i] = r
	}
	spec := record.DefaultSpec()
	spec.BaseTimestamp = base
	b, err := record.Build(spec, batch)
	if err != nil {
		return fmt.Errorf("encode batch: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, produceTimeout)
	defer cancel()
	return p.cfg.Produce(pctx, part, b)
}

// offsetRecord is a commit's record; its timestamp (held in
// TimestampDelta until write) is the commit's.
func offsetRecord(g string, tp group.TopicPartition, c group.OffsetCommit) *record.Record {
	return &record.Record{Key: offsetKey(g, tp), Value: offsetValue(c), TimestampDelta: c.CommitTimeMillis}
}

func groupRecord(g string, md group.GroupMetadata, now int64) *record.Record {
	v := groupValue(md, now)
	if v == nil {
		return nil
	}
	return &record.Record{Key: groupKey(g), Value: v, TimestampDelta: now}
}

func tombstone(key []byte, now int64) *record.Record {
	return &record.Record{Key: key, TimestampDelta: now}
}
