package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd so that the kernel sends the child sig when this process
// dies (Linux; see the package comment), and waits for it in the
// background: done is closed once cmd.Wait has returned, and after that
// cmd.ProcessState holds the exit status. The caller must not call
// cmd.Wait itself. cmd.SysProcAttr, if set, is kept apart from Pdeathsig.
//
// sig is SIGKILL for a child that must not outlive its parent by a moment
// (a gateway or broker of a test), SIGTERM for one that cleans up after
// itself (a `strata dev`, whose own children die with it).
func Start(cmd *exec.Cmd, sig syscall.Signal) (done <-chan struct{}, err error) {
	setDeathSignal(cmd, sig)
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		// The thread that forks is the child's parent for Pdeathsig: hold
		// it until the child is gone. Unlocking after Wait hands the
		// thread back to the scheduler instead of ending it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
