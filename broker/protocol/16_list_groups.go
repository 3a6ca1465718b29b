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
	return r.Env.Groups.ListGroups(ctx, req), nil
}
