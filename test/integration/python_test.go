package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
)

// pythonPath returns Debian's python3 (the one the python3-kafka and
// python3-confluent-kafka packages install into) or fails the test.
func pythonPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("STRATA_PYTHON")
	if p == "" {
		p = "/usr/bin/python3"
	}
	out, err := exec.Command(p, "-c", "import kafka, confluent_kafka").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import kafka and confluent_kafka (%v: %s): run `make test` (or `make test-deps`) to install python3-kafka and python3-confluent-kafka", p, err, out)
	}
	return p
}

// pythonClients is run by Debian's python3 against the broker: kafka-python
// (its own protocol implementation, old API versions) creates a topic,
// produces gzip records and consumes them; confluent-kafka (librdkafka)
// produces idempotently with zstd and consumes everything through a
// consumer group. Prints OK on success.
const pythonClients = `
import sys, time
from kafka import KafkaProducer, KafkaConsumer, KafkaAdminClient
from kafka.admin import NewTopic
from confluent_kafka import Producer, Consumer
bs = sys.argv[1]
KafkaAdminClient(bootstrap_servers=bs).create_topics([NewTopic("py", 2, 1)])
p = KafkaProducer(bootstrap_servers=bs, acks=1, compression_type="gzip")
for i in range(500):
    p.send("py", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
p.flush()
c = KafkaConsumer("py", bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=10000)
got = sorted(m.value for m in c)
assert got == sorted(b"v%d" % i for i in range(500)), "kafka-python read %d records" % len(got)
pr = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "compression.type": "zstd", "acks": "all"})
for i in range(500):
    pr.produce("py", key=b"c%d" % i, value=b"w%d" % i)
assert pr.flush(30) == 0
co = Consumer({"bootstrap.servers": bs, "group.id": "pygroup", "auto.offset.reset": "earliest"})
co.subscribe(["py"])
seen = set()
deadline = time.time() + 60
while len(seen) < 1000 and time.time() < deadline:
    m = co.poll(1)
    if m is None:
        continue
    assert not m.error(), m.error()
    seen.add((m.partition(), m.offset()))
co.close()
assert len(seen) == 1000, "confluent-kafka read %d records" % len(seen)
print("OK")
`

func TestPythonClients(t *testing.T) {
	py := pythonPath(t)
	p := brokertest.StartProcess(t, brokertest.WithSetting("group.initial.rebalance.delay.ms", "0"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", pythonClients, p.Addr())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "OK") {
		t.Fatalf("python clients: %v\n%s", err, out.String())
	}
}
