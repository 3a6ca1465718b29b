package protocol

// FindCoordinator (key 10), versions 0-5.
//
// Group keys (type 0) and transactional ids (type 1) are placed on a
// broker by group.CoordinatorFor, a rendezvous hash of the key over the
// live brokers (every broker computes the same owner from the same cluster
// view); with a single broker that is this broker. v4+ resolves a
// batch of keys (CoordinatorKeys), each with its own error. Other key types
// (share groups, KIP-932) get INVALID_REQUEST. Transactional IDs are
// coordinated by broker/txn on the broker named here.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/group"
)

func init() { register(kmsg.FindCoordinator, 0, 5, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := r.NewResponse().(*kmsg.FindCoordinatorResponse)
	brokers := r.Env.Broker.BrokersOn(r.Client.Listener) // live brokers (this one alone when standalone)
	live := make([]int32, 0, len(brokers))
	for _, b := range brokers {
		live = append(live, b.ID)
	}
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		switch {
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			c.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported coordinator type"
			c.ErrorMessage = &msg
		case req.CoordinatorType == 0 && !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key):
			c.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case req.CoordinatorType == 1 && !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key):
			c.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case r.Env.Groups == nil:
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			node := group.CoordinatorFor(key, live)
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			for _, b := range brokers {
				if b.ID == node {
					c.ErrorCode, c.NodeID, c.Host, c.Port = 0, b.ID, b.Host, b.Port
				}
			}
		}
		return c
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, find(key))
		}
		return resp, nil
	}
	c := find(req.CoordinatorKey)
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
	if req.Version >= 1 {
		resp.ErrorMessage = c.ErrorMessage
	}
	return resp, nil
}
