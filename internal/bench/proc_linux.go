package bench

import "syscall"

// devSysProcAttr puts `strata dev` in its own process group (so that a
// terminal's Ctrl-C reaches only the bench, which then stops dev
// gracefully); childproc.Start adds the signal it gets if the bench dies.
func devSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// tmpfsMagic is statfs(2)'s f_type of a tmpfs.
const tmpfsMagic = 0x01021994

// isTmpfs reports whether dir is on a tmpfs.
func isTmpfs(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}
