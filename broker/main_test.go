package broker

import (
	"testing"

	"go.uber.org/goleak"
)

// Partition logs run flusher goroutines; Close must stop them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
