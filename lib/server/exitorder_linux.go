package server

import (
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// lateBase is the lowest number of a late descriptor: half the soft
// limit on open descriptors, or 0 (no late descriptors) when the limit
// is too low to spare the upper half.
var lateBase = sync.OnceValue(func() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 2048 {
		return 0
	}
	return int(min(lim.Cur, 1<<20) / 2)
})

// holdLate duplicates nc's socket to the lowest free descriptor at or
// above lateBase; -1 when it cannot (no room there, not a socket), and
// the connection then ends where its own descriptor is.
func holdLate(nc net.Conn) lateRef {
	base := lateBase()
	sc, ok := nc.(syscall.Conn)
	if base == 0 || !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	late := lateRef(-1)
	raw.Control(func(fd uintptr) {
		if dup, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, base); err == nil {
			late = lateRef(dup)
		}
	})
	return late
}

func closeLate(fd lateRef) {
	if fd >= 0 {
		unix.Close(int(fd))
	}
}
