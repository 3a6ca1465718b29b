// Package txnstate is the etcd-backed txn.Store of a replicated cluster:
// the transaction coordinators' state survives the loss of any broker,
// and the broker that takes over a transactional ID finds it in etcd.
//
// Layout, beside the watched metadata prefix (changes do not wake every
// broker's metadata watch):
//
//	/strata/<cluster>/transactions/<escaped transactional ID>  →  JSON txn.Metadata
//
// The record's revision is its etcd ModRevision; Put and Delete compare it
// in the same etcd transaction, so that two brokers that both believe
// they coordinate an ID (while their views of the live brokers differ)
// cannot both change its state.
package txnstate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/txn"
)

// Store implements txn.Store on etcd.
type Store struct {
	client *clientv3.Client
	prefix string
}

var _ txn.Store = (*Store)(nil)

// New returns the transaction state store of ms's cluster.
func New(ms *meta.Store) *Store {
	return &Store{client: ms.Client(), prefix: ms.TransactionsPrefix()}
}

func (s *Store) key(id string) string { return s.prefix + url.PathEscape(id) }

// List implements txn.Store. Records that do not decode are logged and
// skipped (their IDs start again from nothing).
func (s *Store) List(ctx context.Context) ([]txn.Stored, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list transaction state: %w", err)
	}
	out := make([]txn.Stored, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var md txn.Metadata
		if err := json.Unmarshal(kv.Value, &md); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "skipping transaction state that does not decode", "key", string(kv.Key))
			continue
		}
		out = append(out, txn.Stored{Metadata: md, Revision: kv.ModRevision})
	}
	return out, nil
}

// Get implements txn.Store.
func (s *Store) Get(ctx context.Context, id string) (txn.Stored, error) {
	resp, err := s.client.Get(ctx, s.key(id))
	if err != nil {
		return txn.Stored{}, fmt.Errorf("read transaction state of %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return txn.Stored{}, nil
	}
	var md txn.Metadata
	if err := json.Unmarshal(resp.Kvs[0].Value, &md); err != nil {
		return txn.Stored{}, fmt.Errorf("transaction state of %q: %w", id, err)
	}
	return txn.Stored{Metadata: md, Revision: resp.Kvs[0].ModRevision}, nil
}

// Put implements txn.Store.
func (s *Store) Put(ctx context.Context, md txn.Metadata, rev int64) (int64, error) {
	if md.TransactionalID == "" {
		return 0, fmt.Errorf("put transaction state: empty transactional ID")
	}
	b, err := json.Marshal(md)
	if err != nil {
		return 0, fmt.Errorf("put transaction state of %q: %w", md.TransactionalID, err)
	}
	k := s.key(md.TransactionalID)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpPut(k, string(b))).Commit()
	if err != nil {
		return 0, fmt.Errorf("put transaction state of %q: %w", md.TransactionalID, err)
	}
	if !resp.Succeeded {
		return 0, txn.ErrConflict
	}
	return resp.Header.Revision, nil
}

// Delete implements txn.Store.
func (s *Store) Delete(ctx context.Context, id string, rev int64) error {
	k := s.key(id)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return fmt.Errorf("delete transaction state of %q: %w", id, err)
	}
	if !resp.Succeeded {
		return txn.ErrConflict
	}
	return nil
}
