package integration

import (
	"os"
	"os/exec"
	"testing"

	"github.com/strata-dev/strata/broker/brokertest"
)

func TestMain(m *testing.M) {
	brokertest.Main(m)
}

// kcatPath returns the kcat binary or fails the test.
func kcatPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("STRATA_KCAT")
	if p == "" {
		p = "/usr/bin/kcat"
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("kcat not found at %s (set STRATA_KCAT): run `make test` (or `make test-deps`) to install it", p)
	}
	return p
}
