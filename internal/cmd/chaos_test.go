package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
		{[]string{"--zone-local-producers", "--replication", "classic"}, "--zone-local-producers needs --replication wal"},
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

// TestChaosCheck: `strata chaos check FILE` judges a history again: a
// healthy one passes, one whose replica lost an acknowledged record fails
// with the finding, a file without a result line is refused.
func TestChaosCheck(t *testing.T) {
	replica := func(broker int, records string, end int) string {
		return fmt.Sprintf(`{"t":2,"op":"replica","topic":"t","broker":%d,"end":%d,"bytes_sha256":"h%d","records":[%s]}`, broker, end, end, records)
	}
	head := `{"t":1,"op":"produce","topic":"t","offset":0,"value":"p0-0"}
{"t":1.5,"op":"fault","kind":"kill","what":"broker 2"}
{"t":1.6,"op":"read","topic":"t","offset":0,"value":"p0-0","broker":1,"incarnation":1}
{"t":2,"op":"hwm","topic":"t","hwm":1}
`
	result := `{"t":3,"op":"result","result":{"seed":7,"faults":{"kill":1},"fault_errors":{},"schedule":[{"kind":"kill","target":"broker:2","at_s":5}],"min_acked":1,"live":true}}` + "\n"
	rec := `{"o":0,"v":"p0-0"}`
	tests := []struct {
		name    string
		history string
		fails   bool
		want    string
	}{
		{"healthy", head + replica(1, rec, 1) + "\n" + replica(2, rec, 1) + "\n" + replica(3, rec, 1) + "\n" + result, false, "seed 7"},
		{"lost on replica 3", head + replica(1, rec, 1) + "\n" + replica(2, rec, 1) + "\n" + replica(3, "", 0) + "\n" + result, true,
			`"p0-0" (acknowledged) missing from replica 3`},
		{"cut short", head, true, "no result line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			if err := os.WriteFile(path, []byte(tc.history), 0o644); err != nil {
				t.Fatal(err)
			}
			root := NewRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs([]string{"chaos", "check", path})
			err := root.Execute()
			if (err != nil) != tc.fails {
				t.Fatalf("err %v, want failure %v; output:\n%s", err, tc.fails, out.String())
			}
			if got := out.String() + fmt.Sprint(err); !strings.Contains(got, tc.want) {
				t.Fatalf("output does not contain %q:\n%s", tc.want, got)
			}
		})
	}
}
