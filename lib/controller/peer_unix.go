//go:build unix

package controller

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the peer of an idle connection closed or
// reset it, or sent something unasked, without waiting: a peek at the
// socket. An idle RPC connection has nothing to read, so anything there,
// an end of stream included, means it cannot carry another request.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK)
		return true
	})
	return closed || err != nil
}
