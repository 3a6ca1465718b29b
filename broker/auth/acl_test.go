package auth

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	tTopic   = kmsg.ACLResourceTypeTopic
	tGroup   = kmsg.ACLResourceTypeGroup
	tCluster = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	opRead   = kmsg.ACLOperationRead
	opWrite  = kmsg.ACLOperationWrite
	opDesc   = kmsg.ACLOperationDescribe
	opAll    = kmsg.ACLOperationAll
)

func bind(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func TestDecide(t *testing.T) {
	alice := Principal("User:alice")
	act := func(p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) Action {
		return Action{Principal: p, Host: host, Operation: op, ResourceType: rt, ResourceName: name}
	}
	for _, tc := range []struct {
		name     string
		bindings []Binding
		pol      Policy
		act      Action
		want     bool
	}{
		{"no ACL at all: refused by default", nil, Policy{}, act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"no ACL at all: allow.everyone.if.no.acl.found", nil, Policy{AllowIfNoACL: true}, act(alice, "10.0.0.1", opRead, tTopic, "orders"), true},
		{"an ACL for someone else on the resource: allow.everyone does not apply",
			[]Binding{bind(tTopic, "orders", literal, "User:bob", "*", opRead, allow)}, Policy{AllowIfNoACL: true},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"super user", nil, Policy{SuperUsers: []Principal{alice}}, act(alice, "", opAll, tCluster, ClusterResourceName), true},
		{"super user beats DENY", []Binding{bind(tTopic, "*", literal, "User:*", "*", opAll, deny)}, Policy{SuperUsers: []Principal{alice}},
			act(alice, "1.2.3.4", opWrite, tTopic, "x"), true},
		{"literal allow", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), true},
		{"literal is not a prefix", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders-eu"), false},
		{"other operation", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opWrite, tTopic, "orders"), false},
		{"wildcard resource", []Binding{bind(tTopic, "*", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "anything"), true},
		{"wildcard principal", []Binding{bind(tTopic, "orders", literal, "User:*", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), true},
		{"prefixed allow", []Binding{bind(tTopic, "orders-", prefixed, "User:alice", "*", opWrite, allow)}, Policy{},
			act(alice, "10.0.0.1", opWrite, tTopic, "orders-eu"), true},
		{"prefixed does not match a shorter name", []Binding{bind(tTopic, "orders-", prefixed, "User:alice", "*", opWrite, allow)}, Policy{},
			act(alice, "10.0.0.1", opWrite, tTopic, "orders"), false},
		{"resource type must match", []Binding{bind(tGroup, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"host must match", []Binding{bind(tTopic, "orders", literal, "User:alice", "10.0.0.2", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"host matches", []Binding{bind(tTopic, "orders", literal, "User:alice", "10.0.0.1", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), true},
		{"DENY wins over ALLOW", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow),
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, deny)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"prefixed DENY wins over literal ALLOW", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow),
			bind(tTopic, "ord", prefixed, "User:*", "*", opRead, deny)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"DENY from one host only", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow),
			bind(tTopic, "orders", literal, "User:alice", "10.0.0.9", opRead, deny)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), true},
		{"DENY ALL denies READ", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow),
			bind(tTopic, "orders", literal, "User:alice", "*", opAll, deny)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"ALLOW ALL", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opAll, allow)}, Policy{},
			act(alice, "10.0.0.1", kmsg.ACLOperationAlterConfigs, tTopic, "orders"), true},
		{"READ implies DESCRIBE", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(alice, "10.0.0.1", opDesc, tTopic, "orders"), true},
		{"WRITE implies DESCRIBE", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opWrite, allow)}, Policy{},
			act(alice, "10.0.0.1", opDesc, tTopic, "orders"), true},
		{"DESCRIBE does not imply READ", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opDesc, allow)}, Policy{},
			act(alice, "10.0.0.1", opRead, tTopic, "orders"), false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow)}, Policy{},
			act(alice, "10.0.0.1", kmsg.ACLOperationDescribeConfigs, tTopic, "orders"), true},
		{"a DENY of READ does not deny DESCRIBE", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opWrite, allow),
			bind(tTopic, "orders", literal, "User:alice", "*", opRead, deny)}, Policy{},
			act(alice, "10.0.0.1", opDesc, tTopic, "orders"), true},
		{"CLUSTER_ACTION on the cluster", []Binding{bind(tCluster, ClusterResourceName, literal, "User:broker", "*", kmsg.ACLOperationClusterAction, allow)}, Policy{},
			act("User:broker", "10.0.0.1", kmsg.ACLOperationClusterAction, tCluster, ClusterResourceName), true},
		{"ANONYMOUS is a principal like any other", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{},
			act(Anonymous, "10.0.0.1", opRead, tTopic, "orders"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.bindings, tc.pol, tc.act); got != tc.want {
				t.Fatalf("Decide(%v) = %v, want %v", tc.act, got, tc.want)
			}
			az := NewAuthorizer(tc.pol)
			az.SetBindings(tc.bindings)
			if got := az.Authorize(tc.act); got != tc.want {
				t.Fatalf("Authorizer.Authorize(%v) = %v, want %v", tc.act, got, tc.want)
			}
		})
	}
}

// TestAuthorizerIndexMatchesDecide: the indexed Authorizer answers every
// action as Decide over all bindings does, on random bindings.
func TestAuthorizerIndexMatchesDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"orders", "orders-eu", "ord", "o", "*", "payments", "pay"}
	principals := []string{"User:alice", "User:bob", "User:*"}
	hosts := []string{"*", "10.0.0.1", "10.0.0.2"}
	ops := []kmsg.ACLOperation{opAll, opRead, opWrite, opDesc, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs}
	types := []kmsg.ACLResourceType{tTopic, tGroup}
	pick := func(n int) int { return rng.IntN(n) }
	for round := range 200 {
		var bs []Binding
		for range pick(12) {
			pt := literal
			name := names[pick(len(names))]
			if name != "*" && pick(3) == 0 {
				pt = prefixed
			}
			perm := allow
			if pick(4) == 0 {
				perm = deny
			}
			bs = append(bs, bind(types[pick(2)], name, pt, principals[pick(3)], hosts[pick(3)], ops[pick(len(ops))], perm))
		}
		pol := Policy{AllowIfNoACL: pick(2) == 0}
		az := NewAuthorizer(pol)
		az.SetBindings(bs)
		for _, name := range names[:len(names)-1] {
			for _, p := range principals[:2] {
				for _, op := range ops[1:] {
					a := Action{Principal: Principal(p), Host: hosts[1+pick(2)], Operation: op, ResourceType: types[pick(2)], ResourceName: name}
					if want, got := Decide(bs, pol, a), az.Authorize(a); got != want {
						t.Fatalf("round %d: %v over %v: index says %v, Decide %v", round, a, bs, got, want)
					}
				}
			}
		}
	}
}

func TestDecideAnyResource(t *testing.T) {
	alice := Principal("User:alice")
	write := Action{Principal: alice, Host: "10.0.0.1", Operation: opWrite, ResourceType: tTopic}
	for _, tc := range []struct {
		name     string
		bindings []Binding
		pol      Policy
		want     bool
	}{
		{"nothing", nil, Policy{}, false},
		{"write on one topic", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opWrite, allow)}, Policy{}, true},
		{"write on a prefix", []Binding{bind(tTopic, "o", prefixed, "User:*", "*", opWrite, allow)}, Policy{}, true},
		{"read only", []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}, Policy{}, false},
		{"allowed topic denied", []Binding{
			bind(tTopic, "orders", literal, "User:alice", "*", opWrite, allow),
			bind(tTopic, "*", literal, "User:alice", "*", opWrite, deny)}, Policy{}, false},
		{"other host", []Binding{bind(tTopic, "orders", literal, "User:alice", "10.9.9.9", opWrite, allow)}, Policy{}, false},
		{"no topic ACL and allow.everyone", []Binding{bind(tGroup, "g", literal, "User:x", "*", opRead, allow)}, Policy{AllowIfNoACL: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideAnyResource(tc.bindings, tc.pol, write); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAuthorizedOperations(t *testing.T) {
	bs := []Binding{bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)}
	got := AuthorizedOperations(bs, Policy{}, Action{Principal: "User:alice", Host: "h", ResourceType: tTopic, ResourceName: "orders"})
	want := int32(1<<uint(opRead) | 1<<uint(opDesc))
	if got != want {
		t.Fatalf("operations %b, want %b", got, want)
	}
}

func TestFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)
	pre := bind(tTopic, "ord", prefixed, "User:alice", "*", opRead, allow)
	wild := bind(tTopic, "*", literal, "User:alice", "*", opRead, allow)
	other := bind(tGroup, "orders", literal, "User:bob", "10.0.0.1", opWrite, deny)
	anyF := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	for _, tc := range []struct {
		name string
		f    func(Filter) Filter
		want []Binding
	}{
		{"everything", func(f Filter) Filter { return f }, []Binding{lit, pre, wild, other}},
		{"ANY with a name: exact name of any pattern type", func(f Filter) Filter { f.ResourceName = str("orders"); return f }, []Binding{lit, other}},
		{"MATCH: what applies to the resource", func(f Filter) Filter {
			f.ResourceType, f.ResourceName, f.PatternType = tTopic, str("orders"), kmsg.ACLResourcePatternTypeMatch
			return f
		}, []Binding{lit, pre, wild}},
		{"PREFIXED only", func(f Filter) Filter { f.PatternType = prefixed; return f }, []Binding{pre}},
		{"by principal and host", func(f Filter) Filter { f.Principal, f.Host = str("User:bob"), str("10.0.0.1"); return f }, []Binding{other}},
		{"by permission and operation", func(f Filter) Filter {
			f.Permission, f.Operation = deny, opWrite
			return f
		}, []Binding{other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f(anyF)
			var got []Binding
			for _, b := range []Binding{lit, pre, wild, other} {
				if f.Matches(b) {
					got = append(got, b)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("matched %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("matched %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBindingValidate(t *testing.T) {
	good := bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)
	if err := good.Validate(); err != nil {
		t.Fatalf("valid binding refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Binding)
	}{
		{"ANY resource type", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }},
		{"delegation token", func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeDelegationToken }},
		{"MATCH pattern", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }},
		{"empty name", func(b *Binding) { b.ResourceName = "" }},
		{"prefixed wildcard", func(b *Binding) { b.PatternType, b.ResourceName = prefixed, "*" }},
		{"cluster with another name", func(b *Binding) { b.ResourceType = tCluster }},
		{"ANY operation", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }},
		{"ANY permission", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }},
		{"host name", func(b *Binding) { b.Host = "example.com" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := good
			tc.mod(&b)
			if err := b.Validate(); err == nil {
				t.Fatalf("%v accepted", b)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	for _, v := range AuthorizerClassNames {
		if on, err := ParseAuthorizerClass(v); !on || err != nil {
			t.Fatalf("%s: %v %v", v, on, err)
		}
	}
	if on, err := ParseAuthorizerClass(""); on || err != nil {
		t.Fatalf("empty: %v %v", on, err)
	}
	if _, err := ParseAuthorizerClass("com.example.MyAuthorizer"); err == nil {
		t.Fatal("unknown authorizer accepted")
	}
	ps, err := ParseSuperUsers(" User:admin ;User:strata-broker;")
	if err != nil || len(ps) != 2 || ps[0] != "User:admin" || ps[1] != "User:strata-broker" {
		t.Fatalf("super users %v %v", ps, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("super user without type accepted")
	}
}

func TestFileACLStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "__acls.json")
	var seen []Binding
	s, err := OpenFileACLStore(path, func(bs []Binding) { seen = bs })
	if err != nil {
		t.Fatal(err)
	}
	a := bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow)
	b := bind(tGroup, "g", prefixed, "User:bob", "*", opRead, allow)
	if err := s.CreateACLs(t.Context(), []Binding{a, b, a}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("authorizer got %v", seen)
	}
	s2, err := OpenFileACLStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.ACLs(t.Context()); len(got) != 2 {
		t.Fatalf("reopened: %v", got)
	}
	deleted, err := s.DeleteACLs(t.Context(), []Filter{{ResourceType: tGroup, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 || deleted[0][0] != b {
		t.Fatalf("deleted %v %v", deleted, err)
	}
	if len(seen) != 1 || seen[0] != a {
		t.Fatalf("authorizer after delete: %v", seen)
	}
}

// BenchmarkDecide: one authorization against n bindings (the broker asks
// once per topic of a request).
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10, 1000} {
		var bs []Binding
		for i := range n {
			bs = append(bs, bind(tTopic, "topic-"+string(rune('a'+i%26))+"-"+string(rune('a'+i/26%26)), literal, "User:u"+string(rune('a'+i%26)), "*", opRead, allow))
		}
		bs = append(bs, bind(tTopic, "orders", literal, "User:alice", "*", opRead, allow))
		a := Action{Principal: "User:alice", Host: "10.0.0.1", Operation: opRead, ResourceType: tTopic, ResourceName: "orders"}
		b.Run(fmt.Sprintf("Decide/%d", n), func(b *testing.B) {
			for b.Loop() {
				if !Decide(bs, Policy{}, a) {
					b.Fatal("refused")
				}
			}
		})
		az := NewAuthorizer(Policy{})
		az.SetBindings(bs)
		b.Run(fmt.Sprintf("Authorizer/%d", n), func(b *testing.B) {
			for b.Loop() {
				if !az.Authorize(a) {
					b.Fatal("refused")
				}
			}
		})
	}
}
