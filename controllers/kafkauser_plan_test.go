package controllers

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

func TestDesiredACLs(t *testing.T) {
	const (
		topic    = kmsg.ACLResourceTypeTopic
		group    = kmsg.ACLResourceTypeGroup
		cluster  = kmsg.ACLResourceTypeCluster
		txn      = kmsg.ACLResourceTypeTransactionalId
		literal  = kmsg.ACLResourcePatternTypeLiteral
		prefixed = kmsg.ACLResourcePatternTypePrefixed
		allow    = kmsg.ACLPermissionTypeAllow
		deny     = kmsg.ACLPermissionTypeDeny
	)
	for _, tc := range []struct {
		name string
		acls []strata.KafkaUserACL
		want []ACLBinding
	}{
		{name: "no authorization"},
		{
			name: "one binding per operation, defaults applied",
			acls: []strata.KafkaUserACL{{Resource: strata.ACLResource{Type: "topic", Name: "orders"}, Operations: []strata.ACLOperation{"Read", "Describe"}}},
			want: []ACLBinding{
				{Resource: topic, Name: "orders", Pattern: literal, Operation: kmsg.ACLOperationRead, Host: "*", Permission: allow},
				{Resource: topic, Name: "orders", Pattern: literal, Operation: kmsg.ACLOperationDescribe, Host: "*", Permission: allow},
			},
		},
		{
			name: "every resource type, prefixed, deny, host; the cluster is kafka-cluster",
			acls: []strata.KafkaUserACL{
				{Resource: strata.ACLResource{Type: "group", Name: "app-", PatternType: "prefixed"}, Operations: []strata.ACLOperation{"Read"}, Host: "10.0.0.1"},
				{Resource: strata.ACLResource{Type: "cluster"}, Operations: []strata.ACLOperation{"IdempotentWrite"}},
				{Resource: strata.ACLResource{Type: "transactionalId", Name: "*"}, Operations: []strata.ACLOperation{"Write"}, Type: "deny"},
				{Resource: strata.ACLResource{Type: "topic", Name: "x", PatternType: "literal"}, Operations: []strata.ACLOperation{"DescribeConfigs", "All"}, Type: "allow"},
			},
			want: []ACLBinding{
				{Resource: group, Name: "app-", Pattern: prefixed, Operation: kmsg.ACLOperationRead, Host: "10.0.0.1", Permission: allow},
				{Resource: cluster, Name: "kafka-cluster", Pattern: literal, Operation: kmsg.ACLOperationIdempotentWrite, Host: "*", Permission: allow},
				{Resource: txn, Name: "*", Pattern: literal, Operation: kmsg.ACLOperationWrite, Host: "*", Permission: deny},
				{Resource: topic, Name: "x", Pattern: literal, Operation: kmsg.ACLOperationDescribeConfigs, Host: "*", Permission: allow},
				{Resource: topic, Name: "x", Pattern: literal, Operation: kmsg.ACLOperationAll, Host: "*", Permission: allow},
			},
		},
		{
			name: "a binding two rules give is listed once",
			acls: []strata.KafkaUserACL{
				{Resource: strata.ACLResource{Type: "topic", Name: "t"}, Operations: []strata.ACLOperation{"Read", "Write"}},
				{Resource: strata.ACLResource{Type: "topic", Name: "t"}, Operations: []strata.ACLOperation{"Write"}, Host: "*"},
			},
			want: []ACLBinding{
				{Resource: topic, Name: "t", Pattern: literal, Operation: kmsg.ACLOperationRead, Host: "*", Permission: allow},
				{Resource: topic, Name: "t", Pattern: literal, Operation: kmsg.ACLOperationWrite, Host: "*", Permission: allow},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ku := &strata.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}
			if tc.acls != nil {
				ku.Spec.Authorization = &strata.KafkaUserAuthorization{ACLs: tc.acls}
			}
			got, err := DesiredACLs(ku)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DesiredACLs (-want +got):\n%s", diff)
			}
		})
	}

	ku := &strata.KafkaUser{Spec: strata.KafkaUserSpec{Authorization: &strata.KafkaUserAuthorization{ACLs: []strata.KafkaUserACL{
		{Resource: strata.ACLResource{Type: "topic", Name: "t"}, Operations: []strata.ACLOperation{"Fly"}},
	}}}}
	if _, err := DesiredACLs(ku); err == nil {
		t.Error("an unknown operation was accepted")
	}
}

func TestPlanACLs(t *testing.T) {
	b := func(name string, op kmsg.ACLOperation) ACLBinding {
		return ACLBinding{Resource: kmsg.ACLResourceTypeTopic, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Operation: op, Host: "*", Permission: kmsg.ACLPermissionTypeAllow}
	}
	denied := b("a", kmsg.ACLOperationRead)
	denied.Permission = kmsg.ACLPermissionTypeDeny
	prefixed := b("a", kmsg.ACLOperationRead)
	prefixed.Pattern = kmsg.ACLResourcePatternTypePrefixed
	for _, tc := range []struct {
		name                   string
		desired, current       []ACLBinding
		wantCreate, wantRemove []ACLBinding
	}{
		{name: "nothing"},
		{name: "all new", desired: []ACLBinding{b("a", kmsg.ACLOperationRead)}, wantCreate: []ACLBinding{b("a", kmsg.ACLOperationRead)}},
		{name: "in sync", desired: []ACLBinding{b("a", kmsg.ACLOperationRead)}, current: []ACLBinding{b("a", kmsg.ACLOperationRead)}},
		{
			name:       "extra removed, missing created",
			desired:    []ACLBinding{b("a", kmsg.ACLOperationRead), b("b", kmsg.ACLOperationWrite)},
			current:    []ACLBinding{b("a", kmsg.ACLOperationRead), b("a", kmsg.ACLOperationWrite)},
			wantCreate: []ACLBinding{b("b", kmsg.ACLOperationWrite)}, wantRemove: []ACLBinding{b("a", kmsg.ACLOperationWrite)},
		},
		{
			name:       "permission and pattern are part of the binding",
			desired:    []ACLBinding{b("a", kmsg.ACLOperationRead)},
			current:    []ACLBinding{denied, prefixed},
			wantCreate: []ACLBinding{b("a", kmsg.ACLOperationRead)}, wantRemove: []ACLBinding{denied, prefixed},
		},
		{
			name:       "a binding reported twice is removed once",
			current:    []ACLBinding{denied, denied},
			wantRemove: []ACLBinding{denied},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create, remove := PlanACLs(tc.desired, tc.current)
			if diff := cmp.Diff(tc.wantCreate, create); diff != "" {
				t.Errorf("create (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRemove, remove); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUserSecretData(t *testing.T) {
	got := UserSecretData("alice", kadm.ScramSha256, `p"a\ss`)
	want := map[string]string{
		"username":         "alice",
		"password":         `p"a\ss`,
		"mechanism":        "SCRAM-SHA-256",
		"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\"a\\ss";`,
	}
	if len(got) != len(want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestPasswordFingerprintDependsOnMechanism(t *testing.T) {
	if passwordFingerprint(kadm.ScramSha256, "p") == passwordFingerprint(kadm.ScramSha512, "p") {
		t.Error("a mechanism change would not set the credential again")
	}
	if passwordFingerprint(kadm.ScramSha512, "p") == passwordFingerprint(kadm.ScramSha512, "q") {
		t.Error("a password change would not set the credential again")
	}
}

func TestDesiredQuotas(t *testing.T) {
	p, c, r, m := int64(1024), int64(2048), int32(150), int32(3)
	ku := &strata.KafkaUser{Spec: strata.KafkaUserSpec{Quotas: &strata.KafkaUserQuotas{
		ProducerByteRate: &p, ConsumerByteRate: &c, RequestPercentage: &r, ControllerMutationRate: &m}}}
	want := map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048, "request_percentage": 150, "controller_mutation_rate": 3}
	if got := DesiredQuotas(ku); !reflect.DeepEqual(got, want) {
		t.Fatalf("DesiredQuotas = %v, want %v", got, want)
	}
}

func TestPlanQuotas(t *testing.T) {
	for _, tc := range []struct {
		name             string
		desired, current map[string]float64
		set              map[string]float64
		remove           []string
	}{
		{"nothing", nil, nil, map[string]float64{}, nil},
		{"new", map[string]float64{"producer_byte_rate": 10}, nil, map[string]float64{"producer_byte_rate": 10}, nil},
		{"same", map[string]float64{"producer_byte_rate": 10}, map[string]float64{"producer_byte_rate": 10}, map[string]float64{}, nil},
		{"changed and removed", map[string]float64{"consumer_byte_rate": 5}, map[string]float64{"producer_byte_rate": 10, "consumer_byte_rate": 4},
			map[string]float64{"consumer_byte_rate": 5}, []string{"producer_byte_rate"}},
		{"foreign keys left", nil, map[string]float64{"some_future_key": 50}, map[string]float64{}, nil},
		{"request and mutation quotas managed", map[string]float64{"request_percentage": 50},
			map[string]float64{"request_percentage": 25, "controller_mutation_rate": 2},
			map[string]float64{"request_percentage": 50}, []string{"controller_mutation_rate"}},
	} {
		set, remove := PlanQuotas(tc.desired, tc.current)
		if !reflect.DeepEqual(set, tc.set) || !reflect.DeepEqual(remove, tc.remove) {
			t.Errorf("%s: set %v remove %v, want %v %v", tc.name, set, remove, tc.set, tc.remove)
		}
	}
}

// TestSecretAccessGranted: only a Secret labelled for it, and never one
// of the operator's own (its CA keys, certificates, tokens, other users'
// passwords), may be a KafkaUser's password source.
func TestSecretAccessGranted(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{LabelSecretAccess: "false"}, false},
		{map[string]string{LabelCluster: "demo"}, false},
		{map[string]string{LabelSecretAccess: "true"}, true},
		{map[string]string{LabelSecretAccess: "true", LabelManagedBy: ManagedBy}, false},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
		if got := SecretAccessGranted(sec); got != tc.want {
			t.Errorf("labels %v: %v, want %v", tc.labels, got, tc.want)
		}
	}
}
