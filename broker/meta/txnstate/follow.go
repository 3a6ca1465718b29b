package txnstate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/txn"
)

// Follow reports the store's content and its changes: snapshot first gets
// every record read at one etcd revision, then changes gets every later
// change, in revision order (one call per watch response). Follow returns
// when ctx ends (nil) or when the watch breaks (the revision was
// compacted, the cluster lost its leader): the caller calls it again,
// which starts with a fresh snapshot. Records that do not decode are
// logged and skipped, as List does.
func (s *Store) Follow(ctx context.Context, snapshot func([]txn.Metadata), changes func([]txn.Change)) error {
	log := logr.FromContextOrDiscard(ctx)
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("follow transaction state: %w", err)
	}
	snap := make([]txn.Metadata, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c, err := s.change(string(kv.Key), kv.Value, false)
		if err != nil {
			log.Error(err, "skipping transaction state that does not decode", "key", string(kv.Key))
			continue
		}
		snap = append(snap, *c.Metadata)
	}
	snapshot(snap)

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wresp := range s.client.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wresp.Err(); err != nil {
			return fmt.Errorf("follow transaction state: %w", err)
		}
		batch := make([]txn.Change, 0, len(wresp.Events))
		for _, ev := range wresp.Events {
			c, err := s.change(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete)
			if err != nil {
				log.Error(err, "skipping a transaction state change that does not decode", "key", string(ev.Kv.Key))
				continue
			}
			batch = append(batch, c)
		}
		if len(batch) > 0 {
			changes(batch)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("follow transaction state: watch closed: %w", context.Cause(wctx))
}

func (s *Store) change(key string, value []byte, deleted bool) (txn.Change, error) {
	id, err := url.PathUnescape(strings.TrimPrefix(key, s.prefix))
	if err != nil {
		return txn.Change{}, fmt.Errorf("transaction state key %q: %w", key, err)
	}
	if deleted {
		return txn.Change{ID: id}, nil
	}
	var md txn.Metadata
	if err := json.Unmarshal(value, &md); err != nil {
		return txn.Change{}, fmt.Errorf("transaction state of %q: %w", id, err)
	}
	return txn.Change{ID: id, Metadata: &md}, nil
}
