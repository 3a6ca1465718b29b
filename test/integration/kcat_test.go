package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

func runKcat(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestKcatProduceConsume10000 produces 10,000 keyed records with kcat
// (librdkafka, lz4, acks=all) into a broker subprocess, consumes them back
// with kcat and checks every key, value and offset, then cross-checks the
// count with franz-go.
func TestKcatProduceConsume10000(t *testing.T) {
	const n = 10000
	p := brokertest.StartProcess(t)

	// Metadata first: the broker is listed as the controller.
	meta := runKcat(t, nil, "-b", p.Addr(), "-L")
	if !bytes.Contains(meta, []byte("1 brokers:")) {
		t.Fatalf("kcat -L:\n%s", meta)
	}

	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "key-%05d:value-%05d-%s\n", i, i, strings.Repeat("x", i%50))
	}
	file := filepath.Join(t.TempDir(), "records.txt")
	if err := os.WriteFile(file, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The topic is auto-created (num.partitions=1) on first use.
	runKcat(t, nil, "-b", p.Addr(), "-P", "-t", "kcat10k", "-K", ":", "-z", "lz4",
		"-X", "acks=all", "-H", "source=kcat", "-l", file)

	out := runKcat(t, nil, "-b", p.Addr(), "-C", "-t", "kcat10k", "-o", "beginning", "-e",
		"-f", "%p %o %k %s %h\n")
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for sc.Scan() {
		want := fmt.Sprintf("0 %d key-%05d value-%05d-%s source=kcat", i, i, i, strings.Repeat("x", i%50))
		if sc.Text() != want {
			t.Fatalf("record %d: got %q, want %q", i, sc.Text(), want)
		}
		i++
	}
	if i != n {
		t.Fatalf("kcat consumed %d records, want %d", i, n)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "kcat10k")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("kcat10k", 0); o.Offset != n {
		t.Fatalf("end offset %d, want %d", o.Offset, n)
	}
}
