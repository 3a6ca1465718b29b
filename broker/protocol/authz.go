package protocol

// Authorization (docs/security.md "ACLs"): with an authorizer on
// (Env.Authorizer, authorizer.class.name) every handler asks, before it
// acts, whether the connection's principal from the client's IP address
// may perform the operation on the resource, and answers Kafka's error
// code for a refusal (TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) in the response, as Kafka's
// KafkaApis does for the same API. Without an authorizer every principal
// may do everything.

import (
	"net"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

// DenialObserver counts refused authorizations
// (strata_authorization_denied_total).
type DenialObserver interface {
	AuthorizationDenied(api string, resourceType string)
}

// authzOn says whether the broker enforces ACLs.
func (r *Request) authzOn() bool { return r.Env.Authorizer != nil && !r.internal }

// clientHost is the client's IP address as ACL host bindings name it
// (IPv4-mapped IPv6 addresses in their IPv4 form).
func (c ClientInfo) clientHost() string {
	if c.Remote == nil {
		return ""
	}
	if ta, ok := c.Remote.(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap().String()
		}
	}
	host, _, err := net.SplitHostPort(c.Remote.String())
	if err != nil {
		return c.Remote.String()
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return host
}

func (r *Request) action(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) auth.Action {
	return auth.Action{Principal: r.Principal(), Host: r.Client.clientHost(), Operation: op, ResourceType: rt, ResourceName: name}
}

// Authorized says whether the request's principal may perform op on the
// resource; a refusal is counted. Always true without an authorizer.
func (r *Request) Authorized(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !r.authzOn() {
		return true
	}
	if r.Env.Authorizer.Authorize(r.action(op, rt, name)) {
		return true
	}
	r.denied(rt)
	return false
}

// authorizedQuiet is Authorized without counting a refusal: for
// filtering what a listing shows (Metadata of every topic, ListGroups),
// where a hidden resource is not a refused request.
func (r *Request) authorizedQuiet(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return !r.authzOn() || r.Env.Authorizer.Authorize(r.action(op, rt, name))
}

// authorizedCluster is Authorized on the CLUSTER resource.
func (r *Request) authorizedCluster(op kmsg.ACLOperation) bool {
	return r.Authorized(op, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName)
}

// authorizedAnyResource says whether the principal may perform op on some
// resource of the type (auth.DecideAnyResource); counted when refused.
func (r *Request) authorizedAnyResource(op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if !r.authzOn() {
		return true
	}
	if r.Env.Authorizer.AuthorizeAnyResource(r.action(op, rt, "")) {
		return true
	}
	r.denied(rt)
	return false
}

// authorizedOps is Kafka's AuthorizedOperations bit field of the
// resource for the principal: every operation of the resource type when
// no authorizer is on.
func (r *Request) authorizedOps(rt kmsg.ACLResourceType, name string) int32 {
	if !r.authzOn() {
		return auth.AuthorizedOperations(nil, auth.Policy{AllowIfNoACL: true}, auth.Action{ResourceType: rt, ResourceName: name})
	}
	return r.Env.Authorizer.AuthorizedOperations(r.action(0, rt, name))
}

func (r *Request) denied(rt kmsg.ACLResourceType) {
	if o := r.Env.Denials; o != nil {
		o.AuthorizationDenied(kmsg.NameForKey(r.Header.Key), auth.ResourceTypeName(rt))
	}
}

// configAuthorized says whether the principal may perform op
// (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource: the topic, or
// the cluster for broker configs. Other resource types are left to the
// handler's own refusal.
func (r *Request) configAuthorized(op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) bool {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return r.Authorized(op, kmsg.ACLResourceTypeTopic, name)
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return r.authorizedCluster(op)
	}
	return true
}

// configDenied is the refusal of a config resource.
func configDenied(rt kmsg.ConfigResourceType) error {
	if rt == kmsg.ConfigResourceTypeTopic {
		return kerr.TopicAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}
