package chaos

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/internaltopic"
	"github.com/strata-dev/strata/broker/offsetstopic"
)

// The group's offsets as __consumer_offsets holds them: the brokers write
// a projection of the group store there, in Kafka's record format, through
// the leaders of the topic's partitions (broker/offsetstopic). Under
// faults its leaders move and its writers' watches break; after the
// cluster healed it must hold exactly the offsets OffsetFetch answers.

// groupProjected reads the group's committed offsets back from
// __consumer_offsets until they equal the final ones (groupFinal) or
// finalReadBound passes, and puts the last read into the history: per
// partition of either, the offset read, -1 when it has none.
func (w *workloads) groupProjected(ctx context.Context) {
	if len(w.groups.Final) == 0 {
		return // nothing committed, nothing to compare
	}
	ctx, cancel := context.WithTimeout(ctx, finalReadBound)
	defer cancel()
	var got map[TP]int64
	for {
		// A read cut short by the bound keeps the last whole one.
		g, err := w.readProjection(ctx)
		if err == nil {
			got = g
			if maps.Equal(got, w.groups.Final) {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		wait(ctx, time.Second)
	}
	at := w.since()
	w.groups.Projected, w.groups.ProjectedS = map[TP]int64{}, at
	for tp := range w.groups.Final {
		w.groups.Projected[tp] = -1
	}
	maps.Copy(w.groups.Projected, got)
	for _, tp := range sortedTPs(w.groups.Projected) {
		w.hist.write(groupProjectedEvent(tp, w.groups.Projected[tp], at))
	}
}

// readProjection reads the group's partition of __consumer_offsets from
// its start to its end and returns the latest offset commit per partition
// of the group (tombstones remove them).
func (w *workloads) readProjection(ctx context.Context) (map[TP]int64, error) {
	ends, err := w.internalTopicEnds(ctx, offsetstopic.Topic, []string{groupName})
	if err != nil {
		return nil, err
	}
	out := map[TP]int64{}
	if ends.ends[TP{offsetstopic.Topic, offsetstopic.PartitionFor(groupName, ends.partitions)}] == 0 {
		return out, nil
	}
	var decodeErr error
	complete, err := w.readAll(ctx, offsetstopic.Topic, "chaos-offsets-topic", ends.ends, func(r *kgo.Record) {
		if len(r.Key) < 2 || r.Key[0] != 0 || r.Key[1] > 1 {
			return // group membership
		}
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			decodeErr = fmt.Errorf("offset %d: key: %w", r.Offset, err)
			return
		}
		if k.Group != groupName {
			return
		}
		tp := TP{k.Topic, k.Partition}
		if r.Value == nil {
			delete(out, tp)
			return
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			decodeErr = fmt.Errorf("offset %d: value: %w", r.Offset, err)
			return
		}
		out[tp] = v.Offset
	})
	switch {
	case err != nil:
		return nil, err
	case decodeErr != nil:
		return nil, decodeErr
	case !complete:
		return nil, fmt.Errorf("%s: read did not reach %v", offsetstopic.Topic, ends.ends)
	}
	return out, nil
}

func groupProjectedEvent(tp TP, offset int64, at float64) Event {
	return Event{T: at, Op: OpGroupProjected, Topic: tp.Topic, Partition: tp.Partition, Offset: offset}
}

// internalEnds are the end offsets of the partitions of an internal topic
// (of partitions) that hold some owners' records.
type internalEnds struct {
	partitions int32
	ends       map[TP]int64
}

// internalTopicEnds lists topic and returns the end offsets of the
// partitions holding owners (groups, transactional ids) in it, partitioned
// as Kafka partitions them.
func (w *workloads) internalTopicEnds(ctx context.Context, topic string, owners []string) (internalEnds, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	td, err := w.c.adm.ListTopicsWithInternal(rctx, topic)
	cancel()
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return internalEnds{}, fmt.Errorf("%s: %w", topic, err)
	}
	n := int32(len(td[topic].Partitions))
	rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	lo, err := w.c.adm.ListEndOffsets(rctx, topic)
	cancel()
	if err != nil {
		return internalEnds{}, err
	}
	out := internalEnds{partitions: n, ends: map[TP]int64{}}
	for _, o := range owners {
		p := internaltopic.PartitionFor(o, n)
		end, ok := lo.Lookup(topic, p)
		if !ok || end.Err != nil {
			return internalEnds{}, fmt.Errorf("%s/%d: end offset: %v", topic, p, end.Err)
		}
		out.ends[TP{topic, p}] = end.Offset
	}
	return out, nil
}
