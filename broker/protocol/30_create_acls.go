package protocol

// CreateAcls (key 30), versions 0-3.
//
// Adds ACL bindings, one result per creation in request order. A binding
// that already exists is created again without error (Kafka's behaviour).
// A creation that is not a valid binding (auth.Binding.Validate: concrete
// enums, LITERAL or PREFIXED, Type:name principal, host "*" or an IP,
// CLUSTER named kafka-cluster) answers INVALID_REQUEST and is not stored;
// the others are. v0 creates LITERAL bindings. Needs ALTER on the CLUSTER
// (CLUSTER_AUTHORIZATION_FAILED on every result); without an authorizer
// every result is SECURITY_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.CreateACLs, 0, 3, handleCreateACLs) }

func handleCreateACLs(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.CreateACLsRequest)
	resp := r.NewResponse().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	setAll := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode = e.Code
			m := msg
			resp.Results[i].ErrorMessage = &m
		}
		return resp, nil
	}
	if !r.authzOn() || r.Env.ACLs == nil {
		return setAll(kerr.SecurityDisabled, "no authorizer is configured on the broker (authorizer.class.name)")
	}
	if !r.authorizedCluster(kmsg.ACLOperationAlter) {
		return setAll(kerr.ClusterAuthorizationFailed, "ALTER on the cluster is needed to create ACLs")
	}
	var valid []auth.Binding
	var validAt []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		b := auth.Binding{
			ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
		}
		if req.Version == 0 {
			b.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			msg := "invalid ACL " + b.String() + ": " + err.Error()
			resp.Results[i].ErrorMessage = &msg
			continue
		}
		valid = append(valid, b)
		validAt = append(validAt, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}
	if err := r.Env.ACLs.CreateACLs(ctx, valid); err != nil {
		r.Env.Log.Error(err, "create ACLs")
		for _, i := range validAt {
			resp.Results[i].ErrorCode = kerr.UnknownServerError.Code
			msg := err.Error()
			resp.Results[i].ErrorMessage = &msg
		}
	}
	return resp, nil
}
