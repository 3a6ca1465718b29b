package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
)

// ChunkNeed says which replicas still have to append one chunk.
type ChunkNeed struct {
	Topic      string
	Partition  int32
	LastOffset int64
	// Replicas are the followers that must fetch the chunk (the leader
	// itself already has it).
	Replicas []int32
}

// NeedsFor turns an object's pointers into its ChunkNeeds, given each
// partition's followers at upload time.
func NeedsFor(ptrs []Pointer, followers func(topic string, partition int32) []int32) []ChunkNeed {
	out := make([]ChunkNeed, len(ptrs))
	for i, p := range ptrs {
		out[i] = ChunkNeed{Topic: p.Topic, Partition: p.Partition, LastOffset: p.LastOffset, Replicas: append([]int32(nil), followers(p.Topic, p.Partition)...)}
	}
	return out
}

// Deletion reasons.
const (
	ReasonReplicated = "replicated" // every replica has every chunk, or it fell below the log start
	ReasonRetention  = "retention"  // older than the retention cap
)

// Deletion is an object the leader may delete.
type Deletion struct {
	Bucket, Key string
	Reason      string
}

// Tracker is the leader's deletion bookkeeping: per object, which
// (partition, replica) pairs still need which chunk. An object is
// deletable once, for every chunk, every listed replica's log end offset
// is past the chunk's last offset or the partition's log start is; or
// once it is older than the retention cap whatever its state. Safe for
// concurrent use.
type Tracker struct {
	retention time.Duration

	mu       sync.Mutex
	objects  map[objectID]*trackedObject
	leo      map[tp]map[int32]int64
	logStart map[tp]int64
	released map[tp]bool
}

type objectID struct{ bucket, key string }

type trackedObject struct {
	created time.Time
	chunks  []ChunkNeed
}

// NewTracker returns a tracker with the hard cap wal.retention.ms.
func NewTracker(retention time.Duration) *Tracker {
	return &Tracker{
		retention: retention,
		objects:   map[objectID]*trackedObject{},
		leo:       map[tp]map[int32]int64{},
		logStart:  map[tp]int64{},
		released:  map[tp]bool{},
	}
}

// Add starts tracking an uploaded object.
func (t *Tracker) Add(bucket, key string, created time.Time, needs []ChunkNeed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.objects[objectID{bucket, key}] = &trackedObject{created: created, chunks: needs}
	for _, n := range needs {
		delete(t.released, tp{n.Topic, n.Partition})
	}
}

// ReplicaProgress records a follower's log end offset (the next offset it
// will fetch), as reported on its fetch.
func (t *Tracker) ReplicaProgress(topic string, partition, replica int32, leo int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{topic, partition}
	m := t.leo[k]
	if m == nil {
		m = map[int32]int64{}
		t.leo[k] = m
	}
	if leo > m[replica] {
		m[replica] = leo
	}
}

// ResetReplica forgets a follower's progress, e.g. after it truncated.
func (t *Tracker) ResetReplica(topic string, partition, replica int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.leo[tp{topic, partition}], replica)
}

// LogStart records the partition's log start offset.
func (t *Tracker) LogStart(topic string, partition int32, start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{topic, partition}
	if start > t.logStart[k] {
		t.logStart[k] = start
	}
}

// Release says the broker no longer leads the partition (or it was
// deleted): its chunks need nothing more from this leader — a new leader
// serves its followers inline, not from our objects.
func (t *Tracker) Release(topic string, partition int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{topic, partition}
	t.released[k] = true
	delete(t.leo, k)
	delete(t.logStart, k)
}

func (t *Tracker) satisfiedLocked(c ChunkNeed) bool {
	k := tp{c.Topic, c.Partition}
	if t.released[k] || t.logStart[k] > c.LastOffset {
		return true
	}
	leos := t.leo[k]
	for _, r := range c.Replicas {
		if leos[r] <= c.LastOffset {
			return false
		}
	}
	return true
}

// Collect returns the objects that may be deleted now, oldest first, and
// stops tracking them. The caller deletes them and drops their pointers
// (PointerIndex.RemoveObject); if a delete fails it may Add the object
// again.
func (t *Tracker) Collect(now time.Time) []Deletion {
	t.mu.Lock()
	defer t.mu.Unlock()
	type cand struct {
		Deletion
		created time.Time
	}
	var out []cand
	for id, o := range t.objects {
		reason := ""
		if t.retention > 0 && now.Sub(o.created) >= t.retention {
			reason = ReasonRetention
		} else {
			reason = ReasonReplicated
			for _, c := range o.chunks {
				if !t.satisfiedLocked(c) {
					reason = ""
					break
				}
			}
		}
		if reason != "" {
			out = append(out, cand{Deletion{Bucket: id.bucket, Key: id.key, Reason: reason}, o.created})
			delete(t.objects, id)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.Before(out[j].created)
		}
		return out[i].Key < out[j].Key
	})
	dels := make([]Deletion, len(out))
	for i, c := range out {
		dels[i] = c.Deletion
	}
	return dels
}

// Len is the number of tracked objects.
func (t *Tracker) Len() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.objects) }

// SweepResult reports a Sweep.
type SweepResult struct {
	// Deleted objects, in key order.
	Deleted []string
	// Kept counts WAL objects younger than the cutoff.
	Kept int
	// Ignored are keys under the prefix that are not WAL object keys.
	Ignored []string
}

// Sweep deletes the WAL objects under prefix that are older than
// olderThan at now: the operator's safety net for objects whose uploader
// died. An object's age comes from the store's modification time, or
// from its header's created-at when the listing has none. Keys that are
// not WAL object keys are left alone. Errors on single objects do not stop
// the sweep; they are returned joined.
func Sweep(ctx context.Context, store objstore.Store, prefix string, olderThan time.Duration, now time.Time) (SweepResult, error) {
	var res SweepResult
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return res, fmt.Errorf("wal: sweep %s: %w", prefix, err)
	}
	var errs []error
	for _, o := range objs {
		if _, err := ParseKey(o.Key); err != nil {
			res.Ignored = append(res.Ignored, o.Key)
			continue
		}
		created := o.LastModified
		if created.IsZero() {
			h, err := ReadHeader(ctx, store, o.Key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			created = h.CreatedAt
		}
		if now.Sub(created) < olderThan {
			res.Kept++
			continue
		}
		if err := store.Delete(ctx, o.Key); err != nil {
			errs = append(errs, fmt.Errorf("wal: sweep: %w", err))
			continue
		}
		res.Deleted = append(res.Deleted, o.Key)
	}
	return res, errors.Join(errs...)
}

// ReadHeader reads and decodes only an object's header (two small ranged
// GETs).
func ReadHeader(ctx context.Context, store objstore.Store, key string) (Header, error) {
	fixed, err := store.Get(ctx, key, 0, MinHeaderRead)
	if err != nil {
		return Header{}, fmt.Errorf("wal: read header of %s: %w", key, err)
	}
	if _, err := HeaderTableSize(fixed); err != nil {
		return Header{}, fmt.Errorf("wal: read header of %s: %w", key, err)
	}
	hs := int64(binary.BigEndian.Uint32(fixed[8:]))
	b, err := store.Get(ctx, key, 0, hs)
	if err != nil {
		return Header{}, fmt.Errorf("wal: read header of %s: %w", key, err)
	}
	h, err := DecodeHeader(b)
	if err != nil {
		return Header{}, fmt.Errorf("wal: read header of %s: %w", key, err)
	}
	return h, nil
}

// ReadTable reads an object's header and chunk table with ranged GETs,
// without its data.
func ReadTable(ctx context.Context, store objstore.Store, key string) (Header, []ChunkInfo, error) {
	fixed, err := store.Get(ctx, key, 0, MinHeaderRead)
	if err != nil {
		return Header{}, nil, fmt.Errorf("wal: read table of %s: %w", key, err)
	}
	end, err := HeaderTableSize(fixed)
	if err != nil {
		return Header{}, nil, fmt.Errorf("wal: read table of %s: %w", key, err)
	}
	b, err := store.Get(ctx, key, 0, end)
	if err != nil {
		return Header{}, nil, fmt.Errorf("wal: read table of %s: %w", key, err)
	}
	h, chunks, err := DecodeTable(b, -1)
	if err != nil {
		return Header{}, nil, fmt.Errorf("wal: read table of %s: %w", key, err)
	}
	return h, chunks, nil
}
