package protocol

// OffsetFetch (key 9), versions 0-9.
//
// Returns committed offsets, leader epochs (v5+) and metadata; -1 for
// partitions without a commit and for unknown groups. v2+ with a null
// topic list returns every committed partition of the group; v8+ fetches
// several groups in one request. RequireStable (v7+) never has pending
// transactional offsets to wait for. v9's member id / epoch belong to the
// KIP-848 protocol and are ignored for classic groups, as in Kafka. v10
// (topic ids) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	if r.Env.Groups == nil {
		resp := r.NewResponse().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	return r.Env.Groups.OffsetFetch(ctx, req), nil
}
