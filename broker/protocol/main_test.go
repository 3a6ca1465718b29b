package protocol_test

import (
	"testing"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestMain fails a passing run that leaves goroutines behind and deletes
// the strata binary the process-cluster tests build.
func TestMain(m *testing.M) { brokertest.Main(m) }
