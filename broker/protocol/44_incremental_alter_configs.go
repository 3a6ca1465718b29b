package protocol

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// SET, DELETE, APPEND and SUBTRACT (the last two for list configs only) on
// topic configs, and SET and DELETE on the dynamic configs of a broker
// resource (a broker ID, or empty for the cluster-wide default;
// broker/dynconfig.go). Unknown configs, static broker configs or bad
// values: INVALID_CONFIG (a broker DELETE of a config that is not set is a
// no-op). ValidateOnly checks without changing anything.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.NewResponse().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		ops := make([]broker.ConfigOp, 0, len(rr.Configs))
		for _, c := range rr.Configs {
			ops = append(ops, broker.ConfigOp{Name: c.Name, Op: int8(c.Op), Value: c.Value})
		}
		switch {
		case !r.configAuthorized(kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName):
			err = configDenied(rr.ResourceType)
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			err = r.Env.Broker.IncrementalAlterTopicConfigs(ctx, rr.ResourceName, ops, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			err = r.Env.Broker.IncrementalAlterBrokerConfigs(ctx, rr.ResourceName, ops, req.ValidateOnly)
		default:
			err = fmt.Errorf("%w: only topic and broker configs can be altered", kerr.InvalidRequest)
		}
		res.ErrorCode = broker.ErrorCode(err)
		res.ErrorMessage = broker.ErrorMessage(err)
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}
