package mqtest

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Terminal opens a pseudo-terminal for a test of what a program does when
// its output is a terminal: tty is the terminal side, to give the program
// as stdout or stderr; ptmx is the controlling side, which reads what is
// written to tty. Both are closed when the test ends.
func Terminal(t testing.TB) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pseudo-terminal number: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal's terminal side: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ptmx, tty
}
