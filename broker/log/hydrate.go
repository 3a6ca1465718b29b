package log

import "time"

// LocalRetention is local.retention.ms and local.retention.bytes as local
// retention applies them (-2 resolved to retention.*, capped by it;
// negative: unlimited). A replica hydrating from the slow tier copies only
// the segments these keep (broker/tier HydrationPlan), so it never
// downloads history it would delete at once.
func (c Config) LocalRetention() (time.Duration, int64) { return c.localRetention() }
