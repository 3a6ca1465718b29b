package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/quota"
)

// QuotaOp is one change of AlterClientQuotas: set Key to Value, or remove
// it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// ClientQuotas returns the client quotas in force by entity key (nil when
// standalone or before the first metadata snapshot).
func (b *Broker) ClientQuotas() map[string]meta.ClientQuota {
	if st := b.ClusterState(); st != nil {
		return st.ClientQuotas
	}
	return nil
}

// ValidateQuotaEntity checks an entity of DescribeClientQuotas'
// results or AlterClientQuotas: user, client-id, both, or ip alone; names
// non-empty (nil is the default entity); an ip name an address.
func ValidateQuotaEntity(e meta.QuotaEntity) error {
	if len(e) == 0 {
		return fmt.Errorf("%w: a quota entity needs at least one of user, client-id or ip", kerr.InvalidRequest)
	}
	seen := map[string]bool{}
	for _, p := range e {
		switch p.Type {
		case meta.QuotaEntityUser, meta.QuotaEntityClientID, meta.QuotaEntityIP:
		default:
			return fmt.Errorf("%w: unknown quota entity type %q (want user, client-id or ip)", kerr.InvalidRequest, p.Type)
		}
		if seen[p.Type] {
			return fmt.Errorf("%w: quota entity type %q given twice", kerr.InvalidRequest, p.Type)
		}
		seen[p.Type] = true
		if p.Name != nil && *p.Name == "" {
			return fmt.Errorf("%w: empty %s name (a null name is the default entity)", kerr.InvalidRequest, p.Type)
		}
		if p.Type == meta.QuotaEntityIP && p.Name != nil {
			if _, err := netip.ParseAddr(*p.Name); err != nil {
				return fmt.Errorf("%w: ip quota entity %q is not an IP address", kerr.InvalidRequest, *p.Name)
			}
		}
	}
	if seen[meta.QuotaEntityIP] && len(e) > 1 {
		return fmt.Errorf("%w: an ip quota entity cannot be combined with user or client-id", kerr.InvalidRequest)
	}
	return nil
}

// canonicalQuotaEntity returns e with an ip entity's address in the
// form the broker matches client addresses in (quota.CanonicalIPName):
// "::ffff:10.0.0.1" and "10.0.0.1" are one entity. e must be valid.
func canonicalQuotaEntity(e meta.QuotaEntity) meta.QuotaEntity {
	if len(e) != 1 || e[0].Type != meta.QuotaEntityIP || e[0].Name == nil {
		return e
	}
	addr, err := netip.ParseAddr(*e[0].Name)
	if err != nil {
		return e
	}
	name := quota.CanonicalIPName(addr)
	return meta.QuotaEntity{{Type: meta.QuotaEntityIP, Name: &name}}
}

func validateQuotaOp(e meta.QuotaEntity, op QuotaOp) error {
	ip := e[0].Type == meta.QuotaEntityIP
	switch op.Key {
	case quota.ProducerByteRate, quota.ConsumerByteRate, quota.ControllerMutationRate, quota.RequestPercentage:
		if ip {
			return fmt.Errorf("%w: %s applies to user and client-id entities, not ip", kerr.InvalidRequest, op.Key)
		}
	case quota.ConnectionCreationRate:
		if !ip {
			return fmt.Errorf("%w: %s applies to ip entities only (KIP-612), not user or client-id", kerr.InvalidRequest, op.Key)
		}
	default:
		return fmt.Errorf("%w: unknown quota key %q (Strata enforces producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate and the ip entity's connection_creation_rate)", kerr.InvalidRequest, op.Key)
	}
	if op.Remove {
		return nil
	}
	switch op.Key {
	case quota.ConnectionCreationRate:
		if math.IsNaN(op.Value) || op.Value < 0 || op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt32 {
			return fmt.Errorf("%w: %s must be a whole number of new connections per second, 0 or more (0 refuses every new connection from the address), got %v", kerr.InvalidConfig, op.Key, op.Value)
		}
		return nil
	case quota.ControllerMutationRate:
		if math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0 {
			return fmt.Errorf("%w: %s must be a number of partition mutations per second above 0, got %v", kerr.InvalidConfig, op.Key, op.Value)
		}
		return nil
	case quota.RequestPercentage:
		if math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0 {
			return fmt.Errorf("%w: %s must be a percentage of one thread's time above 0 (200 is two threads), got %v", kerr.InvalidConfig, op.Key, op.Value)
		}
		return nil
	}
	if math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0 || op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64 {
		return fmt.Errorf("%w: %s must be a whole number of bytes per second above 0, got %v", kerr.InvalidConfig, op.Key, op.Value)
	}
	return nil
}

// AlterClientQuota applies ops to entity's quotas (AlterClientQuotas):
// every op is checked before anything is written; with validateOnly
// nothing is. The cluster metadata keeps them; every broker enforces
// them (package quota).
func (b *Broker) AlterClientQuota(ctx context.Context, entity meta.QuotaEntity, ops []QuotaOp, validateOnly bool) error {
	if err := ValidateQuotaEntity(entity); err != nil {
		return err
	}
	entity = canonicalQuotaEntity(entity)
	keys := map[string]bool{}
	for _, op := range ops {
		if keys[op.Key] {
			return fmt.Errorf("%w: quota key %q given twice", kerr.InvalidRequest, op.Key)
		}
		keys[op.Key] = true
		if err := validateQuotaOp(entity, op); err != nil {
			return err
		}
	}
	if b.cluster == nil {
		return fmt.Errorf("%w: client quotas live in the cluster metadata (etcd); this broker runs standalone", kerr.InvalidRequest)
	}
	if validateOnly {
		return nil
	}
	apply := func(values map[string]float64) error {
		for _, op := range ops {
			if op.Remove {
				delete(values, op.Key)
			} else {
				values[op.Key] = op.Value
			}
		}
		return nil
	}
	next, err := b.cluster.store.AlterClientQuota(ctx, entity, apply)
	if err != nil {
		if _, ok := errors.AsType[*kerr.Error](err); ok {
			return err
		}
		return metaError(err)
	}
	key := entity.Key()
	b.waitTopic(ctx, func(st *meta.ClusterState) bool {
		q, ok := st.ClientQuotas[key]
		if len(next) == 0 {
			return !ok
		}
		return ok && maps.Equal(q.Values, next)
	})
	b.log.Info("client quota changed", "entity", key, "quotas", next)
	return nil
}
