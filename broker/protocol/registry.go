// How to add a Kafka API to the broker
//
//  1. Create one file named after the API key, zero-padded to two digits, e.g.
//     11_join_group.go for JoinGroup (key 11). Start it with a comment that
//     states the versions served and the behaviour, like the other files here.
//
//  2. Register the handler from that file's init function:
//
//     func init() { register(kmsg.JoinGroup, 0, 9, handleJoinGroup) }
//
//     The registry is the single source of truth for ApiVersions: a key is
//     advertised exactly with the [min, max] range registered here. A request
//     for an unregistered key, or a version outside [min, max], closes the
//     connection (ApiVersions itself answers UNSUPPORTED_VERSION instead).
//
//  3. Write the handler:
//
//     func handleJoinGroup(ctx context.Context, r *Request) (kmsg.Response, error) {
//     	req := r.Msg.(*kmsg.JoinGroupRequest)
//     	resp := req.ResponseKind().(*kmsg.JoinGroupResponse) // version already set
//     	if err := r.CheckVersion(); err != nil {
//     		return nil, err
//     	}
//     	...
//     	return resp, nil
//     }
//
//     r.Msg is the parsed kmsg request (SetVersion and ReadFrom done);
//     r.Header carries the API key, version, correlation ID and client ID;
//     r.Client describes the connection (remote address, client ID);
//     r.Env gives the broker services: r.Env.Broker (topics, partitions,
//     node identity), r.Env.Groups (the consumer-group coordinator, see
//     env.go) and r.Env.Log (a logr.Logger).
//     Use r.NewResponse() to get the response kind with the version set.
//
//     Protocol errors (UNKNOWN_TOPIC_OR_PARTITION, NOT_COORDINATOR, ...) are
//     error codes inside the returned response. Returning a Go error means
//     "this request is malformed or the connection is unusable": the
//     connection is closed after a log line; other connections are not
//     affected. Returning (nil, nil) sends no response (Produce acks=0).
//
// Blocking handlers: requests of one connection are handled one at a time,
// in order (as Kafka does: a connection is muted until its response is
// queued), and every connection has its own goroutines. A handler may
// therefore block (JoinGroup waiting for a rebalance, Fetch long polling)
// without blocking any other connection. It must return when ctx is done:
// ctx is cancelled when the connection closes or the broker shuts down; on
// shutdown the response the handler returns is still written, so answer
// with what you have (e.g. REBALANCE_IN_PROGRESS / an empty fetch).

package protocol

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler serves one request. See the comment at the top of this file.
type Handler func(ctx context.Context, r *Request) (kmsg.Response, error)

// API is one registered API key with the versions served.
type API struct {
	Key    int16
	Min    int16
	Max    int16
	Handle Handler
}

var (
	registryMu sync.RWMutex
	registry   = map[int16]API{}
	// interceptors wrap a key's handler (intercept); applied by Lookup,
	// so they work whatever order the init functions ran in.
	interceptors = map[int16]func(Handler) Handler{}
)

// intercept wraps the handler of key, whichever file registers it: the
// wrapper serves the part of a request it owns and passes the rest on.
// Used where one API carries requests for two owners (WriteTxnMarkers for
// partitions and for group offsets, txn_markers.go).
func intercept(key kmsg.Key, wrap func(next Handler) Handler) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := interceptors[key.Int16()]; dup {
		panic(fmt.Sprintf("protocol: API key %d intercepted twice", key.Int16()))
	}
	interceptors[key.Int16()] = wrap
}

// register adds an API key to the registry. It panics on a duplicate key or
// an invalid range: both are programming errors caught by any test run.
func register(key kmsg.Key, minVersion, maxVersion int16, h Handler) {
	Register(API{Key: key.Int16(), Min: minVersion, Max: maxVersion, Handle: h})
}

// Register adds an API to the registry; handlers in this package use the
// lowercase register from their init functions.
func Register(api API) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[api.Key]; dup {
		panic(fmt.Sprintf("protocol: API key %d registered twice", api.Key))
	}
	if api.Min < 0 || api.Max < api.Min || api.Handle == nil {
		panic(fmt.Sprintf("protocol: invalid registration for API key %d", api.Key))
	}
	if req := kmsg.RequestForKey(api.Key); req == nil || api.Max > req.MaxVersion() {
		panic(fmt.Sprintf("protocol: kmsg cannot encode API key %d up to version %d", api.Key, api.Max))
	}
	registry[api.Key] = api
}

// Lookup returns the registered API for key.
func Lookup(key int16) (API, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	api, ok := registry[key]
	if wrap := interceptors[key]; ok && wrap != nil {
		api.Handle = wrap(api.Handle)
	}
	return api, ok
}

// APIs returns every registered API sorted by key.
func APIs() []API {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]API, 0, len(registry))
	for _, api := range registry {
		out = append(out, api)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
