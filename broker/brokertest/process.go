package brokertest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/internal/childproc"
	"github.com/strata-dev/strata/internal/freeport"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds the strata binary once per test process (go build into a
// temporary directory) and returns its path. Set STRATA_BINARY to use a
// prebuilt binary instead.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("STRATA_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-brokertest-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "strata")
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("brokertest: building strata: %v", buildErr)
	}
	return buildPath
}

// RemoveBinary deletes the binary built by Binary; call it from TestMain
// after m.Run.
func RemoveBinary() {
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
}

func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the brokertest source")
	}
	// file is <root>/broker/brokertest/process.go
	return filepath.Dir(filepath.Dir(filepath.Dir(file))), nil
}

// Process is a `strata broker` subprocess.
type Process struct {
	t    testing.TB
	opts *options
	bin  string
	addr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done <-chan struct{}
	logs *SyncBuffer
}

// StartProcess builds (once) and starts `strata broker` as a subprocess on
// 127.0.0.1 with a free port and a temporary data directory, and waits
// until it answers Kafka requests (its data directory is recovered). It is stopped (SIGTERM, then SIGKILL) when
// the test ends; its output is printed if the test failed.
func StartProcess(t testing.TB, opts ...Option) *Process {
	t.Helper()
	p := &Process{t: t, opts: buildOptions(t, opts), bin: Binary(t)}
	p.Start()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("broker output:\n%s", p.Logs())
		}
	})
	return p
}

// Start starts the subprocess again (after Kill or Stop) on the same data
// directory, with a new free port (the same address with WithStableAddr).
func (p *Process) Start() {
	p.t.Helper()
	if p.addr == "" || !p.opts.stableAddr {
		port, err := freePort()
		if err != nil {
			p.t.Fatalf("brokertest: %v", err)
		}
		p.addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	}
	args := []string{"broker", "--listen", p.addr, "--data-dir", p.opts.dir, "--metrics-listen", "", "--log-format", "console"}
	for k, v := range p.opts.settings {
		args = append(args, "--set", k+"="+v)
	}
	if _, ok := p.opts.settings["wal.policy"]; !ok {
		// As Start: WAL objects whatever the test's throughput.
		args = append(args, "--set", "wal.policy=latency")
	}
	args = append(args, p.opts.args...)
	cmd := exec.Command(p.bin, args...)
	if p.logs == nil {
		p.logs = &SyncBuffer{}
	}
	fmt.Fprintf(p.logs, "=== start: %s %s\n", p.bin, strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	// SIGKILLed with the test binary (a -timeout panic runs no Cleanup).
	done, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		p.t.Fatalf("brokertest: start %s: %v", p.bin, err)
	}
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := waitReady(p.addr, time.Now().Add(200*time.Millisecond)); err == nil {
			return
		}
		select {
		case <-done:
			p.t.Fatalf("brokertest: broker exited before listening:\n%s", p.Logs())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("brokertest: broker not listening on %s after 60s:\n%s", p.addr, p.Logs())
		}
	}
}

// Addr returns the broker's address.
func (p *Process) Addr() string { return p.addr }

// Pid returns the process ID of the running subprocess (0 if none).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Dir returns the data directory.
func (p *Process) Dir() string { return p.opts.dir }

// Exited reports whether the subprocess, started and not stopped by the
// test, ended on its own.
func (p *Process) Exited() bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Logs returns everything the subprocess wrote so far.
func (p *Process) Logs() string { return p.logs.String() }

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() { p.signal(syscall.SIGKILL, 0) }

// Stop sends SIGTERM, waits up to 30s for a graceful exit, then SIGKILL.
func (p *Process) Stop() { p.signal(syscall.SIGTERM, 30*time.Second) }

// Pause freezes the process (SIGSTOP): it keeps its connections and its
// etcd lease until the lease times out, but answers nothing. Resume it
// before the test ends.
func (p *Process) Pause() { p.send(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() { p.send(syscall.SIGCONT) }

func (p *Process) send(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Restart stops the process gracefully and starts it again.
func (p *Process) Restart() {
	p.Stop()
	p.Start()
}

func (p *Process) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
			p.t.Errorf("brokertest: broker did not stop within %v of %v; killing it", grace, sig)
			_ = cmd.Process.Kill()
		}
	}
	<-done
}

func freePort() (int, error) { return freeport.Port() }

// SyncBuffer collects a process's output for tests; safe for concurrent
// writes and reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Main is the TestMain of packages that run broker processes: it runs the
// tests, deletes the binary built by Binary, and fails a passing run that
// left goroutines behind (goleak). It does not return.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
