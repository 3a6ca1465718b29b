package protocol

// PushTelemetry (key 72), version 0 (KIP-714).
//
// Hands the client's metrics to package broker/telemetry (Env.Telemetry),
// which checks them as Kafka's ClientMetricsManager does: a reserved
// (zero) instance ID or a push after the instance's terminating push is
// INVALID_REQUEST, a subscription ID other than the one the broker gives
// that instance UNKNOWN_SUBSCRIPTION_ID (always, when no metrics are
// wanted), a push within a push interval of the last accepted one
// THROTTLING_QUOTA_EXCEEDED (the first push after a subscription request
// and a terminating push are let through), a compression type other than
// none, gzip, snappy, lz4 or zstd UNSUPPORTED_COMPRESSION_TYPE, a payload
// over telemetry.max.bytes, or one decompressing to more than
// telemetry.DecompressionRatio times it, TELEMETRY_TOO_LARGE, and one
// that is not OTLP metrics (or has more protobuf fields than
// telemetry.MaxElements) INVALID_RECORD. Accepted gauges and sums become
// strata_client_telemetry_value series on /metrics (docs/monitoring.md,
// "Client telemetry (KIP-714)"). No ACL is needed (as in Kafka).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.PushTelemetry, 0, 0, handlePushTelemetry) }

func handlePushTelemetry(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.PushTelemetryRequest)
	resp := r.NewResponse().(*kmsg.PushTelemetryResponse)
	resp.ErrorCode = r.Env.Telemetry.Push(r.Client.ClientID, req)
	return resp, nil
}
