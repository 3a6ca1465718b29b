package internaltopic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/record"
)

const (
	maxRecordsPerProduce      = 500
	maxPendingRecords         = 20000
	defaultLeadershipInterval = time.Second
	produceTimeout            = 15 * time.Second
	createRetry               = 10 * time.Second
	defaultSegmentBytes       = "104857600"
)

// Projection is a store's side of a projected topic: a mirror of the
// store, kept by the store's change feed, that turns changes into the
// topic's records. The Projector calls Apply, State and Empty from one
// goroutine; Follow runs on another and hands messages over with emit.
type Projection[M any] interface {
	// Follow runs the store's change feed, passing every message to
	// emit (the first describes the whole store), until ctx ends (nil)
	// or the feed breaks (an error); it is then called again.
	Follow(ctx context.Context, emit func(M)) error
	// Apply updates the mirror with m and calls out with every record
	// the change writes, and the owner (group, transactional id) whose
	// partition holds it. now is the time in Unix millis.
	Apply(m M, now int64, out func(owner string, r *record.Record))
	// State calls out with the whole state of every owner in the mirror
	// that want accepts, owners in a stable order.
	State(now int64, want func(owner string) bool, out func(owner string, r *record.Record))
	// Empty reports the mirror holds nothing (the topic is not created
	// until it does).
	Empty() bool
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

// Produce appends one record batch to a partition of the topic this
// broker leads, acks=all, and returns once it is acknowledged.
type Produce func(ctx context.Context, partition int32, batch []byte) error

// Spec is a projected topic's name and the partitions and replication
// factor it is created with (the factor capped at the live brokers).
type Spec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
}

// WithDefaults returns s with partitions and replicationFactor where its
// own are not positive.
func (s Spec) WithDefaults(partitions int32, replicationFactor int16) Spec {
	if s.Partitions <= 0 {
		s.Partitions = partitions
	}
	if s.ReplicationFactor <= 0 {
		s.ReplicationFactor = replicationFactor
	}
	return s
}

// Config configures a Projector.
type Config struct {
	// Topic is the topic's name, and the partitions and replication
	// factor it is created with (the factor capped at the live
	// brokers).
	Topic   Spec
	Broker  Broker
	Produce Produce
	// Interval is how often leadership of the topic's partitions is
	// checked (default 1 s).
	Interval time.Duration
	Log      logr.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// SortedOwners returns the owners of m that want accepts, sorted (a
// Projection's State order).
func SortedOwners[V any](m map[string]V, want func(string) bool) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		if want(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Projector writes a Projection into its topic for the partitions of the
// topic this broker leads. See the package documentation.
//
// One goroutine (Run) owns every field below; the feed's messages reach
// it through msgs.
type Projector[M any] struct {
	cfg  Config
	proj Projection[M]
	msgs chan M

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

// New returns a projector of proj; Run starts it. Spec.Partitions and
// Spec.ReplicationFactor must be positive.
func New[M any](cfg Config, proj Projection[M]) *Projector[M] {
	if cfg.Interval <= 0 {
		cfg.Interval = defaultLeadershipInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Projector[M]{
		cfg:     cfg,
		proj:    proj,
		msgs:    make(chan M),
		synced:  map[int32]bool{},
		pending: map[int32][]record.Record{},
	}
}

// Run follows the feed and writes the topic until ctx ends.
func (p *Projector[M]) Run(ctx context.Context) {
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
			// partition for a burst of changes.
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
func (p *Projector[M]) follow(ctx context.Context) {
	delay := 100 * time.Millisecond
	emit := func(m M) {
		select {
		case p.msgs <- m:
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		err := p.proj.Follow(ctx, emit)
		if ctx.Err() != nil {
			return
		}
		p.cfg.Log.V(1).Info("store feed broke, following it afresh", "topic", p.cfg.Topic.Name, "reason", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func (p *Projector[M]) apply(m M) {
	p.proj.Apply(m, p.cfg.Now().UnixMilli(), p.queue)
}

// queue adds a record of owner if this broker writes owner's partition
// now.
func (p *Projector[M]) queue(owner string, r *record.Record) {
	if r == nil || p.partitions == 0 {
		return
	}
	part := PartitionFor(owner, p.partitions)
	if !p.synced[part] {
		return
	}
	if len(p.pending[part]) >= maxPendingRecords {
		// The partition cannot be written (its appends keep failing):
		// drop the backlog and write the whole state again once it can.
		p.cfg.Log.Info("internal topic partition fell behind; rewriting its whole state", "topic", p.cfg.Topic.Name, "partition", part)
		delete(p.pending, part)
		delete(p.synced, part)
		return
	}
	p.pending[part] = append(p.pending[part], *r)
}

// checkLeadership creates the topic when the store holds anything and it
// does not exist, and starts (with the whole state of their owners) or
// stops writing partitions as this broker gains or loses their
// leadership.
func (p *Projector[M]) checkLeadership(ctx context.Context) {
	name := p.cfg.Topic.Name
	t, ok := p.cfg.Broker.Topic(name)
	if !ok {
		p.partitions = 0
		clear(p.synced)
		clear(p.pending)
		if !p.proj.Empty() {
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
		v, ok := p.cfg.Broker.PartitionView(name, i)
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
	parts := p.partitions
	p.proj.State(p.cfg.Now().UnixMilli(),
		func(owner string) bool { return slices.Contains(gained, PartitionFor(owner, parts)) },
		p.queue)
	p.cfg.Log.V(1).Info("writing internal topic partitions", "topic", name, "partitions", gained)
}

func (p *Projector[M]) createTopic(ctx context.Context) {
	now := p.cfg.Now()
	if now.Before(p.nextCreate) {
		return
	}
	p.nextCreate = now.Add(createRetry)
	cctx, cancel := context.WithTimeout(ctx, produceTimeout)
	defer cancel()
	if err := CreateTopic(cctx, p.cfg.Broker, p.cfg.Topic); err != nil {
		p.cfg.Log.Error(err, "creating an internal topic failed; will retry", "topic", p.cfg.Topic.Name)
		return
	}
	p.cfg.Log.Info("internal topic created", "topic", p.cfg.Topic.Name)
}

// CreateTopic creates the internal topic s, compacted, its replication
// factor capped at the live brokers (1 on a single broker). It exists
// already: nil.
func CreateTopic(ctx context.Context, b Broker, s Spec) error {
	rf := int16(1)
	if b.Clustered() {
		rf = min(s.ReplicationFactor, int16(max(1, len(b.Brokers()))))
	}
	compact, segment := "compact", defaultSegmentBytes
	spec := broker.TopicSpec{
		Name: s.Name, Partitions: s.Partitions, ReplicationFactor: rf,
		Configs: map[string]*string{"cleanup.policy": &compact, "segment.bytes": &segment},
	}
	if _, err := b.CreateInternalTopic(ctx, spec); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	return nil
}

// flush appends the pending records of every partition, in batches. A
// partition whose append fails keeps its records for the next round.
func (p *Projector[M]) flush(ctx context.Context) {
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
				p.cfg.Log.V(1).Info("appending to an internal topic failed; will retry", "topic", p.cfg.Topic.Name, "partition", part, "records", len(recs), "reason", err.Error())
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

// write appends recs, whose TimestampDelta holds each record's absolute
// time in Unix millis until here, as one batch.
func (p *Projector[M]) write(ctx context.Context, part int32, recs []record.Record) error {
	base := recs[0].TimestampDelta
	for _, r := range recs {
		base = min(base, r.TimestampDelta)
	}
	batch := make([]record.Record, len(recs))
	for i, r := range recs {
		r.TimestampDelta -= base
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

// Tombstone is the record deleting key, at now (Unix millis).
func Tombstone(key []byte, now int64) *record.Record {
	return &record.Record{Key: key, TimestampDelta: now}
}
