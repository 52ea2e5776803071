//go:build unix

package loopback

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// reserved holds the lock files of the ports this process reserved, open
// (and so locked) until it exits.
var reserved struct {
	sync.Mutex
	files []*os.File
}

// reserve takes port for this process, and reports false when another
// process (or an earlier pick of this one) has it. Where the lock files
// cannot be made it reserves nothing and reports true: the bind probe
// alone decides, as before.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "mq-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	// flock locks belong to the open file: a second open of the same file,
	// in this process too, does not get it.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved.Lock()
	reserved.files = append(reserved.files, f)
	reserved.Unlock()
	return true
}
