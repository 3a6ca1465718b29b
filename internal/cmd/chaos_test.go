package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// TestChaosBadFlags: bad input is refused with a clear error before any
// process, directory or server is started.
func TestChaosBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--replication", "quorum"}, `--replication "quorum": want wal or classic`},
		{[]string{"--duration", "5s"}, "--duration 5s: at least 15s"},
		{[]string{"--faults", "kill,meteor", "--replication", "classic"}, `unknown fault kind "meteor"`},
		{[]string{"--keep-dir", t.TempDir() + "/..", "--replication", "classic"}, "is not empty"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := NewRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append([]string{"chaos"}, tc.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}
