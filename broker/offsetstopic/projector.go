package offsetstopic

import (
	"cmp"
	"context"
	"reflect"
	"slices"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/internaltopic"
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
	DefaultPartitions        = 10
	DefaultReplicationFactor = 3
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
type Broker = internaltopic.Broker

// Produce appends one record batch to a partition of the offsets topic
// this broker leads, acks=all, and returns once it is acknowledged.
type Produce = internaltopic.Produce

// Config configures a Projector: the group store's feed, and the
// projector's settings; Topic.Name is set by New, and Topic.Partitions
// and Topic.ReplicationFactor (offsets.topic.num.partitions,
// offsets.topic.replication.factor) default to DefaultPartitions and
// DefaultReplicationFactor.
type Config struct {
	Feed Feed
	internaltopic.Config
}

// Projector writes the group store to the __consumer_offsets topic, in
// Kafka's record format, for the partitions of the topic this broker
// leads. See doc.go.
type Projector = internaltopic.Projector[feedMsg]

// New returns a projector; Run starts it.
func New(cfg Config) *Projector {
	c := cfg.Config
	c.Topic = Spec(c.Topic.Partitions, c.Topic.ReplicationFactor)
	return internaltopic.New(c, &groups{feed: cfg.Feed, mirror: map[string]*groupState{}})
}

// Spec is the offsets topic with partitions and replicationFactor, their
// defaults where they are not positive.
func Spec(partitions int32, replicationFactor int16) internaltopic.Spec {
	return internaltopic.Spec{Name: Topic, Partitions: partitions, ReplicationFactor: replicationFactor}.
		WithDefaults(DefaultPartitions, DefaultReplicationFactor)
}

// CreateTopic creates the offsets topic with partitions partitions and
// replicationFactor replicas (capped at the live brokers; 1 on a single
// broker), compacted. It exists already: nil.
func CreateTopic(ctx context.Context, b Broker, partitions int32, replicationFactor int16) error {
	return internaltopic.CreateTopic(ctx, b, Spec(partitions, replicationFactor))
}

// groups is the group store's projection: its mirror is the store's
// content as the feed reported it.
type groups struct {
	feed   Feed
	mirror map[string]*groupState
}

type groupState struct {
	offsets    map[group.TopicPartition]group.OffsetCommit
	membership *group.GroupMetadata
}

type feedMsg struct {
	snapshot *group.StoreSnapshot
	changes  []group.StoreChange
}

func (g *groups) Follow(ctx context.Context, emit func(feedMsg)) error {
	return g.feed.Follow(ctx,
		func(s group.StoreSnapshot) { emit(feedMsg{snapshot: &s}) },
		func(cs []group.StoreChange) { emit(feedMsg{changes: cs}) })
}

func (g *groups) Empty() bool { return len(g.mirror) == 0 }

// Apply updates the mirror and writes the records that change.
func (g *groups) Apply(m feedMsg, now int64, out func(string, *record.Record)) {
	if m.snapshot != nil {
		g.applySnapshot(m.snapshot, now, out)
		return
	}
	for _, c := range m.changes {
		gs := g.mirror[c.Group]
		if gs == nil {
			gs = &groupState{offsets: map[group.TopicPartition]group.OffsetCommit{}}
			g.mirror[c.Group] = gs
		}
		switch {
		case c.Offset != nil:
			tp := group.TopicPartition{Topic: c.Offset.Topic, Partition: c.Offset.Partition}
			gs.offsets[tp] = *c.Offset
			out(c.Group, offsetRecord(c.Group, tp, *c.Offset))
		case c.OffsetDeleted != nil:
			delete(gs.offsets, *c.OffsetDeleted)
			out(c.Group, internaltopic.Tombstone(offsetKey(c.Group, *c.OffsetDeleted), now))
		case c.Membership != nil:
			md := *c.Membership
			gs.membership = &md
			out(c.Group, groupRecord(c.Group, md, now))
		case c.MembershipDeleted:
			gs.membership = nil
			out(c.Group, internaltopic.Tombstone(groupKey(c.Group), now))
		}
		if len(gs.offsets) == 0 && gs.membership == nil {
			delete(g.mirror, c.Group)
		}
	}
}

// applySnapshot replaces the mirror and writes the difference: what
// changed while the feed was not followed.
func (g *groups) applySnapshot(s *group.StoreSnapshot, now int64, out func(string, *record.Record)) {
	next := map[string]*groupState{}
	state := func(id string) *groupState {
		gs := next[id]
		if gs == nil {
			gs = &groupState{offsets: map[group.TopicPartition]group.OffsetCommit{}}
			next[id] = gs
		}
		return gs
	}
	for id, cs := range s.Offsets {
		gs := state(id)
		for _, c := range cs {
			gs.offsets[group.TopicPartition{Topic: c.Topic, Partition: c.Partition}] = c
		}
	}
	for id, md := range s.Groups {
		state(id).membership = &md
	}
	for id, gs := range next {
		old := g.mirror[id]
		for tp, c := range gs.offsets {
			if old == nil || old.offsets[tp] != c {
				out(id, offsetRecord(id, tp, c))
			}
		}
		if gs.membership != nil && (old == nil || old.membership == nil || !reflect.DeepEqual(*old.membership, *gs.membership)) {
			out(id, groupRecord(id, *gs.membership, now))
		}
	}
	for id, old := range g.mirror {
		gs := next[id]
		for tp := range old.offsets {
			if _, ok := gs.offsetsOrNil()[tp]; !ok {
				out(id, internaltopic.Tombstone(offsetKey(id, tp), now))
			}
		}
		if old.membership != nil && (gs == nil || gs.membership == nil) {
			out(id, internaltopic.Tombstone(groupKey(id), now))
		}
	}
	g.mirror = next
}

func (gs *groupState) offsetsOrNil() map[group.TopicPartition]group.OffsetCommit {
	if gs == nil {
		return nil
	}
	return gs.offsets
}

// State writes the whole state of the groups want accepts: membership,
// then offsets, in a stable order.
func (g *groups) State(now int64, want func(string) bool, out func(string, *record.Record)) {
	for _, id := range internaltopic.SortedOwners(g.mirror, want) {
		gs := g.mirror[id]
		if gs.membership != nil {
			out(id, groupRecord(id, *gs.membership, now))
		}
		tps := make([]group.TopicPartition, 0, len(gs.offsets))
		for tp := range gs.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b group.TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		for _, tp := range tps {
			out(id, offsetRecord(id, tp, gs.offsets[tp]))
		}
	}
}

// offsetRecord is a commit's record; its timestamp (held in
// TimestampDelta until written) is the commit's.
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
