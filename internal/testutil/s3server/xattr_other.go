//go:build !linux

package s3server

// XAttrSupported reports false where probing is not implemented: the
// gateway keeps metadata in a sidecar directory.
func XAttrSupported(dir string) bool { return false }
