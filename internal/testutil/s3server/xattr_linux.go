package s3server

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// XAttrSupported reports whether files under dir take user extended
// attributes, so that the gateway can keep metadata in them
// (Options.XAttrMeta).
func XAttrSupported(dir string) bool {
	f, err := os.CreateTemp(dir, ".xattr-probe-*")
	if err != nil {
		return false
	}
	name := f.Name()
	_ = f.Close()
	defer os.Remove(name)
	return unix.Setxattr(filepath.Clean(name), "user.strata.probe", []byte("1"), 0) == nil
}
