package txntopic

import (
	"context"
	"reflect"
	"time"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/txn"
)

// Topic is the name of the transaction state topic.
const Topic = "__transaction_state"

// Defaults of the topic's configs (transaction.state.log.*).
const (
	// DefaultPartitions is smaller than Kafka's 50 for the reason
	// offsetstopic.DefaultPartitions is: the topic is a projection read
	// by tools, not the coordinators' store.
	DefaultPartitions        = 10
	DefaultReplicationFactor = 3
)

// Feed follows the transaction store: snapshot receives every record,
// then changes every later change in the store's order (a feed may also
// report later states as further snapshots), until ctx ends (nil) or the
// feed breaks (an error); Follow is then called again and starts with a
// fresh snapshot.
type Feed interface {
	Follow(ctx context.Context, snapshot func([]txn.Metadata), changes func([]txn.Change)) error
}

// Config configures a Projector: the transaction store's feed, and the
// projector's settings; Topic.Name is set by New, and Topic.Partitions
// and Topic.ReplicationFactor (transaction.state.log.num.partitions,
// transaction.state.log.replication.factor) default to DefaultPartitions
// and DefaultReplicationFactor.
type Config struct {
	Feed Feed
	// OffsetsPartitions is the partition count of __consumer_offsets,
	// used to name a group's partition in a transaction's record when
	// that topic does not exist yet.
	OffsetsPartitions int32
	internaltopic.Config
}

// Projector writes the transaction store to __transaction_state.
type Projector = internaltopic.Projector[feedMsg]

// New returns a projector; Run starts it.
func New(cfg Config) *Projector {
	c := cfg.Config
	c.Topic = Spec(c.Topic.Partitions, c.Topic.ReplicationFactor)
	offsetsPartitions := func() int32 {
		if t, ok := c.Broker.Topic(group.OffsetsTopic); ok {
			return t.Partitions
		}
		return cfg.OffsetsPartitions
	}
	return internaltopic.New(c, &txns{feed: cfg.Feed, mirror: map[string]txn.Metadata{}, offsetsPartitions: offsetsPartitions})
}

// Spec is the topic with partitions and replicationFactor, their defaults
// where they are not positive.
func Spec(partitions int32, replicationFactor int16) internaltopic.Spec {
	return internaltopic.Spec{Name: Topic, Partitions: partitions, ReplicationFactor: replicationFactor}.
		WithDefaults(DefaultPartitions, DefaultReplicationFactor)
}

// txns is the transaction store's projection.
type txns struct {
	feed              Feed
	mirror            map[string]txn.Metadata
	offsetsPartitions func() int32
}

type feedMsg struct {
	snapshot []txn.Metadata
	isSnap   bool
	changes  []txn.Change
}

func (x *txns) Follow(ctx context.Context, emit func(feedMsg)) error {
	return x.feed.Follow(ctx,
		func(s []txn.Metadata) { emit(feedMsg{snapshot: s, isSnap: true}) },
		func(cs []txn.Change) { emit(feedMsg{changes: cs}) })
}

func (x *txns) Empty() bool { return len(x.mirror) == 0 }

func (x *txns) Apply(m feedMsg, now int64, out func(string, *record.Record)) {
	if m.isSnap {
		next := make(map[string]txn.Metadata, len(m.snapshot))
		for _, md := range m.snapshot {
			next[md.TransactionalID] = md
		}
		for _, id := range internaltopic.SortedOwners(next, func(string) bool { return true }) {
			if old, ok := x.mirror[id]; !ok || !reflect.DeepEqual(old, next[id]) {
				out(id, x.record(next[id], now))
			}
		}
		for id := range x.mirror {
			if _, ok := next[id]; !ok {
				out(id, internaltopic.Tombstone(key(id), now))
			}
		}
		x.mirror = next
		return
	}
	for _, c := range m.changes {
		if c.Metadata == nil {
			delete(x.mirror, c.ID)
			out(c.ID, internaltopic.Tombstone(key(c.ID), now))
			continue
		}
		x.mirror[c.ID] = *c.Metadata
		out(c.ID, x.record(*c.Metadata, now))
	}
}

func (x *txns) State(now int64, want func(string) bool, out func(string, *record.Record)) {
	for _, id := range internaltopic.SortedOwners(x.mirror, want) {
		out(id, x.record(x.mirror[id], now))
	}
}

// record is md's record, timestamped with its last update.
func (x *txns) record(md txn.Metadata, now int64) *record.Record {
	ts := md.UpdateMillis
	if ts <= 0 {
		ts = now
	}
	return &record.Record{Key: key(md.TransactionalID), Value: value(md, x.offsetsPartitions(), group.OffsetsTopic), TimestampDelta: ts}
}

// PollFeed is the Feed of a transaction store without change
// notifications (a single broker's FileStore): it reads every record
// whenever Version changed, at most every Interval (default 200 ms) and
// at least every FullInterval (default 30 s), and reports each read as a
// snapshot.
type PollFeed struct {
	Store                  txn.Store
	Version                func() int64
	Interval, FullInterval time.Duration
}

// Follow implements Feed.
func (f *PollFeed) Follow(ctx context.Context, snapshot func([]txn.Metadata), _ func([]txn.Change)) error {
	return internaltopic.Poll(ctx, f.Interval, f.FullInterval, f.Version, func() error {
		recs, err := f.Store.List(ctx)
		if err != nil {
			return err
		}
		mds := make([]txn.Metadata, len(recs))
		for i, r := range recs {
			mds[i] = r.Metadata
		}
		snapshot(mds)
		return nil
	})
}
