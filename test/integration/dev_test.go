package integration

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestStrataDev runs `strata dev` (what `make dev` runs: embedded etcd and
// one broker in each of zones a, b and c), waits for its exact ready line,
// uses the printed bootstrap addresses with kcat (three brokers, a topic
// replicated to all three), and stops it with SIGINT (Ctrl-C): it must exit
// 0 and remove its temporary data directory.
func TestStrataDev(t *testing.T) {
	kcat := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, brokertest.Binary(t), "dev", "--listen", "127.0.0.1:0", "--log-format", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := regexp.MustCompile(`^strata dev ready: bootstrap=(127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+)$`)
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
		t.Logf("stdout: %s", sc.Text())
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no ready line; stderr:\n%s", stderr.String())
	}
	out, err := exec.CommandContext(ctx, kcat, "-b", addr, "-L").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("3 brokers:")) {
		t.Fatalf("kcat -L against %s: %v\n%s", addr, err, out)
	}
	produce := exec.CommandContext(ctx, kcat, "-b", addr, "-P", "-t", "devtopic", "-X", "acks=all")
	produce.Stdin = strings.NewReader("one\ntwo\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, kcat, "-b", addr, "-C", "-t", "devtopic", "-e", "-o", "beginning", "-f", "%s\n").Output()
	if err != nil || !bytes.Equal(out, []byte("one\ntwo\n")) {
		t.Fatalf("kcat -C: %v\n%q", err, out)
	}
	out, err = exec.CommandContext(ctx, kcat, "-b", addr, "-L", "-t", "devtopic").CombinedOutput()
	if err != nil || !regexp.MustCompile(`replicas: \d+,\d+,\d+, isrs: \d+,\d+,\d+`).Match(out) {
		t.Fatalf("devtopic is not replicated to three in-sync brokers: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("strata dev after Ctrl-C: %v\nstderr:\n%s", err, stderr.String())
	}
	dir := regexp.MustCompile(`"dataDir":"([^"]+)"`).FindStringSubmatch(stderr.String())
	if dir == nil {
		t.Fatalf("no dataDir in the logs:\n%s", stderr.String())
	}
	if _, err := os.Stat(dir[1]); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir %s still there after exit (%v)", dir[1], err)
	}
}
