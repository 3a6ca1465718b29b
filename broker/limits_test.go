package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCheckFDBudget(t *testing.T) {
	headroom := func(free int64, ok bool) func() (int64, bool) {
		return func() (int64, bool) { return free, ok }
	}
	for _, tc := range []struct {
		name     string
		headroom func() (int64, bool)
		replicas int64
		refused  bool
	}{
		{"no budget known", nil, 1_000_000, false},
		{"unknown limit", headroom(0, false), 1_000_000, false},
		{"fits exactly", headroom(50, true), 10, false},
		{"one over", headroom(49, true), 10, true},
		{"nothing left", headroom(-20, true), 1, true},
		{"no new replicas here", headroom(0, true), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{FDHeadroom: tc.headroom}.checkFDBudget("t", tc.replicas)
			if (err != nil) != tc.refused {
				t.Fatalf("refused %v, want %v", err, tc.refused)
			}
			if err != nil && (!errors.Is(err, kerr.PolicyViolation) || !strings.Contains(err.Error(), "RLIMIT_NOFILE")) {
				t.Fatalf("error %v: want POLICY_VIOLATION naming RLIMIT_NOFILE", err)
			}
		})
	}
}
