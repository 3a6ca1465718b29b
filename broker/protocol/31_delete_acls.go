package protocol

// DeleteAcls (key 31), versions 0-3.
//
// Removes the bindings each filter selects (as DescribeAcls selects them)
// and lists them, one result per filter in request order; a binding two
// filters select is listed by both. A filter with an UNKNOWN enum answers
// INVALID_REQUEST and deletes nothing. v0 filters are LITERAL. Needs ALTER
// on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED on every result); without
// an authorizer every result is SECURITY_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.DeleteACLs, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DeleteACLsRequest)
	resp := r.NewResponse().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	setErr := func(i int, e *kerr.Error, msg string) {
		resp.Results[i].ErrorCode = e.Code
		resp.Results[i].ErrorMessage = &msg
	}
	setAll := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			setErr(i, e, msg)
		}
		return resp, nil
	}
	if !r.authzOn() || r.Env.ACLs == nil {
		return setAll(kerr.SecurityDisabled, "no authorizer is configured on the broker (authorizer.class.name)")
	}
	if !r.authorizedCluster(kmsg.ACLOperationAlter) {
		return setAll(kerr.ClusterAuthorizationFailed, "ALTER on the cluster is needed to delete ACLs")
	}
	var filters []auth.Filter
	var filterAt []int
	for i, rf := range req.Filters {
		f := auth.Filter{
			ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType,
		}
		if req.Version == 0 {
			f.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if err := f.Validate(); err != nil {
			setErr(i, kerr.InvalidRequest, "invalid ACL filter: "+err.Error())
			continue
		}
		filters = append(filters, f)
		filterAt = append(filterAt, i)
	}
	if len(filters) == 0 {
		return resp, nil
	}
	deleted, err := r.Env.ACLs.DeleteACLs(ctx, filters)
	if err != nil {
		r.Env.Log.Error(err, "delete ACLs")
		for _, i := range filterAt {
			setErr(i, kerr.UnknownServerError, err.Error())
		}
		return resp, nil
	}
	for j, i := range filterAt {
		for _, b := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	return resp, nil
}
