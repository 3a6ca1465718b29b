package meta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Client quotas (Kafka's KIP-13 byte rates, managed with
// DescribeClientQuotas and AlterClientQuotas): one record per quota
// entity under meta/client-quotas/, so that every broker follows them in
// its ClusterState and enforces the same bounds.

// Quota entity types (Kafka's ClientQuotaEntity).
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// QuotaEntityPart is one component of a quota entity: a type and a name,
// nil for the type's default entity (Kafka's <default>).
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// QuotaEntity is a quota's entity: user, client-id, user and client-id,
// or ip, each part named or default. Canonical order: by type.
type QuotaEntity []QuotaEntityPart

// Canonical returns the entity with its parts sorted by type.
func (e QuotaEntity) Canonical() QuotaEntity {
	out := slices.Clone(e)
	slices.SortFunc(out, func(a, b QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// Key is the entity's canonical text, e.g. "client-id=app;user=alice" or
// "user=<default>" (names %-escaped): the key of ClusterState.ClientQuotas.
func (e QuotaEntity) Key() string {
	var sb strings.Builder
	for i, p := range e.Canonical() {
		if i > 0 {
			sb.WriteByte(';')
		}
		sb.WriteString(p.Type)
		sb.WriteByte('=')
		if p.Name == nil {
			sb.WriteString("<default>")
		} else {
			sb.WriteString(quotaNameEscaper.Replace(*p.Name))
		}
	}
	return sb.String()
}

// quotaNameEscaper keeps a name from colliding with "<default>" or the
// separators.
var quotaNameEscaper = strings.NewReplacer("%", "%25", ";", "%3B", "=", "%3D", "<", "%3C")

// ClientQuota is one entity's quota values (producer_byte_rate, ...).
type ClientQuota struct {
	Entity QuotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func (k keys) clientQuotas() string { return k.root + "client-quotas/" }

// clientQuota is the key of an entity's record: a hash of its canonical
// text, which may hold any byte (the record carries the entity itself).
func (k keys) clientQuota(e QuotaEntity) string {
	sum := sha256.Sum256([]byte(e.Key()))
	return k.clientQuotas() + hex.EncodeToString(sum[:16])
}

// AlterClientQuota applies mutate to a copy of the quota values of entity
// and writes them back with compare-and-swap, retrying when they changed
// meanwhile; no values left deletes the record. The caller validates
// entity, keys and values. mutate may be called more than once.
func (s *Store) AlterClientQuota(ctx context.Context, entity QuotaEntity, mutate func(values map[string]float64) error) (map[string]float64, error) {
	entity = entity.Canonical()
	key := s.keys.clientQuota(entity)
	for range casAttempts {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read client quota %s: %w", entity.Key(), err)
		}
		values := map[string]float64{}
		var rev int64
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			var cur ClientQuota
			if err := json.Unmarshal(resp.Kvs[0].Value, &cur); err != nil {
				return nil, fmt.Errorf("client quota %s record: %w", entity.Key(), err)
			}
			if cur.Entity.Key() != entity.Key() {
				return nil, fmt.Errorf("client quota record %s holds entity %s, not %s", key, cur.Entity.Key(), entity.Key())
			}
			for k, v := range cur.Values {
				values[k] = v
			}
		}
		if err := mutate(values); err != nil {
			return nil, err
		}
		op := clientv3.OpPut(key, encode(ClientQuota{Entity: entity, Values: values}))
		if len(values) == 0 {
			op = clientv3.OpDelete(key)
		}
		tx, err := s.commit(ctx, "alter client quota "+entity.Key(),
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, []clientv3.Op{op})
		if err != nil {
			return nil, err
		}
		if tx.Succeeded {
			return values, nil
		}
	}
	return nil, fmt.Errorf("%w: client quota %s kept changing while updating it", ErrStaleState, entity.Key())
}
