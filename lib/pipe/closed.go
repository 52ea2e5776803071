package pipe

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// errOutputClosed is the cause of a consume context cancelled because
// nobody reads the output any more.
var errOutputClosed = errors.New("pipe: output closed")

// watchOutput cancels ctx (with errOutputClosed) as soon as out can no
// longer be read from on the other side, without waiting for the next
// write to fail with EPIPE: `mqpipe consume | head -2` on a quiet topic
// must not wait for a record that may never come.
//
// It polls out's descriptor for error and hang-up, with no events asked
// for, so a writable descriptor does not wake it: the write end of a pipe
// whose readers have all closed reports POLLERR (Linux) or POLLHUP (the
// BSDs, macOS), and a Unix stream socket whose peer closed reports
// POLLHUP. A TCP socket whose peer sent FIN reports neither (the peer may
// still read: a half-close), nor do files, /dev/null and terminals that
// are still there; a terminal that hangs up reports POLLHUP. When out is
// not a file, nothing is watched.
//
// The returned stop ends the watch and waits for its goroutine.
func watchOutput(out io.Writer, cancel context.CancelCauseFunc) (stop func()) {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return func() {}
	}
	outConn, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	// The goroutine waits in poll(2) on out and on the read end of this
	// pipe; stop writes to it to wake the goroutine.
	wakeR, wakeW, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	wakeConn, err := wakeR.SyscallConn()
	if err != nil {
		wakeR.Close()
		wakeW.Close()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer wakeR.Close()
		// Control keeps each descriptor open while the poll uses it.
		outConn.Control(func(outFD uintptr) {
			wakeConn.Control(func(wakeFD uintptr) {
				if outputGone(int(outFD), int(wakeFD)) {
					cancel(errOutputClosed)
				}
			})
		})
	}()
	return func() {
		wakeW.Write([]byte{0})
		wakeW.Close()
		<-done
	}
}

// outputGone waits until outFD reports error or hang-up (true) or wakeFD
// becomes readable (false).
func outputGone(outFD, wakeFD int) bool {
	fds := []unix.PollFd{{Fd: int32(outFD)}, {Fd: int32(wakeFD), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return false
		}
		switch {
		case fds[1].Revents != 0:
			return false
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0:
			return true
		case fds[0].Revents&unix.POLLNVAL != 0:
			// Not an open descriptor (stdout closed with >&-): writes
			// report that themselves.
			return false
		}
	}
}
