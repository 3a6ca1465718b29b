package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// --- KafkaJS (Node.js) ---

// kafkaJS drives KafkaJS through kafkajs.js with the machine's node.
type kafkaJS struct{}

// nodePath is node, with KafkaJS installed under $STRATA_KAFKAJS (make
// test-deps).
func nodePath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STRATA_KAFKAJS")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); dir == "" || err != nil {
		t.Fatalf("KafkaJS not found under STRATA_KAFKAJS=%q: run `make test` (or `make test-deps`) to install it", dir)
	}
	return binary(t, "STRATA_NODE", "node")
}

func (kafkaJS) version(t *testing.T) string {
	return strings.TrimSpace(runTool(t, nil, nodePath(t), "kafkajs.js", "version"))
}

func (kafkaJS) produce(t *testing.T, addr string, recs []record) {
	runTool(t, keyValueLines(recs), nodePath(t), "kafkajs.js", "produce", addr, topic)
}

func (kafkaJS) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	return startProc(t, name, out, nodePath(t), "kafkajs.js", "consume", addr, group, topic, name)
}

func TestKafkaJS(t *testing.T) { runScenario(t, kafkaJS{}) }

// TestKafkaJSTransactions: KafkaJS's transactional producer commits 500
// and aborts 500 records (10 transactions of 100); a franz-go
// read_committed consumer sees only the committed ones, a
// read_uncommitted one both.
func TestKafkaJSTransactions(t *testing.T) {
	b := brokertest.Start(t)
	out := runTool(t, nil, nodePath(t), "kafkajs.js", "txn", b.Addr(), "txn-kafkajs", "kafkajs-app", "10", "100")
	if !strings.Contains(out, "ok") {
		t.Fatalf("transactions: %s", out)
	}
	if c, a := countTxnRecords(t, b.Addr(), "txn-kafkajs", kgo.ReadCommitted()); c != 500 || a != 0 {
		t.Fatalf("read_committed: %d committed, %d aborted; want 500, 0", c, a)
	}
	if c, a := countTxnRecords(t, b.Addr(), "txn-kafkajs", kgo.ReadUncommitted()); c != 500 || a != 500 {
		t.Fatalf("read_uncommitted: %d committed, %d aborted; want 500, 500", c, a)
	}
}
