package integration

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestStrataDev runs `strata dev` as `make dev` does (the default: WAL
// replication through a local Versity Gateway with one bucket per zone,
// embedded etcd, one broker in each of zones a, b and c), reads where the
// buckets live from its output, waits for its exact ready line, produces
// and consumes with kcat through the printed bootstrap addresses (three
// brokers, a topic replicated to all three), checks that WAL objects land
// in a zone bucket's directory and that the printed `strata wal inspect`
// command prints the first object's chunk table, and stops dev with SIGINT
// (Ctrl-C): it must exit 0 and remove its temporary data directory.
func TestStrataDev(t *testing.T) {
	kcat := kcatPath(t)
	if _, err := s3server.Binary(); err != nil {
		t.Fatal(err) // says to run `make test` (or `make test-deps`)
	}
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
	bucketLine := regexp.MustCompile(`^  zone (\S+) +s3://(strata-wal-\S+) \(files under (\S+)\)$`)
	endpointLine := regexp.MustCompile(`^  endpoint +(http://127\.0\.0\.1:\d+) `)
	tierLine := regexp.MustCompile(`^  slow tier +s3://strata-tier \(files under \S+\)`)
	tierOn := false
	sc := bufio.NewScanner(stdout)
	var addr, endpoint string
	bucketDirs := map[string]string{} // zone → directory of its bucket
	for sc.Scan() {
		t.Logf("stdout: %s", sc.Text())
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
		if m := bucketLine.FindStringSubmatch(sc.Text()); m != nil {
			if m[2] != "strata-wal-"+m[1] {
				t.Errorf("zone %s has bucket %s", m[1], m[2])
			}
			bucketDirs[m[1]] = m[3]
		}
		if m := endpointLine.FindStringSubmatch(sc.Text()); m != nil {
			endpoint = m[1]
		}
		tierOn = tierOn || tierLine.MatchString(sc.Text())
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no ready line; stderr:\n%s", stderr.String())
	}
	if len(bucketDirs) != 3 || endpoint == "" || !tierOn {
		t.Fatalf("dev printed buckets %v, endpoint %q, slow tier %v before its ready line, want the 3 zones' buckets, the gateway and the slow-tier bucket strata-tier", bucketDirs, endpoint, tierOn)
	}
	// The rest of stdout: the first WAL object's inspect command.
	inspectLine := make(chan string, 1)
	go func() {
		announced := false
		for sc.Scan() {
			switch {
			case strings.HasPrefix(sc.Text(), "strata dev: first WAL object "):
				announced = true
			case announced:
				inspectLine <- strings.TrimSpace(sc.Text())
				announced = false
			}
		}
		close(inspectLine)
	}()

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

	// The records went through a WAL object in the leader's zone bucket.
	var line string
	select {
	case line = <-inspectLine:
	case <-ctx.Done():
	}
	if line == "" {
		t.Fatalf("no `wal inspect` command printed after producing; stderr:\n%s", tail(stderr.String(), 30))
	}
	objURL := regexp.MustCompile(`s3://(strata-wal-(\S+?))/(wal/\S+)$`).FindStringSubmatch(line)
	if objURL == nil || !strings.Contains(line, "--endpoint "+endpoint) {
		t.Fatalf("inspect command %q: want s3://strata-wal-<zone>/wal/... on %s", line, endpoint)
	}
	objFile := filepath.Join(bucketDirs[objURL[2]], filepath.FromSlash(objURL[3]))
	if st, err := os.Stat(objFile); err != nil || st.Size() == 0 {
		t.Fatalf("object %s not in zone %s's bucket directory: %v", objURL[0], objURL[2], err)
	}
	// Run the printed command as a user pastes it: VAR=value... binary args.
	fields := strings.Fields(line)
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env = append(env, fields[0])
		fields = fields[1:]
	}
	if len(env) != 2 || len(fields) < 3 || fields[1] != "wal" || fields[2] != "inspect" {
		t.Fatalf("inspect command %q: want credentials, the strata binary, wal inspect", line)
	}
	inspect := exec.CommandContext(ctx, fields[0], fields[1:]...)
	inspect.Env = append(os.Environ(), env...)
	out, err = inspect.CombinedOutput()
	table := regexp.MustCompile(`(?m)^\d+\s+devtopic\s+0\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+[0-9a-f]{8}\s+\d+\s+ok$`)
	if err != nil || !bytes.Contains(out, []byte("format       SWAL v1")) || !table.Match(out) {
		t.Fatalf("%s: %v\n%s\nwant the object's header and a chunk table with a devtopic chunk", line, err, out)
	}
	t.Logf("%s\n%s", line, out)

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

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestStrataDevKeepDir runs `strata dev --keep-dir DIR` (WAL replication,
// the default) twice on the same directory: the second start must come up
// on the kept data — the gateway's buckets, etcd, every broker's log — and
// serve the records acknowledged in the first run.
func TestStrataDevKeepDir(t *testing.T) {
	kcat := kcatPath(t)
	if _, err := s3server.Binary(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	consume := func(addr string) string {
		out, err := exec.CommandContext(ctx, kcat, "-b", addr, "-C", "-t", "kept", "-e", "-o", "beginning", "-f", "%s\n").Output()
		if err != nil {
			t.Fatalf("kcat -C: %v\n%q", err, out)
		}
		return string(out)
	}
	produce := func(addr, lines string) {
		p := exec.CommandContext(ctx, kcat, "-b", addr, "-P", "-t", "kept", "-X", "acks=all")
		p.Stdin = strings.NewReader(lines)
		if out, err := p.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v\n%s", err, out)
		}
	}

	addr, stop := startDev(ctx, t, "--keep-dir", dir)
	produce(addr, "one\ntwo\n")
	if got := consume(addr); got != "one\ntwo\n" {
		t.Fatalf("first run reads %q", got)
	}
	stop()

	addr, stop = startDev(ctx, t, "--keep-dir", dir)
	defer stop()
	if got := consume(addr); got != "one\ntwo\n" {
		t.Fatalf("after restarting on the kept directory the topic reads %q, want the two records of the first run", got)
	}
	produce(addr, "three\n")
	if got := consume(addr); got != "one\ntwo\nthree\n" {
		t.Fatalf("after producing on the restarted cluster the topic reads %q", got)
	}
}

// startDev starts `strata dev` with args, waits for its ready line and
// returns the bootstrap address and a stop function that sends SIGINT
// (Ctrl-C) and requires a clean exit.
func startDev(ctx context.Context, t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	cmd := exec.CommandContext(ctx, brokertest.Binary(t), append([]string{"dev", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := regexp.MustCompile(`^strata dev ready: bootstrap=(\S+)$`)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := ready.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("strata dev %v: no ready line; stderr:\n%s", args, tail(stderr.String(), 40))
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	var once sync.Once
	return addr, func() {
		once.Do(func() {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("strata dev %v after Ctrl-C: %v\nstderr:\n%s", args, err, tail(stderr.String(), 40))
			}
		})
	}
}
