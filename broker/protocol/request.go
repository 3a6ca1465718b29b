package protocol

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/traffic"
)

// Header is a parsed request header (v0, v1 or v2).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client ID.
	ClientID *string
}

// ClientInfo describes the connection a request came from.
type ClientInfo struct {
	// ConnID numbers connections of one server from 1.
	ConnID   uint64
	Remote   net.Addr
	ClientID string
	// Listener is the name of the listener the connection came in on
	// ("" for Serve's unnamed listener).
	Listener string
	// session is the connection's security state (sasl.go): principal,
	// SASL exchange, session expiry.
	session *session
	// rack is the connection's client.rack once a Fetch sent it, or the
	// zone its client ID names (ClientIDZone); shared by every request of
	// the connection.
	rack *atomic.Pointer[string]
	// walSaidInline: the last wal.policy signal this connection's
	// follower got said inline (replica.SignalWALPolicy).
	walSaidInline *atomic.Bool
	// zoneLocal is the connection's idempotent produce streams, for
	// zone-local produce (zonelocal_order.go); nil: no order kept.
	zoneLocal *zlStreams
}

// Rack returns the rack (client.rack) the connection's client sent in a
// Fetch, or "".
func (c ClientInfo) Rack() string {
	if c.rack == nil {
		return ""
	}
	if r := c.rack.Load(); r != nil {
		return *r
	}
	return ""
}

// ClientIDZonePrefix marks the client's zone inside its client ID:
// "strata_az=<zone>", alone or as one of the comma-, semicolon- or
// blank-separated parts ("orders-svc,strata_az=b"). Kafka's producer has no
// client.rack (only consumers send their rack, in Fetch), so this is how a
// producer tells the broker its zone, for the traffic counters; the
// convention is the one WarpStream (ws_az=) and AutoMQ (automq_az=) use.
const ClientIDZonePrefix = "strata_az="

// ClientIDZone returns the zone a client ID names with ClientIDZonePrefix,
// or "".
func ClientIDZone(clientID string) string {
	for _, part := range strings.FieldsFunc(clientID, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
		if zone, ok := strings.CutPrefix(part, ClientIDZonePrefix); ok && zone != "" {
			return zone
		}
	}
	return ""
}

// SetRack records the client's rack for the connection's later requests.
func (c ClientInfo) SetRack(rack string) {
	if c.rack != nil && rack != "" && rack != c.Rack() {
		c.rack.Store(&rack)
	}
}

// Request is one decoded request handed to a Handler.
type Request struct {
	Header Header
	// Msg is the decoded body; its version is Header.Version.
	Msg    kmsg.Request
	Client ClientInfo
	Env    *Env

	// trafficPath and peerZone classify the request's bytes for the
	// traffic counters (set by the handler with SetTraffic; unset
	// requests are not counted).
	trafficPath traffic.Path
	peerZone    string

	// finish, when a handler sets it (Defer), runs after the handler
	// returned and before its response is written, off the connection's
	// dispatch loop: the next requests of the connection are dispatched
	// meanwhile, responses still go out in request order.
	finish func()

	// mem is the request's share of the server's memory budget.
	mem *memHold
	// size is the request's frame size (0 for a request not read from a
	// connection) and decompress its decompression budget, made on first
	// use (DecompressBudget).
	size       int
	decompress *record.Budget

	// internal marks a request the broker sends itself (Env.Internal):
	// no ACL check applies.
	internal bool

	// throttle is a client-quota throttle the handler decided (a
	// partition-mutation budget, quota.go): the connection is muted for
	// it after the answer.
	throttle time.Duration
	// parked is the time the handler spent parked (a long-poll Fetch
	// waiting for data, a group join or sync waiting for the other
	// members): waiting, not handling, so request_percentage does not
	// count it (quota.go).
	parked time.Duration
}

// addParked records d of the handler's time as parked (see Request.parked).
func (r *Request) addParked(d time.Duration) {
	if d > 0 {
		r.parked += d
	}
}

// DecompressBudget returns the request's decompression budget: every
// record batch the handler decodes (Produce validation, ListOffsets by
// timestamp over stored and tiered batches) counts against it, so one
// request decompresses at most record.RequestDecompressionBytes of its
// frame size (plus one batch's own limit; ListOffsets adds
// perLookupDecompression per lookup), however many small batches each
// stay under their own limit.
func (r *Request) DecompressBudget() *record.Budget {
	if r.decompress == nil {
		r.decompress = record.NewBudget(record.RequestDecompressionBytes(r.size))
	}
	return r.decompress
}

// Defer makes fn run after the handler returns and before the response
// is encoded, while the connection goes on dispatching the next requests
// (the acks=all wait of Produce). Responses keep the request order.
func (r *Request) Defer(fn func()) { r.finish = fn }

// SetTraffic tells the server which data path the request and its
// response belong to, and the peer's zone ("" = unknown), for
// strata_traffic_bytes_total.
func (r *Request) SetTraffic(path traffic.Path, peerZone string) {
	r.trafficPath, r.peerZone = path, peerZone
}

// CheckVersion returns an error (closing the connection) if the request's
// version is outside the range registered for its key. The server checks
// before dispatch too; handlers call it first so that a handler used
// directly (tests, fuzzing) holds the same promise.
func (r *Request) CheckVersion() error {
	api, ok := Lookup(r.Header.Key)
	if !ok {
		return fmt.Errorf("API key %d is not served", r.Header.Key)
	}
	if r.Header.Version < api.Min || r.Header.Version > api.Max {
		return fmt.Errorf("%s version %d is not served (want %d-%d)", kmsg.NameForKey(r.Header.Key), r.Header.Version, api.Min, api.Max)
	}
	return nil
}

// NewResponse returns the response kind of the request with the request's
// version set.
func (r *Request) NewResponse() kmsg.Response {
	resp := r.Msg.ResponseKind()
	resp.SetVersion(r.Header.Version)
	return resp
}
