package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dieWithParent has the kernel SIGKILL the hog when the script that
// started it dies, however it dies (its trap does not run on SIGKILL).
func dieWithParent() error {
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return err
	}
	if os.Getppid() != ppid {
		return errors.New("parent exited while starting")
	}
	return nil
}
