package cmd

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind (strata dev run in
// process, its brokers, the zone latency wrappers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
