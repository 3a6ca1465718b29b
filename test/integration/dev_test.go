package integration

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestStrataDev runs `strata dev` (what `make dev` runs), waits for its
// exact ready line, uses the printed bootstrap address with kcat, and
// stops it with SIGINT (Ctrl-C): it must exit 0 and remove its temporary
// data directory.
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
	ready := regexp.MustCompile(`^strata dev ready: bootstrap=(127\.0\.0\.1:\d+)$`)
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
	if err != nil || !bytes.Contains(out, []byte("1 brokers:")) {
		t.Fatalf("kcat -L against %s: %v\n%s", addr, err, out)
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
