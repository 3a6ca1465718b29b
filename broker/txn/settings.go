package txn

import (
	"fmt"
	"strconv"
	"time"
)

// SettingKeys are the broker config keys Config.Set understands (Kafka's
// names).
var SettingKeys = []string{
	"transaction.max.timeout.ms",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms",
	"transactional.id.expiration.ms",
}

// Set applies one broker config key to c; known is false for keys that
// are not transaction coordinator settings.
func (c *Config) Set(key, value string) (known bool, err error) {
	var dst *time.Duration
	switch key {
	case "transaction.max.timeout.ms":
		dst = &c.MaxTimeout
	case "transaction.abort.timed.out.transaction.cleanup.interval.ms":
		dst = &c.AbortCheckInterval
	case "transactional.id.expiration.ms":
		dst = &c.IDExpiration
	default:
		return false, nil
	}
	n, err := strconv.ParseInt(value, 10, 32)
	if err != nil || n < 1 {
		return true, fmt.Errorf("txn: %s=%q: want an integer >= 1 (milliseconds)", key, value)
	}
	*dst = time.Duration(n) * time.Millisecond
	return true, nil
}
