package compat

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestConfluentKafkaPythonTransactions: librdkafka (confluent-kafka-python)
// commits 1,000 and aborts 1,000 transactional records (20 transactions
// of 100, alternately committed and aborted). A read_committed consumer
// sees exactly the committed ones, in order per partition; a
// read_uncommitted one sees both.
func TestConfluentKafkaPythonTransactions(t *testing.T) {
	py := pythonPath(t)
	b := brokertest.Start(t)
	out := runTool(t, nil, py, "txn_clients.py", "produce", b.Addr(), "txn-py", "py-app", "20", "100")
	if !strings.Contains(out, "ok") {
		t.Fatalf("produce: %s", out)
	}
	read := func(isolation string) []string {
		var vals []string
		for _, l := range strings.Split(runTool(t, nil, py, "txn_clients.py", "consume", b.Addr(), "txn-py", isolation), "\n") {
			if l = strings.TrimSpace(l); l != "" && (strings.HasPrefix(l, "c-") || strings.HasPrefix(l, "a-")) {
				vals = append(vals, l)
			}
		}
		return vals
	}
	committed := read("read_committed")
	count := func(vals []string, prefix string) int {
		n := 0
		for _, v := range vals {
			if strings.HasPrefix(v, prefix) {
				n++
			}
		}
		return n
	}
	if c, a := count(committed, "c-"), count(committed, "a-"); c != 1000 || a != 0 {
		t.Fatalf("read_committed saw %d committed and %d aborted records, want 1000 and 0", c, a)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(committed)))) != 1000 {
		t.Fatalf("read_committed saw duplicates")
	}
	all := read("read_uncommitted")
	if c, a := count(all, "c-"), count(all, "a-"); c != 1000 || a != 1000 {
		t.Fatalf("read_uncommitted saw %d committed and %d aborted records, want 1000 and 1000", c, a)
	}
}

// TestConfluentKafkaPythonZombieFenced: a second producer with the same
// transactional.id fences the first; the first's commit fails with a
// fatal fencing error, the second commits.
func TestConfluentKafkaPythonZombieFenced(t *testing.T) {
	py := pythonPath(t)
	b := brokertest.Start(t)
	out := runTool(t, nil, py, "txn_clients.py", "zombie", b.Addr(), "txn-zombie", "zombie-app")
	if !strings.Contains(out, "fenced") || !strings.Contains(out, "fatal=True") {
		t.Fatalf("zombie producer was not fenced: %s", out)
	}
	var got []string
	for _, l := range strings.Split(runTool(t, nil, py, "txn_clients.py", "consume", b.Addr(), "txn-zombie", "read_committed"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, " ") {
			got = append(got, l)
		}
	}
	if !slices.Equal(got, []string{"after-fence"}) {
		t.Fatalf("read_committed after the fencing: %q, want only the new producer's record", got)
	}
}
