//go:build linux || darwin || freebsd

package broker

import "golang.org/x/sys/unix"

// volumeBytes returns the total and the usable (by an unprivileged user)
// size of the file system holding path, -1 when unknown.
func volumeBytes(path string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return -1, -1
	}
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize
}
