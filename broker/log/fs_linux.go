package log

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

const batchSyncSupported = true

// SyncFiles syncs the file system of each file once, with syncfs(2)
// (which reports write-back errors since Linux 5.8). Files that are not
// operating-system files are fsynced one by one.
func (OSFS) SyncFiles(files []File) error {
	synced := make(map[uint64]bool, 1)
	for _, f := range files {
		sc, ok := f.(syscall.Conn)
		if !ok {
			if err := f.Sync(); err != nil {
				return err
			}
			continue
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return err
		}
		var opErr error
		if err := rc.Control(func(fd uintptr) {
			var st unix.Stat_t
			if opErr = unix.Fstat(int(fd), &st); opErr != nil {
				return
			}
			if synced[st.Dev] {
				return
			}
			if opErr = unix.Syncfs(int(fd)); opErr == nil {
				synced[st.Dev] = true
			}
		}); err != nil {
			return err
		}
		if opErr != nil {
			return fmt.Errorf("syncfs: %w", opErr)
		}
	}
	return nil
}
