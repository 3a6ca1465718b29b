package protocol

// DescribeAcls (key 29), versions 0-3.
//
// Lists the ACL bindings the filter selects (auth.Filter: ANY matches
// every value, a null name, principal or host every one; pattern type
// MATCH selects the bindings that apply to the named resource), grouped by
// resource pattern. v0 knows LITERAL patterns only. Needs DESCRIBE on the
// CLUSTER (CLUSTER_AUTHORIZATION_FAILED); without an authorizer the answer
// is SECURITY_DISABLED, as Kafka's.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.DescribeACLs, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := r.NewResponse().(*kmsg.DescribeACLsResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		resp.ErrorMessage = &msg
		return resp, nil
	}
	if !r.authzOn() || r.Env.ACLs == nil {
		return fail(kerr.SecurityDisabled, "no authorizer is configured on the broker (authorizer.class.name)")
	}
	if !r.authorizedCluster(kmsg.ACLOperationDescribe) {
		return fail(kerr.ClusterAuthorizationFailed, "DESCRIBE on the cluster is needed to describe ACLs")
	}
	pattern := req.ResourcePatternType
	if req.Version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	f := auth.Filter{
		ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: pattern,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	bs, err := r.Env.ACLs.ACLs(ctx)
	if err != nil {
		r.Env.Log.Error(err, "describe ACLs")
		return fail(kerr.UnknownServerError, err.Error())
	}
	type pat struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	index := map[pat]int{}
	for _, b := range bs {
		if !f.Matches(b) {
			continue
		}
		k := pat{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := index[k]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = k.rt, k.name, k.pt
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			index[k] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}
