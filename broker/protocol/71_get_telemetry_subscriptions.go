package protocol

// GetTelemetrySubscriptions (key 71), version 0 (KIP-714).
//
// Answers the subscription of package broker/telemetry (Env.Telemetry):
// the client's instance ID (a new random one when the request carries the
// zero UUID, else the one sent), the subscription ID, the accepted
// compression types (zstd, lz4, gzip, snappy; none is implied), the push
// interval (telemetry.push.interval.ms), telemetry.max.bytes, delta
// temporality, and the metric name prefixes wanted
// (telemetry.requested.metrics). With the default, nothing wanted, the
// list is empty and nothing is remembered: clients (franz-go asks once
// ApiVersions lists this key) push nothing and ask again one push
// interval later. With metrics wanted, a client asking again within a
// push interval of its last request gets THROTTLING_QUOTA_EXCEEDED, as in
// Kafka. No ACL is needed (Kafka checks none either).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.GetTelemetrySubscriptions, 0, 0, handleGetTelemetrySubscriptions) }

func handleGetTelemetrySubscriptions(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := r.NewResponse().(*kmsg.GetTelemetrySubscriptionsResponse)
	r.Env.Telemetry.GetSubscriptions(r.Client.ClientID, req, resp)
	return resp, nil
}
