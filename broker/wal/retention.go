package wal

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
)

// ChunkNeed says which replicas still have to append one chunk.
type ChunkNeed struct {
	Topic     string
	Partition int32
	// LeaderEpoch is the chunk's leader epoch: a chunk is tracked only if
	// it belongs to the leadership the tracker was told of (Lead, the
	// epochs of this broker's uninterrupted leadership).
	LeaderEpoch int32
	LastOffset  int64
	// Replicas are the followers that must fetch the chunk (the leader
	// itself already has it).
	Replicas []int32
}

// NeedsFor turns an object's pointers into its ChunkNeeds, given each
// partition's followers at upload time.
func NeedsFor(ptrs []Pointer, followers func(topic string, partition int32) []int32) []ChunkNeed {
	out := make([]ChunkNeed, len(ptrs))
	for i, p := range ptrs {
		out[i] = ChunkNeed{Topic: p.Topic, Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, LastOffset: p.LastOffset,
			Replicas: append([]int32(nil), followers(p.Topic, p.Partition)...)}
	}
	return out
}

// Deletion reasons.
const (
	ReasonReplicated = "replicated" // every replica waited for has every chunk, or it fell below the log start
	ReasonRetention  = "retention"  // older than the retention cap
)

// Deletion is an object the leader may delete.
type Deletion struct {
	Bucket, Key string
	Reason      string
}

// Tracker is the leader's deletion bookkeeping: per object, which
// (partition, replica) pairs still need which chunk. An object is
// deletable once, for every chunk, every replica waited for has a log end
// offset past the chunk's last offset, or the partition's log start is
// past it; or once it is older than the retention cap whatever its state.
// Safe for concurrent use.
//
// Only partitions this broker leads are tracked (Lead .. Release), and
// only chunks of that leadership's epochs (a re-election of this broker
// keeps the earlier epochs' chunks): a chunk of any other partition
// needs nothing from this leader (a new leader serves its followers
// inline, never from our objects), so an upload that finishes after
// Release leaves nothing behind.
//
// Cost. Every replica fetch reports progress under the tracker's mutex,
// so nothing here may scan every object. Per partition the tracker keeps
// its chunks ordered by last offset; each object counts its unsatisfied
// (chunk, replica) pairs. Progress of a replica from a to b visits only
// the chunks with last offset in [a, b) (a binary search, then what
// changed); an object whose count reaches zero joins the ready set, and
// Collect takes the ready set and the expired objects (a heap by creation
// time), never the rest.
type Tracker struct {
	retention time.Duration

	mu      sync.Mutex
	objects map[objectID]*trackedObject
	byAge   ageHeap
	// ready holds the objects whose pending count reached 0 (and maybe
	// some that went up again since: Collect skips them). A slice, not a
	// map: iterating a map costs its peak size, not its entries.
	ready []*trackedObject
	parts map[tp]*partTrack
	// visits counts the chunks and objects examined, for tests of the
	// cost (export_test.go).
	visits int64
}

type objectID struct{ bucket, key string }

type trackedObject struct {
	id      objectID
	created time.Time
	// pending counts the (chunk, replica waited for) pairs not satisfied
	// yet; 0: the object is in the ready set.
	pending int
	inReady bool // in Tracker.ready
	removed bool
	entries []*chunkEntry
	heapIdx int
}

// chunkEntry is one tracked chunk of an object in a led partition.
type chunkEntry struct {
	obj      *trackedObject
	part     *partTrack
	last     int64
	replicas []int32
	// dead: the object was collected or the partition released; the
	// entry no longer counts and is dropped from part.entries lazily.
	dead bool
}

// partTrack is the state of one led partition.
type partTrack struct {
	// epoch is the current leadership's, since the first of this
	// broker's uninterrupted leadership (re-elections keep it).
	epoch, since int32
	logStart     int64
	leo          map[int32]int64
	// waitFor is the set of replicas deletion waits for (the ISR's
	// registered followers); nil: every replica a chunk lists.
	waitFor map[int32]bool
	// entries are ordered by last offset; dead of them are dead.
	entries []*chunkEntry
	dead    int
}

// pos is the offset below which replica r needs nothing.
func (pt *partTrack) pos(r int32) int64 { return max(pt.leo[r], pt.logStart) }

func (pt *partTrack) waits(r int32) bool { return pt.waitFor == nil || pt.waitFor[r] }

// from is the index of the first entry whose last offset is >= off.
func (pt *partTrack) from(off int64) int {
	return sort.Search(len(pt.entries), func(i int) bool { return pt.entries[i].last >= off })
}

func (pt *partTrack) insert(e *chunkEntry) {
	n := len(pt.entries)
	if n == 0 || pt.entries[n-1].last <= e.last {
		pt.entries = append(pt.entries, e) // the usual case: uploads come in offset order
		return
	}
	i := sort.Search(n, func(i int) bool { return pt.entries[i].last > e.last })
	pt.entries = slices.Insert(pt.entries, i, e)
}

// compact drops dead entries: from the front as they come, and all of
// them once they are more than half, so the list stays proportional to
// the chunks still tracked.
func (pt *partTrack) compact() {
	i := 0
	for i < len(pt.entries) && pt.entries[i].dead {
		pt.entries[i] = nil
		i++
	}
	pt.entries, pt.dead = pt.entries[i:], pt.dead-i
	if pt.dead > 32 && pt.dead > len(pt.entries)/2 {
		live := make([]*chunkEntry, 0, len(pt.entries)-pt.dead)
		for _, e := range pt.entries {
			if !e.dead {
				live = append(live, e)
			}
		}
		pt.entries, pt.dead = live, 0
	}
}

// NewTracker returns a tracker with the hard cap wal.retention.ms.
func NewTracker(retention time.Duration) *Tracker {
	return &Tracker{
		retention: retention,
		objects:   map[objectID]*trackedObject{},
		parts:     map[tp]*partTrack{},
	}
}

// Lead starts tracking a partition this broker leads at epoch: chunks of
// that epoch are tracked from now on. A broker re-elected at a newer
// epoch without losing the leadership in between (no Release) keeps its
// log as it was, and its pointer index keeps serving the earlier epochs'
// objects: their chunks stay tracked with the progress followers
// reported (deleted once every replica waited for has them, or at the
// retention cap), and late uploads of those epochs are tracked too. Any
// other change of epoch forgets the previous leadership (as Release).
func (t *Tracker) Lead(topic string, partition, epoch int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{topic, partition}
	if pt := t.parts[k]; pt != nil {
		if pt.epoch == epoch {
			return
		}
		if epoch > pt.epoch {
			pt.epoch = epoch
			return
		}
		t.releaseLocked(k, pt)
	}
	t.parts[k] = &partTrack{since: epoch, epoch: epoch, leo: map[int32]int64{}}
}

// Release says the broker no longer leads the partition (or it was
// removed): its chunks need nothing more from this leader, and the
// tracker forgets the partition.
func (t *Tracker) Release(topic string, partition int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{topic, partition}
	if pt := t.parts[k]; pt != nil {
		t.releaseLocked(k, pt)
	}
}

func (t *Tracker) releaseLocked(k tp, pt *partTrack) {
	for _, e := range pt.entries {
		if e.dead {
			continue
		}
		for _, r := range e.replicas {
			if pt.waits(r) && pt.pos(r) <= e.last {
				t.pendingLocked(e.obj, -1)
			}
		}
		e.dead = true
	}
	delete(t.parts, k)
}

// Add starts tracking an uploaded object (again, if it was: the earlier
// state is forgotten). Chunks of partitions not led at their epoch need
// nothing; an object without chunks to wait for is deletable at once.
func (t *Tracker) Add(bucket, key string, created time.Time, needs []ChunkNeed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := objectID{bucket, key}
	if old := t.objects[id]; old != nil {
		t.removeLocked(old)
	}
	o := &trackedObject{id: id, created: created}
	t.objects[id] = o
	heap.Push(&t.byAge, o)
	for _, n := range needs {
		pt := t.parts[tp{n.Topic, n.Partition}]
		if pt == nil || n.LeaderEpoch < pt.since || n.LeaderEpoch > pt.epoch {
			continue
		}
		e := &chunkEntry{obj: o, part: pt, last: n.LastOffset}
		for _, r := range n.Replicas {
			if slices.Contains(e.replicas, r) {
				continue
			}
			e.replicas = append(e.replicas, r)
			if pt.waits(r) && pt.pos(r) <= e.last {
				o.pending++
			}
		}
		o.entries = append(o.entries, e)
		pt.insert(e)
	}
	if o.pending == 0 {
		t.markReadyLocked(o)
	}
}

func (t *Tracker) markReadyLocked(o *trackedObject) {
	if !o.inReady {
		o.inReady = true
		t.ready = append(t.ready, o)
	}
}

func (t *Tracker) pendingLocked(o *trackedObject, d int) {
	o.pending += d
	if o.pending == 0 {
		t.markReadyLocked(o)
	}
}

// shiftLocked moves replica r's position in pt from one offset to
// another, counting the chunks it passes (forward) or falls behind again
// (backward) in their objects.
func (t *Tracker) shiftLocked(pt *partTrack, r int32, from, to int64) {
	if from == to || !pt.waits(r) {
		return
	}
	lo, hi, d := from, to, -1
	if to < from {
		lo, hi, d = to, from, 1
	}
	for i := pt.from(lo); i < len(pt.entries) && pt.entries[i].last < hi; i++ {
		t.visits++
		if e := pt.entries[i]; !e.dead && slices.Contains(e.replicas, r) {
			t.pendingLocked(e.obj, d)
		}
	}
}

// ReplicaProgress records a follower's log end offset (the next offset it
// will fetch), as reported on its fetch. It never goes back (see
// ResetReplica).
func (t *Tracker) ReplicaProgress(topic string, partition, replica int32, leo int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.parts[tp{topic, partition}]
	if pt == nil || leo <= pt.leo[replica] {
		return
	}
	from := pt.pos(replica)
	pt.leo[replica] = leo
	t.shiftLocked(pt, replica, from, pt.pos(replica))
}

// ResetReplica forgets a follower's progress, e.g. after it truncated:
// the chunks of tracked objects above the log start count for it again.
func (t *Tracker) ResetReplica(topic string, partition, replica int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.parts[tp{topic, partition}]
	if pt == nil {
		return
	}
	from := pt.pos(replica)
	delete(pt.leo, replica)
	t.shiftLocked(pt, replica, from, pt.pos(replica))
}

// LogStart records the partition's log start offset: chunks below it are
// needed by nobody.
func (t *Tracker) LogStart(topic string, partition int32, start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.parts[tp{topic, partition}]
	if pt == nil || start <= pt.logStart {
		return
	}
	for i := pt.from(pt.logStart); i < len(pt.entries) && pt.entries[i].last < start; i++ {
		t.visits++
		e := pt.entries[i]
		if e.dead {
			continue
		}
		for _, r := range e.replicas {
			// Its position was max(leo, old log start) <= last.
			if pt.waits(r) && pt.leo[r] <= e.last {
				t.pendingLocked(e.obj, -1)
			}
		}
	}
	pt.logStart = start
}

// WaitFor sets the followers whose progress deletion waits for in a led
// partition: the broker passes its in-sync replicas that are registered.
// A follower outside it (dead, unregistered, out of the ISR) no longer
// keeps objects until the retention cap; when it fetches again it gets
// what is left from objects and the rest inline (a missing object is a
// failed range, fetched inline). Cost: nothing when the set is unchanged.
func (t *Tracker) WaitFor(topic string, partition int32, replicas []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pt := t.parts[tp{topic, partition}]
	if pt == nil {
		return
	}
	set := make(map[int32]bool, len(replicas))
	for _, r := range replicas {
		set[r] = true
	}
	if pt.waitFor != nil && maps.Equal(pt.waitFor, set) {
		return
	}
	prev := pt.waitFor
	was := func(r int32) bool { return prev == nil || prev[r] }
	for _, e := range pt.entries {
		t.visits++
		if e.dead {
			continue
		}
		for _, r := range e.replicas {
			if was(r) == set[r] || pt.pos(r) > e.last {
				continue
			}
			if set[r] {
				t.pendingLocked(e.obj, 1)
			} else {
				t.pendingLocked(e.obj, -1)
			}
		}
	}
	pt.waitFor = set
}

// Collect returns the objects that may be deleted now, oldest first, and
// stops tracking them. The caller deletes them and drops their pointers
// (PointerIndex.RemoveObject); if a delete fails it may Add the object
// again. Its cost is that of the objects it returns.
func (t *Tracker) Collect(now time.Time) []Deletion {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*trackedObject
	reason := map[*trackedObject]string{}
	for t.retention > 0 && len(t.byAge) > 0 && now.Sub(t.byAge[0].created) >= t.retention {
		o := t.byAge[0]
		t.visits++
		reason[o] = ReasonRetention
		out = append(out, o)
		t.removeLocked(o)
	}
	for i, o := range t.ready {
		t.visits++
		t.ready[i] = nil
		o.inReady = false
		if o.removed || o.pending != 0 {
			continue
		}
		reason[o] = ReasonReplicated
		out = append(out, o)
		t.removeLocked(o)
	}
	if cap(t.ready) > 4096 {
		t.ready = nil // after a burst: give the memory back
	} else {
		t.ready = t.ready[:0]
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.Before(out[j].created)
		}
		return out[i].id.key < out[j].id.key
	})
	var dels []Deletion
	for _, o := range out {
		dels = append(dels, Deletion{Bucket: o.id.bucket, Key: o.id.key, Reason: reason[o]})
	}
	return dels
}

// removeLocked stops tracking o.
func (t *Tracker) removeLocked(o *trackedObject) {
	heap.Remove(&t.byAge, o.heapIdx)
	delete(t.objects, o.id)
	o.removed = true
	for _, e := range o.entries {
		if e.dead {
			continue
		}
		e.dead = true
		e.part.dead++
		e.part.compact()
	}
}

// Len is the number of tracked objects.
func (t *Tracker) Len() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.objects) }

// Partitions is the number of partitions tracked (led, not released).
func (t *Tracker) Partitions() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.parts) }

// ageHeap orders tracked objects by creation time (then key), for the
// retention cap.
type ageHeap []*trackedObject

func (h ageHeap) Len() int { return len(h) }
func (h ageHeap) Less(i, j int) bool {
	if !h[i].created.Equal(h[j].created) {
		return h[i].created.Before(h[j].created)
	}
	return h[i].id.key < h[j].id.key
}
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *ageHeap) Push(x any) {
	o := x.(*trackedObject)
	o.heapIdx = len(*h)
	*h = append(*h, o)
}
func (h *ageHeap) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	o.heapIdx = -1
	return o
}

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
