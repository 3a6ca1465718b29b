package protocol

// DescribeCluster (key 60), versions 0-1.
//
// Reports the live brokers (with racks) and the controller from the cluster
// metadata; a standalone broker is the only broker and the controller.
// Authorized operations are not computed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.DescribeCluster, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	resp := r.NewResponse().(*kmsg.DescribeClusterResponse)
	b := r.Env.Broker
	resp.ClusterID = b.ClusterID()
	resp.ControllerID = b.ControllerID()
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	if req := r.Msg.(*kmsg.DescribeClusterRequest); req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeCluster, auth.ClusterResourceName)
	}
	for _, bi := range b.BrokersOn(r.Client.Listener) {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = bi.ID, bi.Host, bi.Port
		if bi.Rack != "" {
			rack := bi.Rack
			br.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	return resp, nil
}
