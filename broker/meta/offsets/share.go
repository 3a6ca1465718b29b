package offsets

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/group"
)

// Share-partition state of share groups (KIP-932), one key per share
// partition beside the offsets:
//
//	/strata/<cluster>/share-state/<group, path-escaped>/<topic>/<partition> = JSON(group.ShareState)
//
// The partition's leader writes it on every acquisition and
// acknowledgement; a new leader (its leader epoch changed) reads it back.

var _ group.ShareStateStore = (*Store)(nil)

func (s *Store) shareKey(g, topic string, partition int32) string {
	base := strings.TrimSuffix(s.prefix, "offsets/")
	return base + "share-state/" + url.PathEscape(g) + "/" + topic + "/" + strconv.Itoa(int(partition))
}

// LoadShareState implements group.ShareStateStore.
func (s *Store) LoadShareState(ctx context.Context, g, topic string, partition int32) (group.ShareState, bool, error) {
	resp, err := s.client.Get(ctx, s.shareKey(g, topic, partition))
	if err != nil {
		return group.ShareState{}, false, fmt.Errorf("load share state of %q %s-%d: %w", g, topic, partition, err)
	}
	if len(resp.Kvs) == 0 {
		return group.ShareState{}, false, nil
	}
	var st group.ShareState
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return group.ShareState{}, false, fmt.Errorf("share state of %q %s-%d: %w", g, topic, partition, err)
	}
	return st, true, nil
}

// SaveShareState implements group.ShareStateStore.
func (s *Store) SaveShareState(ctx context.Context, g, topic string, partition int32, st group.ShareState) error {
	if topic == "" || strings.Contains(topic, "/") {
		return fmt.Errorf("save share state of %q: invalid topic name %q", g, topic)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save share state of %q %s-%d: %w", g, topic, partition, err)
	}
	if _, err := s.client.Put(ctx, s.shareKey(g, topic, partition), string(b)); err != nil {
		return fmt.Errorf("save share state of %q %s-%d: %w", g, topic, partition, err)
	}
	return nil
}

// DeleteShareState implements group.ShareStateStore.
func (s *Store) DeleteShareState(ctx context.Context, g string) error {
	prefix := strings.TrimSuffix(s.shareKey(g, "x", 0), "x/0")
	if _, err := s.client.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("delete share state of %q: %w", g, err)
	}
	return nil
}

var _ group.ShareStateLister = (*Store)(nil)

// ListShareState implements group.ShareStateLister.
func (s *Store) ListShareState(ctx context.Context, g string) ([]group.TopicPartition, error) {
	prefix := strings.TrimSuffix(s.shareKey(g, "x", 0), "x/0")
	var out []group.TopicPartition
	err := s.scan(ctx, prefix, func(key string, _ []byte) {
		rest := strings.Split(strings.TrimPrefix(key, prefix), "/")
		if len(rest) != 2 {
			return
		}
		p, err := strconv.ParseInt(rest[1], 10, 32)
		if err != nil {
			return
		}
		out = append(out, group.TopicPartition{Topic: rest[0], Partition: int32(p)})
	})
	if err != nil {
		return nil, fmt.Errorf("list share state of %q: %w", g, err)
	}
	slices.SortFunc(out, func(a, b group.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}
