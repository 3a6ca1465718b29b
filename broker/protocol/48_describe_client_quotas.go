package protocol

// DescribeClientQuotas (key 48), versions 0-1.
//
// Lists the client quotas of the cluster metadata (AlterClientQuotas,
// broker.Broker.ClientQuotas) whose entity matches every filter
// component: EXACT a type's named entity, DEFAULT its default entity,
// SPECIFIED any named (non-default) entity of the type. With strict, an
// entity with a type no component names does not match. Needs
// DESCRIBE_CONFIGS on the cluster, as Kafka.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/meta"
)

func init() { register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := r.NewResponse().(*kmsg.DescribeClientQuotasResponse)
	fail := func(err *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp, nil
	}
	if !r.authorizedCluster(kmsg.ACLOperationDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed, "describing client quotas needs DESCRIBE_CONFIGS on the cluster")
	}
	types := map[string]bool{}
	for _, c := range req.Components {
		if types[c.EntityType] {
			return fail(kerr.InvalidRequest, "entity type "+c.EntityType+" given twice in the filter")
		}
		types[c.EntityType] = true
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "an EXACT match on "+c.EntityType+" needs a name")
			}
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
		default:
			return fail(kerr.InvalidRequest, "unknown match type "+c.MatchType.String())
		}
	}
	var keys []string
	quotas := r.Env.Broker.ClientQuotas()
	for k, q := range quotas {
		if quotaMatches(q.Entity, req.Components, req.Strict) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		q := quotas[k]
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ep := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ep.Type, ep.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ep)
		}
		names := make([]string, 0, len(q.Values))
		for name := range q.Values {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = name, q.Values[name]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

func quotaMatches(e meta.QuotaEntity, filter []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	parts := map[string]*string{}
	for _, p := range e {
		parts[p.Type] = p.Name
	}
	for _, c := range filter {
		name, ok := parts[c.EntityType]
		if !ok {
			return false
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if name == nil || *name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if name != nil {
				return false
			}
		case kmsg.QuotasMatchTypeAny:
			if name == nil {
				return false
			}
		}
	}
	return !strict || len(parts) == len(filter)
}
