package protocol

// DeleteGroups (key 42), versions 0-2.
//
// Deletes groups without members together with their committed offsets,
// and share groups (KIP-932) without members together with their
// share-partition state; active groups get NON_EMPTY_GROUP, unknown ones
// GROUP_ID_NOT_FOUND. Requires DELETE on each group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.DeleteGroupsResponse)
		for _, id := range req.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	all := req.Groups
	var allowed []string
	for _, id := range all {
		if r.Authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, id) {
			allowed = append(allowed, id)
		}
	}
	resp := r.NewResponse().(*kmsg.DeleteGroupsResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		resp = r.Env.Groups.DeleteGroups(ctx, req)
	}
	if len(allowed) < len(all) {
		done := map[string]bool{}
		for _, id := range allowed {
			done[id] = true
		}
		for _, id := range all {
			if !done[id] {
				g := kmsg.NewDeleteGroupsResponseGroup()
				g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
				resp.Groups = append(resp.Groups, g)
			}
		}
	}
	return resp, nil
}
