package meta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/auth"
)

// ACL bindings live beside the SCRAM credentials (credentials/acls/), one
// key per binding named by the SHA-256 of its JSON, so that creating a
// binding twice writes the same key (CreateAcls is idempotent, as in
// Kafka) and concurrent creates and deletes never conflict. Every broker
// follows the prefix with WatchACLs, so a change reaches each broker's
// authorizer without a restart; the metadata watch (meta/) is not woken.

func (k keys) acls() string { return k.credentials + "acls/" }

func (k keys) acl(b auth.Binding) string {
	sum := sha256.Sum256([]byte(encode(b)))
	return k.acls() + hex.EncodeToString(sum[:16])
}

var _ auth.ACLStore = (*Store)(nil)

// ACLs implements auth.ACLStore.
func (s *Store) ACLs(ctx context.Context) ([]auth.Binding, error) {
	bs, _, err := s.readACLs(ctx)
	return bs, err
}

func (s *Store) readACLs(ctx context.Context) ([]auth.Binding, int64, error) {
	resp, err := s.client.Get(ctx, s.keys.acls(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read ACLs: %w", err)
	}
	out := make([]auth.Binding, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var b auth.Binding
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			return nil, 0, fmt.Errorf("decode ACL %s: %w", kv.Key, err)
		}
		out = append(out, b)
	}
	auth.SortBindings(out)
	return out, resp.Header.Revision, nil
}

// CreateACLs implements auth.ACLStore: the bindings are written in
// transactions of at most --max-txn-ops keys each.
func (s *Store) CreateACLs(ctx context.Context, bs []auth.Binding) error {
	ops := make([]clientv3.Op, 0, len(bs))
	for _, b := range bs {
		ops = append(ops, clientv3.OpPut(s.keys.acl(b), encode(b)))
	}
	return s.applyOps(ctx, "create ACLs", ops)
}

// DeleteACLs implements auth.ACLStore.
func (s *Store) DeleteACLs(ctx context.Context, fs []auth.Filter) ([][]auth.Binding, error) {
	cur, _, err := s.readACLs(ctx)
	if err != nil {
		return nil, err
	}
	matched, rest := auth.MatchFilters(cur, fs)
	if len(rest) == len(cur) {
		return matched, nil
	}
	keep := map[auth.Binding]bool{}
	for _, b := range rest {
		keep[b] = true
	}
	var ops []clientv3.Op
	for _, b := range cur {
		if !keep[b] {
			ops = append(ops, clientv3.OpDelete(s.keys.acl(b)))
		}
	}
	return matched, s.applyOps(ctx, "delete ACLs", ops)
}

func (s *Store) applyOps(ctx context.Context, what string, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), s.maxTxnOps)
		if _, err := s.client.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		ops = ops[n:]
	}
	return nil
}

// WatchACLs calls fn with every binding now and again after each change,
// until ctx ends. If the watch breaks it reads the bindings afresh and
// starts over, so fn always receives the complete list.
func (s *Store) WatchACLs(ctx context.Context, fn func([]auth.Binding)) {
	log := logr.FromContextOrDiscard(ctx).WithName("acl-watch")
	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		bs, rev, err := s.readACLs(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "reading ACLs, will retry")
			}
			if !backoff.wait(ctx) {
				return
			}
			continue
		}
		backoff.reset()
		fn(bs)
		err = s.followACLs(ctx, rev, fn)
		if ctx.Err() != nil {
			return
		}
		log.Info("ACL watch broke, reading them afresh", "reason", err)
		if !backoff.wait(ctx) {
			return
		}
	}
}

func (s *Store) followACLs(ctx context.Context, rev int64, fn func([]auth.Binding)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, s.keys.acls(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		// Re-read rather than apply events: the list is small, and a
		// complete read cannot drift from etcd.
		bs, _, err := s.readACLs(ctx)
		if err != nil {
			return err
		}
		fn(bs)
	}
	return fmt.Errorf("watch closed")
}
