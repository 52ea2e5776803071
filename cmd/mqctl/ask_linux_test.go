package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/mqtest"
)

// TestAskReadsTheAnswerFromATerminal: on a terminal the question goes to
// stderr and "y" or "yes" is a yes, anything else a no.
func TestAskReadsTheAnswerFromATerminal(t *testing.T) {
	for _, c := range []struct {
		typed string
		yes   bool
	}{
		{"y\n", true},
		{"YES\n", true},
		{" yes \n", true},
		{"n\n", false},
		{"\n", false},
		{"yeah\n", false},
	} {
		ptmx, tty := mqtest.Terminal(t)
		var errw bytes.Buffer
		app := &cli.App{Name: "mqctl", Reader: tty, ErrWriter: &errw}
		ask := askOnTerminal(cli.NewContext(app, nil, nil))
		if ask == nil {
			t.Fatal("a terminal on stdin is not asked")
		}
		if _, err := ptmx.WriteString(c.typed); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		yes, err := ask(ctx, "add 2 partitions to t?")
		cancel()
		if err != nil || yes != c.yes {
			t.Errorf("typed %q: yes %v, err %v; want %v", c.typed, yes, err, c.yes)
		}
		if want := "mqctl: add 2 partitions to t? [y/N] "; errw.String() != want {
			t.Errorf("typed %q: stderr %q, want %q", c.typed, errw.String(), want)
		}
	}
}

// TestAskEndsWithTheCommand: a person who does not answer does not keep
// an interrupted command waiting.
func TestAskEndsWithTheCommand(t *testing.T) {
	_, tty := mqtest.Terminal(t)
	app := &cli.App{Name: "mqctl", Reader: tty, ErrWriter: &bytes.Buffer{}}
	ask := askOnTerminal(cli.NewContext(app, nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if yes, err := ask(ctx, "go?"); yes || err == nil {
		t.Fatalf("yes %v, err %v after the command ended", yes, err)
	}
}
