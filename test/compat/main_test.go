package compat

import (
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Sarama's metrics registry starts a meter ticker per process.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// binary returns the path from env (or def) or fails the test.
func binary(t *testing.T, env, def string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = def
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("%s not found (set %s): run `make test` (or `make test-deps`) to install it", p, env)
	}
	return p
}

func kcatPath(t *testing.T) string { return binary(t, "STRATA_KCAT", "/usr/bin/kcat") }

// pythonPath is Debian's python3: the Debian Kafka client packages are
// importable only from it.
func pythonPath(t *testing.T) string { return binary(t, "STRATA_PYTHON", "/usr/bin/python3") }
