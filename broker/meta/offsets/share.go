package offsets

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

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
