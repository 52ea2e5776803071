package peer

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// hungUp reports whether the kernel has seen the peer of c close or
// reset the connection, without reading from it: a zero-timeout poll for
// POLLRDHUP, POLLHUP or POLLERR. It does not wait for the goroutine
// reading c to be scheduled, and takes no lock a blocked read holds.
func hungUp(c syscall.Conn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var hup bool
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			hup = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return hup
}
