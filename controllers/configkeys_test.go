package controllers

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"sigs.k8s.io/yaml"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/server"
)

// hiddenOwnedKeys are the spec.config keys of issue 26: each spells a key
// the operator owns with a character the broker's properties parser
// trimmed, and each took that key over through the real
// RenderBrokerConfig → ReadConfigFile → ApplySettings (node.id 4242, the
// authorizer off, User:mallory a super user, pprof on).
var hiddenOwnedKeys = []struct{ key, value, owner string }{
	{"node.id\f", "4242", "spec.zones (broker ID blocks)"},
	{"authorizer.class.name\f", "", "spec.security.authorization"},
	{"super.users\u00a0", "User:mallory", "spec.security.authorization"},
	{"metrics.pprof.enable\f", "true", "the operator (port 9644"},
}

// TestHiddenOwnedConfigKeys: the operator refuses each key naming the
// field that owns it, and a broker given the rendered file anyway (an
// object stored before the CRD's rule) refuses to start instead of reading
// the owned key.
func TestHiddenOwnedConfigKeys(t *testing.T) {
	kc := threeZoneCluster()
	zi := zoneInputs(kc, nil)[0]
	t.Setenv(EnvPodName, ZoneStatefulSetName(kc.Name, zi.Zone.Name)+"-1")
	// The file without them starts a broker: the refusals below are theirs.
	if _, err := brokerReads(t, RenderBrokerConfig(kc, zi), true); err != nil {
		t.Fatalf("the broker refuses the operator's own config: %v", err)
	}
	for _, tc := range hiddenOwnedKeys {
		t.Run(strings.TrimSpace(tc.key), func(t *testing.T) {
			kc := threeZoneCluster()
			kc.Spec.Config = map[string]string{tc.key: tc.value}
			problems := UnsupportedSpec(kc)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.owner) }) {
				t.Errorf("UnsupportedSpec(%q) = %q, want a problem naming %s", tc.key, problems, tc.owner)
			}
			kv, err := brokerReads(t, RenderBrokerConfig(kc, zi), true)
			if !errors.Is(err, server.ErrConfigKey) {
				t.Errorf("the broker read %q from the rendered file (err %v), want %v", kv, err, server.ErrConfigKey)
			}
		})
	}
}

// brokerReads writes props to a file and reads it as `strata broker`
// does; with apply, ApplySettings must take it too.
func brokerReads(t testing.TB, props string, apply bool) (map[string]string, error) {
	path := filepath.Join(t.TempDir(), BrokerConfigFile)
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	kv, err := server.ReadConfigFile(path)
	if err != nil || !apply {
		return kv, err
	}
	cfg := server.DefaultConfig()
	_, err = server.ApplySettings(&cfg, kv)
	return kv, err
}

// celRule is one compiled x-kubernetes-validations rule of spec.config.
type celRule struct {
	rule, message string
	prg           cel.Program
}

// specConfigRules compiles the CEL rules of spec.config from the generated
// CRD, in the environment the API server gives CRD rules (the standard
// library, matches, and the strings extension with trim).
func specConfigRules(t testing.TB) []celRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "kafka.strata.dev_kafkaclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									Config struct {
										Validations []struct{ Rule, Message string } `json:"x-kubernetes-validations"`
									} `json:"config"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	env, err := cel.NewEnv(cel.Variable("self", cel.MapType(cel.StringType, cel.StringType)), ext.Strings())
	if err != nil {
		t.Fatal(err)
	}
	var rules []celRule
	for _, v := range crd.Spec.Versions {
		for _, r := range v.Schema.OpenAPIV3Schema.Properties.Spec.Properties.Config.Validations {
			ast, iss := env.Compile(r.Rule)
			if iss.Err() != nil {
				t.Fatalf("rule %q: %v", r.Rule, iss.Err())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, celRule{rule: r.Rule, message: r.Message, prg: prg})
		}
	}
	if len(rules) < 10 {
		t.Fatalf("found %d rules on spec.config in the CRD", len(rules))
	}
	return rules
}

// celRefuses returns the messages of the rules that refuse config.
func celRefuses(t testing.TB, rules []celRule, config map[string]string) []string {
	t.Helper()
	var msgs []string
	for _, r := range rules {
		out, _, err := r.prg.Eval(map[string]any{"self": config})
		if err != nil {
			t.Fatalf("rule %q on %q: %v", r.rule, config, err)
		}
		if ok, isBool := out.Value().(bool); !isBool || !ok {
			msgs = append(msgs, r.message)
		}
	}
	return msgs
}

// configKeyCases are keys of the differential test, kept as the fuzz
// target's seed corpus: owned keys, their prefixes, the hidden spellings
// of issue 26 and their relatives, and keys users may set.
var configKeyCases = []string{
	"num.partitions", "min.insync.replicas", "log.retention.ms", "auto.create.topics.enable", "compression.type",
	"node.id", "broker.id", "super.users", "authorizer.class.name", "allow.everyone.if.no.acl.found",
	"metrics.listen", "metrics.pprof.enable", "ssl.keystore.location", "sasl.enabled.mechanisms",
	"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", "wal.zone.a.bucket.endpoint", "tier.bucket.name", "wal.auto.max.latency.ms", "wal.auto.max.cost.ratio",
	"wal.zonelocal.produce.enable", "wal.zonelocal.produce.inline.ms", "wal.zonelocal.produce.policy", "wal.zonelocal.put.concurrency", "wal.zonelocal.produce.enable\f",
	"node.id\f", "authorizer.class.name\f", "super.users\u00a0", "metrics.pprof.enable\f",
	"\fnode.id", " node.id", "node.id ", "node.id\t", "node.id\v", "node.id\r", "node.id\n", "node.id\u0085",
	"node.id\u2028", "node.id\u3000", "node.id\u200b", "node.id\ufeff", "node.id\x00", "node.id\x7f",
	"node.id=", "node.id:", "node.id\\", "node\\.id", "node.id\\f", "node.id\\u000c", "node.id#", "#node.id",
	"node.id\nsuper.users", "x\nnode.id", "NODE.ID", "Node.id", "node.id.", ".node.id", "-", "", "é.key",
}

// TestConfigKeysDifferential runs FuzzConfigKeys' property over
// configKeyCases with values that try to break out of their line.
func TestConfigKeysDifferential(t *testing.T) {
	rules := specConfigRules(t)
	base := baseBrokerRead(t)
	for _, k := range configKeyCases {
		for _, v := range []string{"4242", "", " x ", "x\nnode.id=4242", "User:mallory\u00a0", "a\\b", "\\u0041"} {
			checkConfigKey(t, rules, base, k, v)
		}
	}
}

// FuzzConfigKeys: any spec.config key the broker would read as (or turn
// into) a key the operator owns is refused by the CRD's CEL rules and by
// the operator's check (UnsupportedSpec, which guards objects stored
// before the rules); the two agree on every key; and a key both accept
// reaches the broker as exactly that key with exactly its value.
func FuzzConfigKeys(f *testing.F) {
	for _, k := range configKeyCases {
		f.Add(k, "4242")
	}
	rules := specConfigRules(f)
	base := baseBrokerRead(f)
	f.Fuzz(func(t *testing.T, key, value string) {
		if !utf8.ValidString(key) || !utf8.ValidString(value) {
			t.Skip("the API server holds UTF-8 strings only")
		}
		checkConfigKey(t, rules, base, key, value)
	})
}

// fuzzCluster is the cluster the differential test renders: one zone.
func fuzzCluster() (*strata.KafkaCluster, ZoneInput) {
	kc := threeZoneCluster()
	return kc, zoneInputs(kc, nil)[0]
}

func baseBrokerRead(t testing.TB) map[string]string {
	kc, zi := fuzzCluster()
	kv, err := brokerReads(t, RenderBrokerConfig(kc, zi), false)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func checkConfigKey(t *testing.T, rules []celRule, base map[string]string, key, value string) {
	t.Helper()
	config := map[string]string{key: value}
	celMsgs := celRefuses(t, rules, config)
	problem := ConfigKeyProblem(key)
	grandfathered := slices.Contains(grandfatheredConfigKeys, key)
	if cel, op := len(celMsgs) > 0, problem != "" || grandfathered; cel != op {
		t.Errorf("key %q: the CRD refuses it: %v %q; the operator: %v %q", key, cel, celMsgs, op, problem)
	}

	kc, zi := fuzzCluster()
	kc.Spec.Config = config
	kv, err := brokerReads(t, RenderBrokerConfig(kc, zi), false)
	var changed []string
	for k, v := range kv {
		if bv, ok := base[k]; !ok || bv != v {
			changed = append(changed, k)
		}
	}
	for _, k := range changed {
		if _, owned := ConfigKeyOwner(k); owned && (len(celMsgs) == 0 || (problem == "" && !(grandfathered && k == key))) {
			t.Errorf("spec.config key %q=%q sets the owned key %q=%q in the broker; CRD messages %q, operator %q", key, value, k, kv[k], celMsgs, problem)
		}
	}
	if problem != "" {
		return
	}
	if err != nil {
		t.Fatalf("spec.config key %q=%q is accepted and the broker refuses the file: %v", key, value, err)
	}
	want := maps.Clone(base)
	want[key] = value
	if !maps.Equal(kv, want) {
		t.Errorf("spec.config key %q=%q: the broker read the keys %q changed (%q)", key, value, changed, func() map[string]string {
			m := map[string]string{}
			for _, k := range changed {
				m[k] = kv[k]
			}
			return m
		}())
	}
}
