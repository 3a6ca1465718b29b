//go:build !linux

package bench

import "syscall"

// devSysProcAttr puts `strata dev` in its own process group.
func devSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// isTmpfs reports whether dir is on a tmpfs: unknown here.
func isTmpfs(string) bool { return false }
