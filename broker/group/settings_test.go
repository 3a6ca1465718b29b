package group

import (
	"testing"
	"time"
)

func TestConfigSet(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		known      bool
		wantErr    bool
		check      func(c Config) bool
	}{
		{"group.initial.rebalance.delay.ms", "0", true, false, func(c Config) bool { return c.InitialRebalanceDelay == 0 }},
		{"group.initial.rebalance.delay.ms", "250", true, false, func(c Config) bool { return c.InitialRebalanceDelay == 250*time.Millisecond }},
		{"group.initial.rebalance.delay.ms", "-1", true, true, nil},
		{"group.min.session.timeout.ms", "100", true, false, func(c Config) bool { return c.MinSessionTimeout == 100*time.Millisecond }},
		{"group.max.session.timeout.ms", "x", true, true, nil},
		{"group.max.size", "10", true, false, func(c Config) bool { return c.MaxGroupSize == 10 }},
		{"group.max.size", "0", true, true, nil},
		{"offset.metadata.max.bytes", "1", true, false, func(c Config) bool { return c.MaxMetadataBytes == 1 }},
		{"offsets.retention.minutes", "60", true, false, func(c Config) bool { return c.OffsetsRetention == time.Hour }},
		{"offsets.retention.minutes", "0", true, false, func(c Config) bool { return c.OffsetsRetention == 0 }},
		{"offsets.retention.check.interval.ms", "0", true, true, nil},
		{"log.retention.ms", "1", false, false, nil},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c := DefaultConfig()
			known, err := c.Set(tc.key, tc.value)
			if known != tc.known || (err != nil) != tc.wantErr {
				t.Fatalf("known=%v err=%v", known, err)
			}
			if tc.check != nil && !tc.check(c) {
				t.Fatalf("config not applied: %+v", c)
			}
		})
	}
}
