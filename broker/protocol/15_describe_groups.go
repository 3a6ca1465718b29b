package protocol

// DescribeGroups (key 15), versions 0-5.
//
// State, protocol type, selected protocol and members (client id and
// host; member metadata and assignment only while the group is Stable, as
// Kafka does). An unknown group is reported as state "Dead" without error.
// Authorized operations are not computed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeGroups, 0, 5, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.DescribeGroupsResponse)
		for _, id := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	return r.Env.Groups.DescribeGroups(ctx, req), nil
}
