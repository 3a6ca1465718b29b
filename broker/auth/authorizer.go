package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACLStore keeps ACL bindings. Implementations are safe for concurrent
// use.
type ACLStore interface {
	// ACLs returns every binding.
	ACLs(ctx context.Context) ([]Binding, error)
	// CreateACLs adds bindings; creating an existing binding is a no-op.
	CreateACLs(ctx context.Context, bs []Binding) error
	// DeleteACLs removes the bindings each filter matches and returns
	// them, per filter (a binding matched by two filters is reported by
	// both).
	DeleteACLs(ctx context.Context, fs []Filter) ([][]Binding, error)
}

// Authorizer answers authorization questions from a cached copy of the
// bindings (updated by SetBindings: the cluster's etcd watch, or the
// FileACLStore after each change) and the policy. Safe for concurrent
// use; an authorization never does I/O. The bindings are indexed by
// resource, so a decision looks at the bindings of its resource name, of
// the "*" wildcard and the prefixed ones of its type, not at all of them.
type Authorizer struct {
	pol   Policy
	index atomic.Pointer[aclIndex]
}

// aclIndex is an immutable view of the bindings.
type aclIndex struct {
	all      []Binding
	literal  map[literalKey][]Binding
	prefixed map[kmsg.ACLResourceType][]Binding
}

type literalKey struct {
	rt   kmsg.ACLResourceType
	name string
}

func newACLIndex(bs []Binding) *aclIndex {
	ix := &aclIndex{all: append([]Binding(nil), bs...), literal: map[literalKey][]Binding{}, prefixed: map[kmsg.ACLResourceType][]Binding{}}
	for _, b := range ix.all {
		switch b.PatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			k := literalKey{b.ResourceType, b.ResourceName}
			ix.literal[k] = append(ix.literal[k], b)
		case kmsg.ACLResourcePatternTypePrefixed:
			ix.prefixed[b.ResourceType] = append(ix.prefixed[b.ResourceType], b)
		}
	}
	return ix
}

// candidates are the bindings that can apply to act's resource.
func (ix *aclIndex) candidates(act Action) [3][]Binding {
	return [3][]Binding{
		ix.literal[literalKey{act.ResourceType, act.ResourceName}],
		ix.literal[literalKey{act.ResourceType, WildcardResource}],
		ix.prefixed[act.ResourceType],
	}
}

// NewAuthorizer returns an authorizer with pol and no bindings yet.
func NewAuthorizer(pol Policy) *Authorizer {
	a := &Authorizer{pol: pol}
	a.index.Store(newACLIndex(nil))
	return a
}

// SetBindings replaces the cached bindings.
func (a *Authorizer) SetBindings(bs []Binding) { a.index.Store(newACLIndex(bs)) }

// Bindings returns the cached bindings (not to be modified).
func (a *Authorizer) Bindings() []Binding { return a.index.Load().all }

// Policy returns the authorizer's policy.
func (a *Authorizer) Policy() Policy { return a.pol }

// Authorize decides one action (Decide).
func (a *Authorizer) Authorize(act Action) bool {
	c := a.index.Load().candidates(act)
	return decide(a.pol, act, c[0], c[1], c[2])
}

// AuthorizeAnyResource decides an action on any resource of its type
// (DecideAnyResource).
func (a *Authorizer) AuthorizeAnyResource(act Action) bool {
	return DecideAnyResource(a.Bindings(), a.pol, act)
}

// AuthorizedOperations returns the bit field of allowed operations on
// the resource of act (its Operation is ignored).
func (a *Authorizer) AuthorizedOperations(act Action) int32 {
	var bits int32
	for _, op := range resourceOperations[act.ResourceType] {
		act.Operation = op
		if a.Authorize(act) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}

// Authorizer class names accepted for authorizer.class.name: Kafka's two
// (so that a Kafka config works as is) and the short form.
var AuthorizerClassNames = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
	"strata.acl",
}

// ParseAuthorizerClass says whether authorizer.class.name = v turns the
// authorizer on ("" turns it off); any other class is refused.
func ParseAuthorizerClass(v string) (bool, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return false, nil
	}
	for _, n := range AuthorizerClassNames {
		if v == n {
			return true, nil
		}
	}
	return false, fmt.Errorf("authorizer %q is not available: want one of %s, or empty (no authorization)", v, strings.Join(AuthorizerClassNames, ", "))
}

// ParseSuperUsers parses super.users: principals separated by semicolons
// ("User:admin;User:strata-broker").
func ParseSuperUsers(v string) ([]Principal, error) {
	var out []Principal
	for _, s := range strings.Split(v, ";") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if typ, name, ok := strings.Cut(s, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("super user %q: want Type:name (User:admin)", s)
		}
		out = append(out, Principal(s))
	}
	return out, nil
}

// FileACLStore keeps the bindings of a standalone broker in one JSON file
// (a list of bindings), rewritten atomically on change; after each change
// it hands the new list to OnChange (the Authorizer).
type FileACLStore struct {
	path     string
	mu       sync.Mutex
	data     []Binding
	onChange func([]Binding)
}

// OpenFileACLStore reads (or starts) the ACL file at path; onChange
// receives the bindings now and after every change.
func OpenFileACLStore(path string, onChange func([]Binding)) (*FileACLStore, error) {
	s := &FileACLStore{path: path, onChange: onChange}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read ACLs: %w", err)
	default:
		if err := json.Unmarshal(raw, &s.data); err != nil {
			return nil, fmt.Errorf("parse ACLs %s: %w", path, err)
		}
	}
	if onChange != nil {
		onChange(s.data)
	}
	return s, nil
}

// ACLs implements ACLStore.
func (s *FileACLStore) ACLs(context.Context) ([]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Binding(nil), s.data...), nil
}

// CreateACLs implements ACLStore.
func (s *FileACLStore) CreateACLs(_ context.Context, bs []Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := append([]Binding(nil), s.data...)
	for _, b := range bs {
		if !containsBinding(next, b) {
			next = append(next, b)
		}
	}
	return s.replaceLocked(next)
}

// DeleteACLs implements ACLStore.
func (s *FileACLStore) DeleteACLs(_ context.Context, fs []Filter) ([][]Binding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, keep := MatchFilters(s.data, fs)
	if len(keep) == len(s.data) {
		return out, nil
	}
	return out, s.replaceLocked(keep)
}

func (s *FileACLStore) replaceLocked(next []Binding) error {
	SortBindings(next)
	if err := writeFileAtomic(s.path, next); err != nil {
		return err
	}
	s.data = next
	if s.onChange != nil {
		s.onChange(next)
	}
	return nil
}

// MatchFilters returns, per filter, the bindings it matches, and the
// bindings no filter matches.
func MatchFilters(bs []Binding, fs []Filter) (matched [][]Binding, rest []Binding) {
	matched = make([][]Binding, len(fs))
	for _, b := range bs {
		hit := false
		for i, f := range fs {
			if f.Matches(b) {
				matched[i] = append(matched[i], b)
				hit = true
			}
		}
		if !hit {
			rest = append(rest, b)
		}
	}
	return matched, rest
}

func containsBinding(bs []Binding, b Binding) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// ResourceTypeName is the metric label of a resource type (topic, group, ...).
func ResourceTypeName(rt kmsg.ACLResourceType) string { return strings.ToLower(rt.String()) }
