package integration

import (
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/broker/brokertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	brokertest.RemoveBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
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
