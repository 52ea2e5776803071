package server

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// errSendfileUnsupported means the kernel refused sendfile for this pair of
// descriptors; the caller copies the rest through user space.
var errSendfileUnsupported = errors.New("sendfile unsupported")

// maxSendfileChunk stays below Linux's per-call limit (0x7ffff000).
const maxSendfileChunk = 1 << 30

// sendFile sends n bytes of f starting at off to the socket with sendfile(2).
// The offset is passed explicitly, so f's file position is neither used nor
// moved and concurrent senders of one file do not race. When the socket's
// buffer is full the runtime poller waits for it (honouring the write
// deadline). It returns how many bytes were sent, so that on
// errSendfileUnsupported the caller can continue from there.
func sendFile(sc syscall.Conn, f *os.File, off, n int64) (int64, error) {
	out, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	in, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var sent int64
	var sendErr error
	ctlErr := in.Control(func(infd uintptr) {
		writeErr := out.Write(func(outfd uintptr) bool {
			for sent < n {
				// The kernel advances off by the bytes it sent.
				m, err := unix.Sendfile(int(outfd), int(infd), &off, int(min(n-sent, maxSendfileChunk)))
				if m > 0 {
					sent += int64(m)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait until the socket is writable
				case err == unix.EINTR:
				case err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
					sendErr = errSendfileUnsupported
					return true
				case err != nil:
					sendErr = err
					return true
				case m == 0:
					sendErr = errFileShort
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if sendErr == nil {
		sendErr = ctlErr
	}
	return sent, sendErr
}
