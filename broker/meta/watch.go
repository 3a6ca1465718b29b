package meta

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch follows the cluster metadata. The returned channel first receives a
// full snapshot, then one snapshot per etcd revision that changed a metadata
// key, in revision order (so every Store write is seen, with Version growing
// by one each time). Each snapshot is complete and consistent: events of one
// transaction are never split.
//
// The watch is one etcd watch on the metadata prefix starting right after
// the snapshot's revision. If it breaks (the revision was compacted, the
// watch was cancelled by the server, the cluster lost its leader) Watch
// reads a fresh snapshot and starts over from it; the fresh snapshot's
// Revision then jumps, which a consumer can notice but need not handle
// specially, since every snapshot is complete.
//
// The channel is unbuffered: a slow consumer holds the watch back (etcd
// buffers meanwhile). It is closed once ctx ends.
func (s *Store) Watch(ctx context.Context) <-chan *ClusterState {
	out := make(chan *ClusterState)
	go s.watch(ctx, nil, out)
	return out
}

// watch publishes b (loaded now when nil), follows it, and resyncs from a
// fresh snapshot whenever the watch breaks. It closes out when ctx ends.
func (s *Store) watch(ctx context.Context, b *stateBuilder, out chan<- *ClusterState) {
	defer close(out)
	log := logr.FromContextOrDiscard(ctx).WithName("meta-watch")
	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		if b == nil {
			var err error
			if b, err = s.load(ctx); err != nil {
				log.Error(err, "reading metadata snapshot, will retry")
				if !backoff.wait(ctx) {
					return
				}
				continue
			}
			backoff.reset()
		}
		if !send(ctx, out, b.snapshot()) {
			return
		}
		err := s.follow(ctx, log, b, out)
		if ctx.Err() != nil {
			return
		}
		log.Info("metadata watch broke, resyncing from a fresh snapshot", "revision", b.revision, "reason", err)
		b = nil
		if !backoff.wait(ctx) {
			return
		}
	}
}

// follow applies watch events to b from b.revision+1 and publishes a snapshot
// per revision, until the watch breaks (returned error says why) or ctx ends.
func (s *Store) follow(ctx context.Context, log logr.Logger, b *stateBuilder, out chan<- *ClusterState) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.client.Watch(wctx, s.keys.root, clientv3.WithPrefix(), clientv3.WithRev(b.revision+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return err
		}
		events := resp.Events
		for len(events) > 0 {
			rev := events[0].Kv.ModRevision
			n := 1
			for n < len(events) && events[n].Kv.ModRevision == rev {
				n++
			}
			for _, ev := range events[:n] {
				b.apply(log, ev.Kv, ev.Type == clientv3.EventTypeDelete)
			}
			b.revision = rev
			if !send(ctx, out, b.snapshot()) {
				return ctx.Err()
			}
			events = events[n:]
		}
	}
	return context.Cause(wctx) // nil unless ctx ended: the client closed the channel
}

func send(ctx context.Context, out chan<- *ClusterState, st *ClusterState) bool {
	select {
	case out <- st:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff is an exponential retry delay for reconnect loops.
type backoff struct{ cur, min, max time.Duration }

func newBackoff(min, max time.Duration) *backoff { return &backoff{cur: min, min: min, max: max} }

func (b *backoff) reset() { b.cur = b.min }

// wait blocks for the current delay, doubles it, and reports false if ctx
// ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	b.cur = min(2*b.cur, b.max)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
