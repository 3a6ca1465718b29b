//go:build !linux

package log

// Without syncfs(2) logs fsync one file at a time (no sync groups).
const batchSyncSupported = false

// SyncFiles fsyncs each file.
func (OSFS) SyncFiles(files []File) error {
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}
