package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/mqproject/mq/lib/mqtest"

	"github.com/urfave/cli/v2"
)

// TestProgressGoesToATerminalStderrOnly runs the check as main runs it:
// main leaves the app's ErrWriter unset and urfave/cli sets it to
// os.Stderr, here a terminal, then a pipe.
func TestProgressGoesToATerminalStderrOnly(t *testing.T) {
	_, tty := mqtest.Terminal(t)
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
