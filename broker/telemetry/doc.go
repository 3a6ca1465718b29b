// Package telemetry is the broker side of KIP-714 client telemetry: what
// GetTelemetrySubscriptions (key 71) answers and what PushTelemetry (key
// 72) accepts, as Kafka's ClientMetricsManager does, and a Prometheus
// collector of what clients pushed.
//
// Which metrics clients should send is a static broker config
// (telemetry.requested.metrics: metric name prefixes, * for all) rather
// than Kafka's client-metrics config resources; its default, nothing,
// answers every GetTelemetrySubscriptions with an empty list and keeps no
// state, so clients (franz-go asks as soon as ApiVersions lists key 71)
// push nothing and cost one small request per push interval.
//
// With metrics wanted, the Manager owns one record per client instance:
// its subscription ID (a CRC-32C of the subscription and the instance ID,
// so every broker with the same config computes the same one, as Kafka),
// the times of its last GetTelemetrySubscriptions and PushTelemetry (a
// push sooner than the push interval after the last one is
// THROTTLING_QUOTA_EXCEEDED, except the first push after a subscription
// and a terminating one), whether it sent its terminating push, and the
// series it pushed. Everything is bounded: at most Config.MaxClients
// instances (least recently seen evicted first, and any unseen for three
// push intervals, at least a minute, expire), MaxSeriesPerClient and
// MaxSeries series, label values cut to a fixed length, payloads of at
// most MaxBytes compressed and DecompressionRatio times that
// decompressed, at most MaxElements protobuf fields per payload (checked
// before the payload is unmarshalled, so a payload of a million empty
// messages cannot turn into a million Go structs), and a few decodes at
// once. One mutex guards the Manager's state; decoding happens outside it.
package telemetry
