package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// TestTierRoundLog: failed slow-tier rounds reach the default log level
// (the first, then one a minute while they go on, and the recovery), not
// one line per round and not only at V(1).
func TestTierRoundLog(t *testing.T) {
	var lines []string
	lg := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	var rl roundLog
	t0 := time.Unix(1000, 0)
	bucketDown := errors.New("upload t-0: connection refused")
	steps := []struct {
		at   time.Duration
		err  error
		want string // "" for no line
	}{
		{0, nil, ""},
		{time.Second, bucketDown, `"msg"="slow tier round failed; each partition retries with its own backoff" "failedRounds"=1 "error"="upload t-0: connection refused"`},
		{2 * time.Second, bucketDown, ""},
		{30 * time.Second, bucketDown, ""},
		{62 * time.Second, bucketDown, `"msg"="slow tier rounds still failing" "failedRounds"=3`},
		{63 * time.Second, nil, `"msg"="slow tier rounds succeed again" "failedRoundsSinceLastLog"=0`},
		{64 * time.Second, nil, ""},
		{65 * time.Second, bucketDown, `"msg"="slow tier round failed; each partition retries with its own backoff" "failedRounds"=1`},
	}
	for _, s := range steps {
		lines = nil
		rl.note(lg, s.err, t0.Add(s.at))
		switch {
		case s.want == "" && len(lines) > 0:
			t.Fatalf("at %v: logged %q, want nothing", s.at, lines)
		case s.want != "" && (len(lines) != 1 || !strings.Contains(lines[0], s.want)):
			t.Fatalf("at %v: logged %q, want one line with %s", s.at, lines, s.want)
		}
	}
}
