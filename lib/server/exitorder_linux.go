package server

import (
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// lateBase is the lowest number of a duplicate: half the soft limit on
// open descriptors; 0 (none) when the limit is too low to spare the
// upper half, or the kernel is older than 6, whose release order is the
// other way round.
var lateBase = sync.OnceValue(func() int {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0
	}
	major, _, _ := strings.Cut(unix.ByteSliceToString(u.Release[:]), ".")
	if v, err := strconv.Atoi(major); err != nil || v < 6 {
		return 0
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 2048 {
		return 0
	}
	return int(min(lim.Cur, 1<<20) / 2)
})

// holdLate duplicates sc's socket to the lowest free descriptor at or
// above lateBase; noLate when it cannot.
func holdLate(sc syscall.Conn) lateRef {
	base := lateBase()
	if base == 0 {
		return noLate
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return noLate
	}
	late := noLate
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
