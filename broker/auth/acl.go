package auth

// Kafka's ACL model (KIP-11, KIP-290 prefixed patterns): a binding allows
// or denies one operation on a resource pattern to a principal from a
// host. The enums are Kafka's wire values (kmsg's types), so bindings go
// to and from CreateAcls/DescribeAcls/DeleteAcls without translation.

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterResourceName is the one name of the CLUSTER resource.
const ClusterResourceName = "kafka-cluster"

// Wildcards of a binding: a LITERAL resource name "*" matches every
// resource of its type, principal "User:*" every principal, host "*"
// every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one ACL: (resource pattern, principal, host, operation,
// permission).
type Binding struct {
	ResourceType kmsg.ACLResourceType        `json:"resourceType"`
	ResourceName string                      `json:"resourceName"`
	PatternType  kmsg.ACLResourcePatternType `json:"patternType"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s, %s %s)", b.ResourceType, b.PatternType, b.ResourceName, b.Principal, b.Host, b.Permission, b.Operation)
}

// servedResourceTypes are the resource types the broker authorizes.
// DELEGATION_TOKEN and USER resources exist in Kafka for APIs Strata does
// not serve; a binding on them could never take effect, so it is refused.
var servedResourceTypes = []kmsg.ACLResourceType{
	kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId,
}

// Validate checks a binding to be created, with Kafka's rules: concrete
// enums (no ANY/MATCH/UNKNOWN), a "Type:name" principal, a host that is
// "*" or an IP address, CLUSTER named kafka-cluster. The error text is the
// answer's error message (INVALID_REQUEST).
func (b Binding) Validate() error {
	switch {
	case !containsRT(servedResourceTypes, b.ResourceType):
		return fmt.Errorf("resource type %s: want one of TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID", b.ResourceType)
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("pattern type %s: want LITERAL or PREFIXED", b.PatternType)
	case b.ResourceName == "":
		return fmt.Errorf("empty resource name")
	case b.PatternType == kmsg.ACLResourcePatternTypePrefixed && b.ResourceName == WildcardResource:
		return fmt.Errorf("a PREFIXED pattern cannot be the wildcard %q (use LITERAL %q)", WildcardResource, WildcardResource)
	case b.ResourceType == kmsg.ACLResourceTypeCluster && (b.ResourceName != ClusterResourceName || b.PatternType != kmsg.ACLResourcePatternTypeLiteral):
		return fmt.Errorf("the CLUSTER resource is LITERAL %q", ClusterResourceName)
	case b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationIdempotentWrite:
		return fmt.Errorf("operation %s is not one the broker authorizes", b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("permission %s: want ALLOW or DENY", b.Permission)
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q: want Type:name (User:alice, User:*)", b.Principal)
	}
	if b.Host != WildcardHost {
		if _, err := netip.ParseAddr(b.Host); err != nil {
			return fmt.Errorf("host %q: want %q or an IP address", b.Host, WildcardHost)
		}
	}
	return nil
}

func containsRT(list []kmsg.ACLResourceType, rt kmsg.ACLResourceType) bool {
	for _, x := range list {
		if x == rt {
			return true
		}
	}
	return false
}

// Filter selects bindings (DescribeAcls, DeleteAcls): ANY matches every
// value of an enum, nil every name, principal or host. Pattern type MATCH
// selects the bindings that would apply to the named resource (the literal
// name, the "*" wildcard and every prefix of it); ANY with a name selects
// LITERAL and PREFIXED bindings with exactly that name.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate refuses filters that match nothing by construction (UNKNOWN
// enums), as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown:
		return fmt.Errorf("resource type UNKNOWN")
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown:
		return fmt.Errorf("pattern type UNKNOWN")
	case f.Operation == kmsg.ACLOperationUnknown:
		return fmt.Errorf("operation UNKNOWN")
	case f.Permission == kmsg.ACLPermissionTypeUnknown:
		return fmt.Errorf("permission UNKNOWN")
	}
	return nil
}

// Matches says whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != kmsg.ACLPermissionTypeAny && f.Permission != b.Permission {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case kmsg.ACLResourcePatternTypeMatch:
		return f.ResourceName == nil || patternCovers(b, *f.ResourceName)
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}

// patternCovers says whether b's resource pattern applies to the resource
// called name (of b's type).
func patternCovers(b Binding, name string) bool {
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == WildcardResource
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// Action is one authorization question: may principal, connected from
// host (the client's IP address), perform op on the resource?
type Action struct {
	Principal    Principal
	Host         string
	Operation    kmsg.ACLOperation
	ResourceType kmsg.ACLResourceType
	ResourceName string
}

// Policy is what decides besides the bindings.
type Policy struct {
	// SuperUsers are allowed everything (super.users).
	SuperUsers []Principal
	// AllowIfNoACL allows an action on a resource that no binding names
	// at all (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// IsSuper says whether p is a super user.
func (p Policy) IsSuper(pr Principal) bool {
	for _, s := range p.SuperUsers {
		if s == pr {
			return true
		}
	}
	return false
}

// Decide answers an action from the bindings, as Kafka's
// StandardAuthorizer does:
//   - super users are allowed everything;
//   - a DENY binding that matches (resource pattern, principal or User:*,
//     host or *, the operation itself or ALL) refuses, whatever allows;
//   - else an ALLOW binding that matches allows; its operation may also
//     imply the requested one: READ, WRITE, DELETE and ALTER imply
//     DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (DENY bindings
//     imply nothing: denying READ does not deny DESCRIBE);
//   - else, when no binding names the resource at all (for any principal),
//     Policy.AllowIfNoACL decides; otherwise refused.
func Decide(bindings []Binding, pol Policy, a Action) bool {
	return decide(pol, a, bindings)
}

// decide is Decide over bindings given in several lists (an index's
// candidates); bindings whose pattern does not cover the resource are
// skipped, so any superset of the relevant bindings gives the same answer.
func decide(pol Policy, a Action, lists ...[]Binding) bool {
	if pol.IsSuper(a.Principal) {
		return true
	}
	allowed, resourceHasACL := false, false
	for _, bindings := range lists {
		for _, b := range bindings {
			if b.ResourceType != a.ResourceType || !patternCovers(b, a.ResourceName) {
				continue
			}
			resourceHasACL = true
			if !principalMatches(b.Principal, a.Principal) || (b.Host != WildcardHost && b.Host != a.Host) {
				continue
			}
			switch b.Permission {
			case kmsg.ACLPermissionTypeDeny:
				if b.Operation == kmsg.ACLOperationAll || b.Operation == a.Operation {
					return false
				}
			case kmsg.ACLPermissionTypeAllow:
				if Implies(b.Operation, a.Operation) {
					allowed = true
				}
			}
		}
	}
	if allowed {
		return true
	}
	return !resourceHasACL && pol.AllowIfNoACL
}

// DecideAnyResource answers whether principal may perform op on some
// resource of the type (Kafka's authorizeByResourceType, used by
// InitProducerId without a transactional ID: IDEMPOTENT_WRITE on the
// cluster or WRITE on any topic). It is allowed when an ALLOW binding of
// the type matches the principal and host and the same resource is not
// denied to it by Decide; a super user always is; with AllowIfNoACL, a
// type without any binding too.
func DecideAnyResource(bindings []Binding, pol Policy, a Action) bool {
	if pol.IsSuper(a.Principal) {
		return true
	}
	typeHasACL := false
	for _, b := range bindings {
		if b.ResourceType != a.ResourceType {
			continue
		}
		typeHasACL = true
		if b.Permission != kmsg.ACLPermissionTypeAllow || !Implies(b.Operation, a.Operation) ||
			!principalMatches(b.Principal, a.Principal) || (b.Host != WildcardHost && b.Host != a.Host) {
			continue
		}
		// The resource this binding allows (a prefixed pattern: its
		// prefix itself, a resource it names) must not be denied.
		probe := a
		probe.ResourceName = b.ResourceName
		if Decide(bindings, Policy{}, probe) {
			return true
		}
	}
	return !typeHasACL && pol.AllowIfNoACL
}

func principalMatches(pattern string, p Principal) bool {
	return pattern == WildcardPrincipal || pattern == string(p)
}

// Implies says whether an ALLOW binding for granted covers op.
func Implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == kmsg.ACLOperationAll {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// resourceOperations are the operations that apply to each resource type
// (AuthorizedOperations in Metadata, DescribeGroups, DescribeCluster).
var resourceOperations = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	kmsg.ACLResourceTypeTopic: {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs},
	kmsg.ACLResourceTypeGroup: {kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete},
	kmsg.ACLResourceTypeCluster: {kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe},
	kmsg.ACLResourceTypeTransactionalId: {kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite},
}

// AuthorizedOperations returns Kafka's bit field of the operations the
// principal may perform on the resource (bit n set: operation n allowed).
func AuthorizedOperations(bindings []Binding, pol Policy, a Action) int32 {
	var bits int32
	for _, op := range resourceOperations[a.ResourceType] {
		a.Operation = op
		if Decide(bindings, pol, a) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// SortBindings orders bindings for stable answers and files.
func SortBindings(bs []Binding) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].String() < bs[j].String() })
}
