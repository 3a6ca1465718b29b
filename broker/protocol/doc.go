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
// Security (sasl.go): a server serves several listeners (ServeListener),
// each with a name, SASL or not, and TLS done by the caller's listener
// (tls.NewListener). A new connection first completes its TLS handshake
// (the client certificate, if any, maps to the principal), then, on a SASL
// listener, is served one frame at a time until SaslHandshake +
// SaslAuthenticate (or SaslHandshake v0 raw tokens) authenticate it: any
// other request closes it. Re-authentication (KIP-368) runs in the normal
// pipeline; a request after the session expired closes the connection.
// Handlers read the principal with Request.Principal (User:ANONYMOUS on
// PLAINTEXT) and the listener name with Request.Client.Listener, which
// Metadata, FindCoordinator and DescribeCluster use to advertise each
// broker's address on that listener.
//
// Authorization (authz.go): with Env.Authorizer set (authorizer.class.name)
// every handler asks Request.Authorized before it acts and answers Kafka's
// *_AUTHORIZATION_FAILED codes; CreateAcls, DescribeAcls and DeleteAcls
// (29-31) manage the bindings in Env.ACLs. Without an authorizer every
// principal may do everything and the ACL APIs answer SECURITY_DISABLED.
//
// Limits (limits.go, budget.go, connlimits.go) keep abusive clients from
// taking the broker's memory, CPU and connection slots: frames are
// checked and take their share of a server-wide memory budget before they
// are allocated (large frames admitted fairly between connections), the
// batches one request decodes share a decompression budget
// (Request.DecompressBudget), connections are admitted against Kafka's
// limits (max.connections with an inter-broker reserve, per listener, per
// IP, creation rates and KIP-612's connection_creation_rate quotas) and
// must authenticate or send a first request within
// connections.authentication.timeout.ms, a connection whose responses are
// not read gets no new request dispatched, Fetch responses are capped
// (fetch.max.bytes) and fetch sessions bounded. Client quotas (quota.go,
// package broker/quota) throttle byte rates, request time and partition
// mutations per user and client ID.
//
// Handlers reach the broker's state through Env (see registry.go for how to
// add an API).
package protocol
