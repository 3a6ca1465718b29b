package bench

import "syscall"

// devSysProcAttr puts `strata dev` in its own process group (so that a
// terminal's Ctrl-C reaches only the bench, which then stops dev
// gracefully) and has the kernel send it SIGTERM if the bench dies.
func devSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
