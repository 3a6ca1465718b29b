package protocol

// ListGroups (key 16), versions 0-5.
//
// Lists the groups this broker coordinates, including groups that only
// store offsets. v4 filters by state (case-insensitive), v5 by type: every
// group here is "classic".

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.ListGroups, 0, 5, handleListGroups) }

func handleListGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ListGroupsRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp := r.Env.Groups.ListGroups(ctx, req)
	// As Kafka: DESCRIBE on the cluster lists every group, else the
	// groups the principal may DESCRIBE.
	if r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName) {
		return resp, nil
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp, nil
}
