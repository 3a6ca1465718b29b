package group

import (
	"fmt"
	"strconv"
	"time"
)

// ShareSettingKeys are the broker config keys ShareConfig.Set understands:
// Kafka's group.share.* broker settings, and share.auto.offset.reset,
// which Kafka sets per group (IncrementalAlterConfigs on the GROUP
// resource) and share.isolation.level, which Kafka sets per group and
// which here are the defaults of every share group.
var ShareSettingKeys = []string{
	"group.share.record.lock.duration.ms",
	"group.share.delivery.count.limit",
	"group.share.session.timeout.ms",
	"group.share.heartbeat.interval.ms",
	"group.share.max.size",
	"max.share.session.cache.size",
	"share.auto.offset.reset",
	"share.isolation.level",
}

// Set applies one config key (see ShareSettingKeys) to c; known is false
// for keys that are not share-group settings. The ranges are Kafka's.
func (c *ShareConfig) Set(key, value string) (known bool, err error) {
	n, perr := strconv.ParseInt(value, 10, 32)
	bad := func(why string) error { return fmt.Errorf("group: %s=%q: %s", key, value, why) }
	ms := func(dst *time.Duration, lo, hi int64) error {
		if perr != nil || n < lo || n > hi {
			return bad(fmt.Sprintf("want milliseconds in [%d, %d]", lo, hi))
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	count := func(lo, hi int64) (int64, error) {
		if perr != nil || n < lo || n > hi {
			return 0, bad(fmt.Sprintf("want an integer in [%d, %d]", lo, hi))
		}
		return n, nil
	}
	switch key {
	case "group.share.record.lock.duration.ms":
		return true, ms(&c.RecordLockDuration, 1000, 3_600_000)
	case "group.share.session.timeout.ms":
		return true, ms(&c.SessionTimeout, 1, 1<<31-1)
	case "group.share.heartbeat.interval.ms":
		return true, ms(&c.HeartbeatInterval, 1, 1<<31-1)
	case "group.share.delivery.count.limit":
		v, err := count(2, 10)
		c.DeliveryCountLimit = int16(v)
		return true, err
	case "group.share.max.size":
		v, err := count(1, 1000)
		c.MaxGroupSize = int(v)
		return true, err
	case "max.share.session.cache.size":
		v, err := count(1, 1<<31-1)
		c.MaxSessions = int(v)
		return true, err
	case "share.auto.offset.reset":
		if value != "latest" && value != "earliest" {
			return true, bad("want latest or earliest")
		}
		c.AutoOffsetReset = value
		return true, nil
	case "share.isolation.level":
		if value != "read_uncommitted" && value != "read_committed" {
			return true, bad("want read_uncommitted or read_committed")
		}
		c.IsolationLevel = value
		return true, nil
	}
	return false, nil
}
