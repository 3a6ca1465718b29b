package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestDynamicTopicDefaults: the broker defaults of topic configs
// (message.max.bytes, log.retention.ms, ...) are dynamic broker configs,
// as Kafka's log.* cluster-wide configs: set cluster-wide or per broker,
// they apply to every partition without its own value at once, without
// a restart, and DescribeConfigs names their source; a topic's own value
// still wins, DELETE returns to the config file's value, and the static
// ones (log.remote.storage.enable) are refused.
func TestDynamicTopicDefaults(t *testing.T) {
	c := brokertest.StartCluster(t, zones, brokertest.WithSetting("log.retention.ms", "86400000"))
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, adm, "dyn", 1, nil)
	createTopic(t, adm, "own", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("50000")})
	big := &kgo.Record{Value: []byte(strings.Repeat("x", 5000))}
	produce := func(topic string) error {
		pr := newClient(t, c.Addrs(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(3))
		defer pr.Close()
		rec := *big
		return pr.ProduceSync(ctx, &rec).FirstErr()
	}
	if err := produce("dyn"); err != nil {
		t.Fatalf("5000-byte record with the built-in message.max.bytes: %v", err)
	}
	if cfg := brokerConfig(t, adm, "log.retention.ms", 1); cfg.MaybeValue() != "86400000" || cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("log.retention.ms of broker 1: %q from %v, want 86400000 from the config file", cfg.MaybeValue(), cfg.Source)
	}

	// Cluster-wide: every broker applies it to every partition.
	set := func(name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
	}
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "2000"), set("log.retention.ms", "3600000")}))
	waitFor(t, "the leader of dyn-0 to refuse a 5000-byte batch", 30*time.Second, func() bool {
		return errors.Is(produce("dyn"), kerr.MessageTooLarge)
	})
	if err := produce("own"); err != nil {
		t.Fatalf("a topic with its own max.message.bytes took the cluster-wide default: %v", err)
	}
	for id := int32(1); id <= 3; id++ {
		waitFor(t, fmt.Sprintf("broker %d to describe the cluster-wide values", id), 10*time.Second, func() bool {
			cfg := brokerConfig(t, adm, "message.max.bytes", id)
			ret := brokerConfig(t, adm, "log.retention.ms", id)
			return cfg.MaybeValue() == "2000" && cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig &&
				ret.MaybeValue() == "3600000" && ret.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		})
	}
	if cfg := describeTopicConfig(t, adm, "dyn", "retention.ms"); cfg.MaybeValue() != "3600000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("retention.ms of dyn: %q from %v, want 3600000 from the cluster-wide default", cfg.MaybeValue(), cfg.Source)
	}
	if cfg := describeTopicConfig(t, adm, "own", "max.message.bytes"); cfg.MaybeValue() != "50000" || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("max.message.bytes of own: %q from %v, want its own 50000", cfg.MaybeValue(), cfg.Source)
	}

	// Per broker: dyn-0's leader takes 5000 bytes again, the others keep
	// the cluster-wide value.
	leader, _ := partitionLeader(cl, "dyn", 1, 2, 3)
	if leader < 0 {
		t.Fatal("dyn-0 has no leader")
	}
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("message.max.bytes", "100000")}, leader))
	waitFor(t, fmt.Sprintf("broker %d (dyn-0's leader) to apply its own message.max.bytes", leader), 30*time.Second, func() bool {
		return produce("dyn") == nil
	})
	for id := int32(1); id <= 3; id++ {
		want, src := "2000", kmsg.ConfigSourceDynamicDefaultBrokerConfig
		if id == leader {
			want, src = "100000", kmsg.ConfigSourceDynamicBrokerConfig
		}
		if cfg := brokerConfig(t, adm, "message.max.bytes", id); cfg.MaybeValue() != want || cfg.Source != src {
			t.Errorf("message.max.bytes of broker %d: %q from %v, want %s from %v", id, cfg.MaybeValue(), cfg.Source, want, src)
		}
	}

	// Refused: a static default, a value below the minimum; nothing stored.
	for _, tc := range []struct{ name, value, msg string }{
		{"log.remote.storage.enable", "true", "cannot be updated dynamically"},
		{"message.max.bytes", "0", "below the minimum"},
		{"log.cleanup.policy", "shred", "not a list of compact and delete"},
	} {
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set(tc.name, tc.value)})
		if err == nil {
			err = alterErr(res)
		}
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(res[0].ErrMessage, tc.msg) {
			t.Errorf("setting %s=%s: %v (%q), want INVALID_CONFIG saying %q", tc.name, tc.value, err, res[0].ErrMessage, tc.msg)
		}
	}

	// DELETE: back to the config file, then the built-in default.
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}}, leader))
	mustAlter(t)(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}, {Op: kadm.DeleteConfig, Name: "log.retention.ms"}}))
	waitFor(t, "every broker back to the built-in message.max.bytes", 30*time.Second, func() bool {
		for id := int32(1); id <= 3; id++ {
			cfg := brokerConfig(t, adm, "message.max.bytes", id)
			ret := brokerConfig(t, adm, "log.retention.ms", id)
			if cfg.MaybeValue() != "1048588" || cfg.Source != kmsg.ConfigSourceDefaultConfig || ret.MaybeValue() != "86400000" || ret.Source != kmsg.ConfigSourceStaticBrokerConfig {
				return false
			}
		}
		return true
	})
	if err := produce("dyn"); err != nil {
		t.Fatalf("5000-byte record after the dynamic values were deleted: %v", err)
	}
}
