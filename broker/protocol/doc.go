// Package protocol is the Kafka wire-protocol server of a Strata broker.
//
// It owns the framing (a big-endian int32 size before every request and
// response), request headers v0/v1/v2, response headers v0/v1, the
// per-connection goroutines (a reader, a handler that serves requests one at
// a time in order, and a writer), and the registry of API handlers, one file
// per API key named NN_api_name.go. Message bodies are encoded and decoded
// with franz-go's kmsg; nothing here hand-writes a message codec.
//
// A malformed request (bad frame length, garbage header, unknown key,
// unsupported version, an undecodable body, a frame over the configured
// maximum) closes that connection only, with a log line. ApiVersions with an
// unsupported version is answered with a v0 response carrying
// UNSUPPORTED_VERSION and the full key list, as Kafka does, so clients can
// downgrade.
//
// Limits (limits.go, budget.go) keep abusive clients from taking the
// broker's memory: frames are checked and take their share of a
// server-wide memory budget before they are allocated, connections are
// counted (max.connections, max.connections.per.ip), a connection whose
// responses are not read gets no new request dispatched, Fetch responses
// are capped (fetch.max.bytes) and fetch sessions bounded.
//
// Handlers reach the broker's state through Env (see registry.go for how to
// add an API).
package protocol
