package offsets

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/group"
)

// Follow reports the store's content and its changes: snapshot first gets
// every group's offsets and membership read at one etcd revision, then
// changes gets every later change of an offset or a membership key, in
// revision order, as etcd watch events (one call per watch response).
// Follow returns when ctx ends (nil) or when the watch breaks (the
// revision was compacted, the cluster lost its leader): the caller calls
// it again, which starts with a fresh snapshot.
//
// Records that do not decode are logged and skipped, as Load does.
func (s *Store) Follow(ctx context.Context, snapshot func(group.StoreSnapshot), changes func([]group.StoreChange)) error {
	log := logr.FromContextOrDiscard(ctx)
	head, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("follow offsets: %w", err)
	}
	rev := head.Header.Revision
	snap := group.StoreSnapshot{Offsets: map[string][]group.OffsetCommit{}, Groups: map[string]group.GroupMetadata{}}
	err = s.scanAt(ctx, s.prefix, rev, func(key string, value []byte) {
		g, c, err := s.decode(key, value)
		if err != nil {
			log.Error(err, "skipping offset record that does not decode", "key", key)
			return
		}
		snap.Offsets[g] = append(snap.Offsets[g], c)
	})
	if err == nil {
		err = s.scanAt(ctx, s.groups, rev, func(key string, value []byte) {
			g, md, err := s.decodeGroup(key, value)
			if err != nil {
				log.Error(err, "skipping group membership record that does not decode", "key", key)
				return
			}
			snap.Groups[g] = md
		})
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("follow offsets: snapshot at revision %d: %w", rev, err)
	}
	snapshot(snap)

	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	offsetEvents := s.client.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	groupEvents := s.client.Watch(wctx, s.groups, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-offsetEvents:
		case resp, ok = <-groupEvents:
		}
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow offsets: watch closed: %w", context.Cause(wctx))
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("follow offsets: %w", err)
		}
		batch := make([]group.StoreChange, 0, len(resp.Events))
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			deleted := ev.Type == clientv3.EventTypeDelete
			var (
				c   group.StoreChange
				err error
			)
			if strings.HasPrefix(key, s.prefix) {
				c, err = s.offsetChange(key, ev.Kv.Value, deleted)
			} else {
				c, err = s.groupChange(key, ev.Kv.Value, deleted)
			}
			if err != nil {
				log.Error(err, "skipping a change that does not decode", "key", key)
				continue
			}
			batch = append(batch, c)
		}
		if len(batch) > 0 {
			changes(batch)
		}
	}
}

func (s *Store) offsetChange(key string, value []byte, deleted bool) (group.StoreChange, error) {
	if !deleted {
		g, c, err := s.decode(key, value)
		return group.StoreChange{Group: g, Offset: &c}, err
	}
	parts := strings.Split(strings.TrimPrefix(key, s.prefix), "/")
	if len(parts) != 3 {
		return group.StoreChange{}, fmt.Errorf("offset key %q: want <group>/<topic>/<partition>", key)
	}
	g, err := url.PathUnescape(parts[0])
	if err != nil {
		return group.StoreChange{}, fmt.Errorf("offset key %q: group: %w", key, err)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return group.StoreChange{}, fmt.Errorf("offset key %q: partition: %w", key, err)
	}
	return group.StoreChange{Group: g, OffsetDeleted: &group.TopicPartition{Topic: parts[1], Partition: int32(p)}}, nil
}

func (s *Store) groupChange(key string, value []byte, deleted bool) (group.StoreChange, error) {
	if deleted {
		g, err := url.PathUnescape(strings.TrimPrefix(key, s.groups))
		return group.StoreChange{Group: g, MembershipDeleted: true}, err
	}
	g, md, err := s.decodeGroup(key, value)
	return group.StoreChange{Group: g, Membership: &md}, err
}

func (s *Store) decodeGroup(key string, value []byte) (string, group.GroupMetadata, error) {
	var md group.GroupMetadata
	g, err := url.PathUnescape(strings.TrimPrefix(key, s.groups))
	if err == nil {
		err = json.Unmarshal(value, &md)
	}
	if err != nil {
		return "", md, fmt.Errorf("group membership key %q: %w", key, err)
	}
	return g, md, nil
}

// scanAt calls fn for every key under prefix at revision rev, page by page.
func (s *Store) scanAt(ctx context.Context, prefix string, rev int64, fn func(key string, value []byte)) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := s.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(s.pageSize), clientv3.WithRev(rev))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			fn(string(kv.Key), kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
