package protocol

// DescribeConfigs (key 32), versions 0-4.
//
// Topic resources report every supported topic config with its source
// (DYNAMIC_TOPIC_CONFIG for overrides, STATIC_BROKER_CONFIG for broker-level
// defaults from the config file, DEFAULT_CONFIG otherwise), synonyms (v1+,
// when asked) and type and documentation (v3+). Broker resources (the name
// is this broker's ID, or empty for the cluster-wide view) report the
// broker's static configs, read-only (STATIC_BROKER_CONFIG or
// DEFAULT_CONFIG), and the dynamic broker configs (broker/dynconfig.go:
// the replication throttle rates) with their source: DYNAMIC_BROKER_CONFIG
// for this broker's own value, DYNAMIC_DEFAULT_BROKER_CONFIG for the
// cluster-wide default, DEFAULT_CONFIG otherwise; the empty name shows the
// cluster-wide level. Other resource types get INVALID_REQUEST.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := r.NewResponse().(*kmsg.DescribeConfigsResponse)
	b := r.Env.Broker
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var (
			entries []broker.ConfigEntry
			err     error
		)
		switch {
		case !r.configAuthorized(kmsg.ACLOperationDescribeConfigs, rr.ResourceType, rr.ResourceName):
			err = configDenied(rr.ResourceType)
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			entries, err = b.DescribeTopicConfigs(rr.ResourceName, rr.ConfigNames)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != fmt.Sprint(b.NodeID()) {
				err = fmt.Errorf("%w: broker %q is not this broker (%d)", kerr.InvalidRequest, rr.ResourceName, b.NodeID())
				break
			}
			entries = b.DescribeBrokerConfigs(rr.ResourceName, rr.ConfigNames)
		default:
			err = fmt.Errorf("%w: resource type %v is not supported", kerr.InvalidRequest, rr.ResourceType)
		}
		if err != nil {
			res.ErrorCode = broker.ErrorCode(err)
			res.ErrorMessage = broker.ErrorMessage(err)
			resp.Resources = append(resp.Resources, res)
			continue
		}
		for _, e := range entries {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = e.Name
			v := e.Value
			c.Value = &v
			c.ReadOnly = e.ReadOnly
			c.IsSensitive = e.Sensitive
			c.IsDefault = e.Source == broker.SourceDefault
			c.Source = kmsg.ConfigSource(e.Source)
			c.ConfigType = kmsg.ConfigType(e.Type)
			if req.IncludeDocumentation && e.Doc != "" {
				doc := e.Doc
				c.Documentation = &doc
			}
			if req.IncludeSynonyms {
				for _, s := range e.Synonyms {
					sv := s.Value
					c.ConfigSynonyms = append(c.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
						Name: s.Name, Value: &sv, Source: kmsg.ConfigSource(s.Source),
					})
				}
			}
			res.Configs = append(res.Configs, c)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}
