package broker

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFileSystem makes everything written to the file system holding dir
// durable, with one syncfs(2), and reports whether it did.
func syncFileSystem(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd())) == nil
}
