package protocol

// DescribeCluster (key 60), versions 0-1.
//
// Reports this broker as the only broker and the controller. Authorized
// operations are not computed.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeCluster, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	resp := r.NewResponse().(*kmsg.DescribeClusterResponse)
	b := r.Env.Broker
	cfg := b.Config()
	resp.ClusterID = b.ClusterID()
	resp.ControllerID = cfg.NodeID
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = cfg.NodeID, cfg.Host, cfg.Port
	if cfg.Rack != "" {
		rack := cfg.Rack
		br.Rack = &rack
	}
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{br}
	return resp, nil
}
