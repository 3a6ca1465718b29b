package telemetry

import (
	"testing"
	"time"
)

func TestConfigSet(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		known, ok  bool
		check      func(Config) bool
	}{
		{"telemetry.requested.metrics", "org.apache.kafka.producer., org.apache.kafka.consumer.", true, true,
			func(c Config) bool {
				return len(c.RequestedMetrics) == 2 && c.RequestedMetrics[1] == "org.apache.kafka.consumer."
			}},
		{"telemetry.requested.metrics", "*", true, true, func(c Config) bool { return len(c.RequestedMetrics) == 1 && c.RequestedMetrics[0] == "" }},
		{"telemetry.push.interval.ms", "1000", true, true, func(c Config) bool { return c.PushInterval == time.Second }},
		{"telemetry.push.interval.ms", "99", true, false, nil},
		{"telemetry.push.interval.ms", "3600001", true, false, nil},
		{"telemetry.max.bytes", "65536", true, true, func(c Config) bool { return c.MaxBytes == 65536 }},
		{"telemetry.max.bytes", "0", true, false, nil},
		{"telemetry.max.bytes", "lots", true, false, nil},
		{"telemetry.other", "1", false, true, nil},
	} {
		c := DefaultConfig()
		known, err := c.Set(tc.key, tc.value)
		if known != tc.known || (err == nil) != tc.ok {
			t.Errorf("Set(%s, %q) = %v, %v; want known %v, ok %v", tc.key, tc.value, known, err, tc.known, tc.ok)
			continue
		}
		if tc.check != nil && !tc.check(c) {
			t.Errorf("Set(%s, %q) gave %+v", tc.key, tc.value, c)
		}
	}
	if d := DefaultConfig(); len(d.RequestedMetrics) != 0 || d.PushInterval != 5*time.Minute || d.MaxBytes != 1<<20 {
		t.Errorf("defaults %+v: want no metrics, 5 min, 1 MiB (Kafka's)", d)
	}
}
