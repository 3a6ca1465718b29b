package controllers

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

func TestDynamicConfigOps(t *testing.T) {
	want := map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000"}
	current := map[string]string{"log.retention.ms": "1000", "min.insync.replicas": "2", "log.segment.bytes": "4096"}
	// log.segment.bytes was ours and left the spec; min.insync.replicas
	// was set by someone else (kafka-configs) and is left alone.
	ops := dynamicConfigOps(want, current, []string{"log.retention.ms", "log.segment.bytes"})
	got := make([]string, 0, len(ops))
	for _, op := range ops {
		s := op.Name
		switch op.Op {
		case kadm.SetConfig:
			s = "set " + s + "=" + *op.Value
		case kadm.DeleteConfig:
			s = "delete " + s
		}
		got = append(got, s)
	}
	if w := []string{"set message.max.bytes=2000", "delete log.segment.bytes"}; len(got) != len(w) || got[0] != w[0] || got[1] != w[1] {
		t.Fatalf("ops %q, want %q", got, w)
	}
	if ops := dynamicConfigOps(want, map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000"}, nil); len(ops) != 0 {
		t.Fatalf("converged: ops %v, want none", ops)
	}
	if !IsDynamicConfigKey("log.retention.ms") || IsDynamicConfigKey("num.partitions") || IsDynamicConfigKey("log.remote.storage.enable") {
		t.Fatal("IsDynamicConfigKey")
	}
}

// TestRolloutConfigHash: a new value of a dynamic key leaves the pod
// template's config hash alone (no roll) though the file has it; adding
// or removing one, or changing a static key, changes it.
func TestRolloutConfigHash(t *testing.T) {
	kc := threeZoneCluster()
	kc.Spec.Config = map[string]string{"log.retention.ms": "3600000", "num.partitions": "6"}
	zi := zoneInputs(kc, nil)[0]
	h := RolloutConfigHash(kc, zi)
	changed := kc.DeepCopy()
	changed.Spec.Config["log.retention.ms"] = "7200000"
	if RolloutConfigHash(changed, zi) != h {
		t.Error("a new value of a dynamic key changed the rollout hash")
	}
	if file := RenderBrokerConfig(changed, zi); !strings.Contains(file, "\nlog.retention.ms=7200000\n") {
		t.Errorf("the new value is not in the config file for the next start:\n%s", file)
	}
	for name, mutate := range map[string]func(*strata.KafkaCluster){
		"dynamic key added":   func(kc *strata.KafkaCluster) { kc.Spec.Config["message.max.bytes"] = "2000000" },
		"dynamic key removed": func(kc *strata.KafkaCluster) { delete(kc.Spec.Config, "log.retention.ms") },
		"static key changed":  func(kc *strata.KafkaCluster) { kc.Spec.Config["num.partitions"] = "7" },
	} {
		c := kc.DeepCopy()
		mutate(c)
		if RolloutConfigHash(c, zi) == h {
			t.Errorf("%s: the rollout hash did not change", name)
		}
	}
	if kc.Spec.Config["log.retention.ms"] != "3600000" {
		t.Error("RolloutConfigHash changed its argument")
	}
}
