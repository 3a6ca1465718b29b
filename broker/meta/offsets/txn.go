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

// Pending transactional offsets (group.TxnOffsetStore):
//
//	/strata/<cluster>/txn-offsets/<escaped group>/<producer ID>/<topic>/<partition>  →  JSON record
//
// CompletePending moves a producer's pending records to the committed keys
// (commit) or deletes them (abort) in one etcd transaction, so a crash
// never exposes part of a transaction's offsets.

var _ group.TxnOffsetStore = (*Store)(nil)

func (s *Store) pendingPrefix(g string, producerID int64) string {
	return s.txnOffsets + url.PathEscape(g) + "/" + strconv.FormatInt(producerID, 10) + "/"
}

// CommitPending implements group.TxnOffsetStore.
func (s *Store) CommitPending(ctx context.Context, g string, producerID int64, commits []group.OffsetCommit) error {
	ops := make([]clientv3.Op, 0, len(commits))
	seen := map[group.TopicPartition]bool{}
	for i := len(commits) - 1; i >= 0; i-- { // the last commit of a partition wins
		c := commits[i]
		tp := group.TopicPartition{Topic: c.Topic, Partition: c.Partition}
		if seen[tp] {
			continue
		}
		seen[tp] = true
		if c.Topic == "" || strings.Contains(c.Topic, "/") {
			return fmt.Errorf("pending offsets of group %q: invalid topic name %q", g, c.Topic)
		}
		b, err := json.Marshal(recordOf(c))
		if err != nil {
			return fmt.Errorf("pending offsets of group %q: %w", g, err)
		}
		ops = append(ops, clientv3.OpPut(s.pendingPrefix(g, producerID)+c.Topic+"/"+strconv.Itoa(int(c.Partition)), string(b)))
	}
	return s.applyClaimed(ctx, "pending offsets of group "+g, g, ops)
}

// CompletePending implements group.TxnOffsetStore: one transaction puts
// the committed records (commit) and deletes the pending ones.
func (s *Store) CompletePending(ctx context.Context, g string, producerID int64, commit bool) error {
	prefix := s.pendingPrefix(g, producerID)
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("complete pending offsets of group %q: %w", g, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	ops := []clientv3.Op{clientv3.OpDelete(prefix, clientv3.WithPrefix())}
	if commit {
		for _, kv := range resp.Kvs {
			topic, p, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			pn, err := strconv.ParseInt(p, 10, 32)
			if !ok || err != nil {
				return fmt.Errorf("complete pending offsets of group %q: bad key %q", g, kv.Key)
			}
			ops = append(ops, clientv3.OpPut(s.key(g, topic, int32(pn)), string(kv.Value)))
		}
	}
	// One transaction: a crash exposes all of the transaction's offsets
	// or none. The guard makes a concurrent CommitPending of the same
	// producer (impossible while its transaction is ending) a retry.
	if len(ops) > s.maxTxnOps {
		return fmt.Errorf("complete pending offsets of group %q: %d partitions exceed one etcd transaction (%d operations)", g, len(ops)-1, s.maxTxnOps)
	}
	cmp := clientv3.Compare(clientv3.ModRevision(prefix).WithPrefix(), "<", resp.Header.Revision+1)
	tr, err := s.client.Txn(ctx).If(cmp, s.claimHeld(g)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("complete pending offsets of group %q: %w", g, err)
	}
	if !tr.Succeeded {
		// Either the pending records changed or another coordinator
		// claimed the group; report the latter as fenced.
		if fenced, err := s.fenced(ctx, g); err == nil && fenced {
			return fmt.Errorf("complete pending offsets of group %q: %w", g, group.ErrFenced)
		}
		return fmt.Errorf("complete pending offsets of group %q: changed concurrently", g)
	}
	return nil
}

// LoadPending implements group.TxnOffsetStore.
func (s *Store) LoadPending(ctx context.Context) (map[string]map[int64][]group.OffsetCommit, error) {
	out := map[string]map[int64][]group.OffsetCommit{}
	log := logr.FromContextOrDiscard(ctx)
	err := s.scan(ctx, s.txnOffsets, func(key string, value []byte) {
		parts := strings.Split(strings.TrimPrefix(key, s.txnOffsets), "/")
		var r record
		err := json.Unmarshal(value, &r)
		var g string
		var pid, p int64
		if err == nil && len(parts) != 4 {
			err = fmt.Errorf("want <group>/<producer>/<topic>/<partition>")
		}
		if err == nil {
			g, err = url.PathUnescape(parts[0])
		}
		if err == nil {
			pid, err = strconv.ParseInt(parts[1], 10, 64)
		}
		if err == nil {
			p, err = strconv.ParseInt(parts[3], 10, 32)
		}
		if err != nil {
			log.Error(err, "skipping pending offset record that does not decode", "key", key)
			return
		}
		if out[g] == nil {
			out[g] = map[int64][]group.OffsetCommit{}
		}
		out[g][pid] = append(out[g][pid], r.commit(parts[2], int32(p)))
	})
	if err != nil {
		return nil, fmt.Errorf("load pending offsets: %w", err)
	}
	return out, nil
}

var _ group.GroupLoader = (*Store)(nil)

// LoadGroup implements group.GroupLoader: the group's offsets, membership
// and pending offsets, read at one etcd revision.
func (s *Store) LoadGroup(ctx context.Context, g string) ([]group.OffsetCommit, *group.GroupMetadata, map[int64][]group.OffsetCommit, error) {
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(s.groupPrefix(g), clientv3.WithPrefix()),
		clientv3.OpGet(s.groups+url.PathEscape(g)),
		clientv3.OpGet(s.txnOffsets+url.PathEscape(g)+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load group %q: %w", g, err)
	}
	log := logr.FromContextOrDiscard(ctx)
	var offsets []group.OffsetCommit
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		_, c, err := s.decode(string(kv.Key), kv.Value)
		if err != nil {
			log.Error(err, "skipping offset record that does not decode", "key", string(kv.Key))
			continue
		}
		offsets = append(offsets, c)
	}
	var md *group.GroupMetadata
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		var m group.GroupMetadata
		if err := json.Unmarshal(kvs[0].Value, &m); err != nil {
			log.Error(err, "skipping group membership record that does not decode", "group", g)
		} else {
			md = &m
		}
	}
	pending := map[int64][]group.OffsetCommit{}
	prefix := s.txnOffsets + url.PathEscape(g) + "/"
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), prefix), "/")
		var r record
		err := json.Unmarshal(kv.Value, &r)
		var pid, p int64
		if err == nil && len(parts) != 3 {
			err = fmt.Errorf("want <producer>/<topic>/<partition>")
		}
		if err == nil {
			pid, err = strconv.ParseInt(parts[0], 10, 64)
		}
		if err == nil {
			p, err = strconv.ParseInt(parts[2], 10, 32)
		}
		if err != nil {
			log.Error(err, "skipping pending offset record that does not decode", "key", string(kv.Key))
			continue
		}
		pending[pid] = append(pending[pid], r.commit(parts[1], int32(p)))
	}
	return offsets, md, pending, nil
}

// fenced reports whether this Store's claim of group g no longer holds.
func (s *Store) fenced(ctx context.Context, g string) (bool, error) {
	resp, err := s.client.Txn(ctx).If(s.claimHeld(g)).Commit()
	if err != nil {
		return false, err
	}
	return !resp.Succeeded, nil
}
