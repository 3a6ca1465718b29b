package protocol

// AlterConfigs (key 33), versions 0-2.
//
// Replaces a topic's config overrides (configs left out return to their
// defaults), as Kafka's legacy AlterConfigs does, and likewise the dynamic
// configs of a broker resource (a broker ID, or empty for the cluster-wide
// default; broker/dynconfig.go). Unknown configs, static broker configs or
// bad values: INVALID_CONFIG. ValidateOnly checks without changing
// anything.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := r.NewResponse().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		configs := map[string]*string{}
		for _, c := range rr.Configs {
			if _, dup := configs[c.Name]; dup {
				err = fmt.Errorf("%w: config %q given twice", kerr.InvalidRequest, c.Name)
			}
			configs[c.Name] = c.Value
		}
		switch {
		case err != nil:
		case !r.configAuthorized(kmsg.ACLOperationAlterConfigs, rr.ResourceType, rr.ResourceName):
			err = configDenied(rr.ResourceType)
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			err = r.Env.Broker.AlterTopicConfigs(ctx, rr.ResourceName, configs, req.ValidateOnly)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			err = r.Env.Broker.AlterBrokerConfigs(ctx, rr.ResourceName, configs, req.ValidateOnly)
		default:
			err = fmt.Errorf("%w: only topic and broker configs can be altered", kerr.InvalidRequest)
		}
		res.ErrorCode = broker.ErrorCode(err)
		res.ErrorMessage = broker.ErrorMessage(err)
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}
