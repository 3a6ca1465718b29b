package controllers

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
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
