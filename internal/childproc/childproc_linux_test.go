package childproc_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strata-dev/strata/internal/childproc"
)

// helperEnv selects what the re-executed test binary does instead of
// running the tests: "sleep" waits to be killed, "parent" starts a
// sleeper with childproc.Start, prints its PID and waits to be killed.
const helperEnv = "STRATA_CHILDPROC_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "sleep":
		// A child that only ends when signalled (not synchronisation:
		// this process has nothing else to do).
		time.Sleep(time.Hour)
		os.Exit(3)
	case "parent":
		cmd := sleeper()
		if _, err := childproc.Start(cmd, syscall.SIGKILL); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Hour)
		os.Exit(3)
	}
	goleak.VerifyTestMain(m)
}

// sleeper is this test binary as a child that waits to be killed.
func sleeper() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	return cmd
}

// TestChildDiesWithKilledParent SIGKILLs a process that started a child
// with Start (it runs no cleanup) and waits for the child to be gone.
func TestChildDiesWithKilledParent(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=parent")
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's PID from the parent: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("parent printed %q, want a PID", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !alive(pid) {
		t.Fatalf("child %d is not running before its parent is killed", pid)
	}

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running 30s after its parent was SIGKILLed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChildOutlivesForkingThread calls Start from a goroutine locked to
// its OS thread that then exits, which ends the thread: the child must not
// get the parent-death signal, since its parent process lives on.
func TestChildOutlivesForkingThread(t *testing.T) {
	type result struct {
		cmd  *exec.Cmd
		done <-chan struct{}
		tid  int
		err  error
	}
	var r result
	for {
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tid := syscall.Gettid()
			if tid == syscall.Getpid() {
				// Go keeps (wedges) the main thread instead of ending
				// it; try again on another one.
				ch <- result{tid: tid}
				return
			}
			cmd := sleeper()
			done, err := childproc.Start(cmd, syscall.SIGKILL)
			ch <- result{cmd: cmd, done: done, tid: tid, err: err}
		}()
		if r = <-ch; r.cmd != nil {
			break
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.done })

	taskDir := fmt.Sprintf("/proc/self/task/%d", r.tid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(taskDir); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d of the locked goroutine still exists after 30s", r.tid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The thread is gone, so a parent-death signal would have been sent
	// already; SIGTERM now, and the child must die of that one.
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("child already gone after its forking thread ended: %v", err)
	}
	<-r.done
	ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("child ended with %v, want killed by SIGTERM (not by the parent-death signal)", r.cmd.ProcessState)
	}
}

// alive reports whether pid exists and is not a zombie (a zombie is dead
// but not yet reaped by its new parent).
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Fields after "pid (comm) ": the state comes first; comm may hold
	// spaces, so cut at the last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}
