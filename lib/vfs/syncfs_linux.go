package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// SyncFileSystem makes everything written to the file system holding
// path durable, with one syncfs(2). Elsewhere than on Linux OS has no such
// method, so it is no FileSystemSyncer and SyncFileSystem(OS, path)
// returns errors.ErrUnsupported.
func (osFS) SyncFileSystem(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		err = unix.Syncfs(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
