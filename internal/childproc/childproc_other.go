//go:build !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal does nothing: only Linux has a parent-death signal.
func setDeathSignal(*exec.Cmd, syscall.Signal) {}
