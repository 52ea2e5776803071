//go:build linux || darwin || freebsd

package vfs

import "golang.org/x/sys/unix"

// VolumeBytes returns the total and the usable (by an unprivileged user)
// size of the file system holding path, -1 when unknown, with statfs(2).
// Elsewhere OS has no such method, so it is no VolumeSizer and
// VolumeBytes(OS, path) returns -1, -1.
func (osFS) VolumeBytes(path string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return -1, -1
	}
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize
}
