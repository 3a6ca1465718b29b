package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/internal/childproc"
	"github.com/strata-dev/strata/internal/freeport"
)

// broker is one `strata broker` subprocess of the chaos cluster, started
// again on the same data directory and port after a kill or restart.
// incarnation counts its starts (1 for the first).
type broker struct {
	id      int32
	zone    string
	bin     string
	dir     string
	logPath string
	addr    string
	// metricsAddr serves the broker's /metrics ("" none; set with
	// --zone-local-producers, whose counters are read there).
	metricsAddr string
	args        []string // besides --listen and --data-dir
	env         []string

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        <-chan struct{}
	incarnation int
	paused      bool
}

// start launches the process and waits until it answers Kafka requests
// (its log directory is recovered) or ctx ends.
func (b *broker) start(ctx context.Context) error {
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("broker %d log: %w", b.id, err)
	}
	args := append([]string{"broker", "--listen", b.addr, "--data-dir", b.dir}, b.args...)
	cmd := exec.Command(b.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = b.env
	b.mu.Lock()
	b.incarnation++
	fmt.Fprintf(logf, "=== chaos: start broker %d incarnation %d: %s %v\n", b.id, b.incarnation, b.bin, args)
	// Killed with `strata chaos` even when it is SIGKILLed.
	done, err := childproc.Start(cmd, syscall.SIGKILL)
	logf.Close() // the child has its own descriptor
	if err != nil {
		b.mu.Unlock()
		return fmt.Errorf("start broker %d: %w", b.id, err)
	}
	b.cmd, b.done, b.paused = cmd, done, false
	b.mu.Unlock()
	return waitReady(ctx, b.addr, done, b.id)
}

// waitReady polls a Kafka request on addr until it succeeds, the process
// exits or a minute passes.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}, id int32) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("broker %d exited while starting", id)
		case <-ctx.Done():
			return fmt.Errorf("broker %d not answering on %s: %w", id, addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Incarnation returns the current incarnation and whether the process is
// running (and not paused).
func (b *broker) Incarnation() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.incarnation, b.cmd != nil && !b.paused
}

func (b *broker) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// kill sends SIGKILL and waits for the exit.
func (b *broker) kill() { b.stopWith(syscall.SIGKILL, 0) }

// stop sends SIGTERM and waits up to grace for a clean exit (then
// SIGKILL); it reports whether the exit was clean.
func (b *broker) stop(grace time.Duration) bool { return b.stopWith(syscall.SIGTERM, grace) }

func (b *broker) stopWith(sig syscall.Signal, grace time.Duration) bool {
	b.mu.Lock()
	cmd, done, paused := b.cmd, b.done, b.paused
	b.cmd, b.paused = nil, false
	b.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	clean := true
	if grace > 0 {
		select {
		case <-done:
		case <-time.After(grace):
			clean = false
			_ = cmd.Process.Kill()
		}
	}
	<-done
	return clean && cmd.ProcessState != nil && cmd.ProcessState.Success()
}

func (b *broker) pause() error  { return b.signal(syscall.SIGSTOP, true) }
func (b *broker) resume() error { return b.signal(syscall.SIGCONT, false) }

func (b *broker) signal(sig syscall.Signal, paused bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return errors.New("not running")
	}
	if err := b.cmd.Process.Signal(sig); err != nil {
		return err
	}
	b.paused = paused
	return nil
}

// freeAddr is an address for a broker to bind (freeport: below the
// ephemeral range, so that it is still free when a broker restarts on it).
func freeAddr() (string, error) { return freeport.Addr() }
