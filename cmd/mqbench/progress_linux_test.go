package main

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal and returns its terminal side.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// TestProgressGoesToATerminalStderrOnly runs the check as main runs it:
// main leaves the app's ErrWriter unset and urfave/cli sets it to
// os.Stderr, here a terminal, then a pipe.
func TestProgressGoesToATerminalStderrOnly(t *testing.T) {
	tty := openTerminal(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stderr := os.Stderr
	defer func() { os.Stderr = stderr }()
	for _, c := range []struct {
		name   string
		stderr *os.File
		want   bool
	}{{"terminal", tty, true}, {"pipe", w, false}} {
		os.Stderr = c.stderr
		app := newApp()
		app.Setup()
		got := progress(cli.NewContext(app, nil, nil)) != nil
		os.Stderr = stderr
		if got != c.want {
			t.Errorf("stderr a %s: progress shown %v, want %v", c.name, got, c.want)
		}
	}
	if progressTo(&bytes.Buffer{}) != nil {
		t.Error("progress written to a buffer, which is no terminal")
	}
}
