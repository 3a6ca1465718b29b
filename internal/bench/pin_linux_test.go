package bench

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPinProcess pins a real child process (and so every thread it has)
// to one CPU and reads the affinity back from the kernel; the child's
// children are found through /proc; CPU time comes from /proc/<pid>/stat.
func TestPinProcess(t *testing.T) {
	cpus, err := availableCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("%d CPU: nothing to pin apart", len(cpus))
	}
	// A shell with a child of its own (sleep), as strata dev with Versity.
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var kids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(kids) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shell's child never showed up in /proc")
		}
		kids = childPIDs(cmd.Process.Pid)
		time.Sleep(10 * time.Millisecond) // polling /proc: no event to wait on
	}
	t.Cleanup(func() {
		for _, k := range kids {
			_ = unix.Kill(k, unix.SIGKILL)
		}
	})
	last := cpus[len(cpus)-1]
	if err := pinProcess(cmd.Process.Pid, []int{cpus[0]}); err != nil {
		t.Fatal(err)
	}
	if err := pinProcess(kids[0], []int{last}); err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[int]int{cmd.Process.Pid: cpus[0], kids[0]: last} {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			t.Fatal(err)
		}
		if set.Count() != 1 || !set.IsSet(want) {
			t.Errorf("process %d: affinity has %d CPUs, want only CPU %d", pid, set.Count(), want)
		}
	}
	if _, err := processCPUTime(cmd.Process.Pid); err != nil {
		t.Errorf("CPU time: %v", err)
	}
	if _, err := processCPUTime(1 << 30); err == nil {
		t.Error("CPU time of a process that does not exist: no error")
	}
}
