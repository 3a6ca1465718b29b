package protocol

// AlterClientQuotas (key 49), versions 0-1.
//
// Sets or removes quota values of user, client-id, user+client-id and ip
// entities (null names are the defaults) in the cluster metadata
// (broker.Broker.AlterClientQuota). Strata enforces producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate
// (package broker/quota); Kafka's other keys are refused with a message
// saying they are not enforced, never stored and ignored. Each entry succeeds or fails alone; ValidateOnly checks
// without writing. Needs ALTER_CONFIGS on the cluster, as Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/meta"
)

func init() { register(kmsg.AlterClientQuotas, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AlterClientQuotasRequest)
	resp := r.NewResponse().(*kmsg.AlterClientQuotasResponse)
	allowed := r.authorizedCluster(kmsg.ACLOperationAlterConfigs)
	for _, entry := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		var entity meta.QuotaEntity
		for _, p := range entry.Entity {
			ep := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ep.Type, ep.Name = p.Type, p.Name
			out.Entity = append(out.Entity, ep)
			entity = append(entity, meta.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		var err error
		if !allowed {
			err = kerr.ClusterAuthorizationFailed
		} else {
			ops := make([]broker.QuotaOp, 0, len(entry.Ops))
			for _, op := range entry.Ops {
				ops = append(ops, broker.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
			}
			err = r.Env.Broker.AlterClientQuota(ctx, entity, ops, req.ValidateOnly)
		}
		out.ErrorCode, out.ErrorMessage = broker.ErrorCode(err), broker.ErrorMessage(err)
		resp.Entries = append(resp.Entries, out)
	}
	return resp, nil
}
