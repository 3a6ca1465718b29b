package group

import (
	"fmt"
	"strconv"
	"time"
)

// SettingKeys are the broker config keys Config.Set understands.
var SettingKeys = []string{
	"group.initial.rebalance.delay.ms",
	"group.min.session.timeout.ms",
	"group.max.session.timeout.ms",
	"group.max.size",
	"offset.metadata.max.bytes",
	"offsets.retention.minutes",
	"offsets.retention.check.interval.ms",
	"group.consumer.session.timeout.ms",
	"group.consumer.heartbeat.interval.ms",
}

// Set applies one broker config key (Kafka's names, see SettingKeys) to c.
// known is false for keys that are not group settings.
func (c *Config) Set(key, value string) (known bool, err error) {
	n, perr := strconv.ParseInt(value, 10, 32)
	bad := func(why string) error { return fmt.Errorf("group: %s=%q: %s", key, value, why) }
	ms := func(dst *time.Duration, minimum int64) error {
		if perr != nil || n < minimum {
			return bad(fmt.Sprintf("want an integer >= %d (milliseconds)", minimum))
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	switch key {
	case "group.initial.rebalance.delay.ms":
		return true, ms(&c.InitialRebalanceDelay, 0)
	case "group.min.session.timeout.ms":
		return true, ms(&c.MinSessionTimeout, 1)
	case "group.max.session.timeout.ms":
		return true, ms(&c.MaxSessionTimeout, 1)
	case "group.max.size":
		if perr != nil || n < 1 {
			return true, bad("want an integer >= 1")
		}
		c.MaxGroupSize = int(n)
		return true, nil
	case "offsets.retention.minutes":
		if perr != nil || n < 0 {
			return true, bad("want an integer >= 0 (minutes; 0 = never)")
		}
		c.OffsetsRetention = time.Duration(n) * time.Minute
		return true, nil
	case "group.consumer.session.timeout.ms":
		return true, ms(&c.ConsumerSessionTimeout, 1)
	case "group.consumer.heartbeat.interval.ms":
		return true, ms(&c.ConsumerHeartbeatInterval, 1)
	case "offsets.retention.check.interval.ms":
		return true, ms(&c.RetentionCheckInterval, 1)
	case "offset.metadata.max.bytes":
		if perr != nil || n < 0 {
			return true, bad("want an integer >= 0")
		}
		c.MaxMetadataBytes = int(n)
		return true, nil
	}
	return false, nil
}
