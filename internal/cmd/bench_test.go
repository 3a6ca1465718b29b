package cmd

import (
	"strings"
	"testing"
)

// TestBenchFlagErrors: flags for the embedded clusters are refused with
// --bootstrap, and a malformed --broker-config is refused, before anything
// starts.
func TestBenchFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker-config", "wal.upload.interval.ms"}, `--broker-config "wal.upload.interval.ms": want key=value`},
		{[]string{"--broker-config", "=5"}, `--broker-config "=5": want key=value`},
		{[]string{"--bootstrap", "127.0.0.1:1", "--broker-config", "a=b"}, "--broker-config is for the embedded clusters"},
		{[]string{"--bootstrap", "127.0.0.1:1", "--store-tmpfs=false"}, "--store-tmpfs is for the embedded clusters"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if _, err := runStrata(t, append([]string{"bench"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
