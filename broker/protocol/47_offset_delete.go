package protocol

// OffsetDelete (key 47), version 0 (KIP-496).
//
// Deletes committed offsets of a group: any partition while the group is
// empty; in an active consumer group only partitions of topics no member
// subscribes to (others: GROUP_SUBSCRIBED_TO_TOPIC).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	return r.Env.Groups.OffsetDelete(ctx, req), nil
}
