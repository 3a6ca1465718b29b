package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/verify"
)

// TestVerifyBadFlags: bad input is refused with a clear error before
// anything connects.
func TestVerifyBadFlags(t *testing.T) {
	base := []string{"verify", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--listen", ""}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--topic", "t"}, "--bootstrap: at least one broker host:port"},
		{[]string{"verify", "--bootstrap", "127.0.0.1:1"}, "--topic: required"},
		{append(slices.Clone(base), "--rate", "-1"), "--rate -1: want >= 0"},
		{append(slices.Clone(base), "--record-size", "-5"), "--record-size -5: want >= 0"},
		{append(slices.Clone(base), "--partitions", "-1"), "--partitions -1: want >= 0"},
		{append(slices.Clone(base), "--replication-factor", "0"), "--replication-factor 0: want >= 1"},
		{append(slices.Clone(base), "--drain-timeout", "0s"), "--drain-timeout 0s: want >= 0 and > 0"},
		{append(slices.Clone(base), "--listen", "127.0.0.1:notaport"), "--listen 127.0.0.1:notaport"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			root := NewRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tc.args)
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestVerifyExitStatus: a run ended by --duration succeeds when nothing was
// lost, and fails (main exits 1) when the consumer missed an acknowledged
// record, with the final status on stdout either way.
func TestVerifyExitStatus(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a"})
	run := func(t *testing.T, topic string) (verify.Status, error) {
		t.Helper()
		root := NewRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"verify", "--bootstrap", c.Addrs()[0], "--topic", topic, "--partitions", "3", "--replication-factor", "1",
			"--rate", "500", "--duration", "2s", "--drain-timeout", "5s", "--listen", "", "--json"})
		err := root.Execute()
		var st verify.Status
		if jerr := json.Unmarshal(out.Bytes(), &st); jerr != nil {
			t.Fatalf("stdout is not the final status (%v): %s\nstderr: %s", jerr, out.String(), errOut.String())
		}
		return st, err
	}

	t.Run("clean", func(t *testing.T) {
		st, err := run(t, "clean")
		if err != nil || !st.Done || !st.OK() || st.Acked == 0 {
			t.Fatalf("err %v, final status %+v", err, st)
		}
	})
	t.Run("a record lost", func(t *testing.T) {
		verifyTamper = func(r *kgo.Record) []*kgo.Record {
			if r.Partition == 0 && strings.Fields(string(r.Value))[1] == "3" {
				return nil
			}
			return []*kgo.Record{r}
		}
		t.Cleanup(func() { verifyTamper = nil })
		st, err := run(t, "lost")
		if !errors.Is(err, errVerifyFailed) || st.Lost < 1 || !slices.Contains(st.LostExamples, "partition 0: record 3 acknowledged, never consumed") {
			t.Fatalf("err %v, final status %+v", err, st)
		}
	})
}

// TestVerifyNoCluster: a run that never finds its cluster ends at
// --duration with a clear error and still prints its status, with the last
// error it met.
func TestVerifyNoCluster(t *testing.T) {
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"verify", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--duration", "1s", "--listen", "", "--json"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "verify: topic t: context deadline exceeded") {
		t.Fatalf("err %v", err)
	}
	var st verify.Status
	if jerr := json.Unmarshal(out.Bytes(), &st); jerr != nil || !st.Done || st.Running || !strings.Contains(st.LastError, "verify: topic t:") {
		t.Fatalf("stdout %s (%v)", out.String(), jerr)
	}
}
