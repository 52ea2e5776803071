package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
)

// TestNoQuestionWithoutATerminal: a pipe, a file or /dev/null on stdin
// is nobody to ask.
func TestNoQuestionWithoutATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for name, in := range map[string]io.Reader{"pipe": r, "/dev/null": null, "reader": strings.NewReader("y\n")} {
		app := &cli.App{Name: "mqctl", Reader: in, ErrWriter: &bytes.Buffer{}}
		if askOnTerminal(cli.NewContext(app, nil, nil)) != nil {
			t.Errorf("%s on stdin is asked", name)
		}
	}
}

// TestSampleKeysTakesAnOptionalCount: --sample-keys alone, or with
// =COUNT; never the next word, which stays an argument or a flag. The
// errors are usage errors found before any broker is reached.
func TestSampleKeysTakesAnOptionalCount(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the line on stderr
	}{
		{[]string{"topic", "alter", "t", "--sample-keys"}, "mqctl: topic alter: nothing to change (give --partitions, --config or --delete-config) (see mqctl topic alter --help)"},
		{[]string{"topic", "alter", "--sample-keys", "t", "-c", "a=b"}, "mqctl: topic alter: --sample-keys goes with --partitions (see mqctl topic alter --help)"},
		{[]string{"topic", "alter", "t", "--sample-keys=20", "-c", "a=b"}, "mqctl: topic alter: --sample-keys goes with --partitions (see mqctl topic alter --help)"},
		{[]string{"topic", "alter", "t", "-p", "3", "--sample-keys=0"}, "mqctl: topic alter: --sample-keys=0: want a count above 0 (see mqctl topic alter --help)"},
		{[]string{"topic", "alter", "t", "-p", "3", "--sample-keys=many"}, "mqctl: topic alter: --sample-keys=many: want a count above 0 (see mqctl topic alter --help)"},
		{[]string{"topic", "alter", "t", "-p", "3", "--execute", "--dry-run"}, "mqctl: topic alter: --execute and --dry-run exclude each other (see mqctl topic alter --help)"},
	} {
		app := newApp()
		var out, errw bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errw
		code := client.Run(app, append([]string{"mqctl", "-b", "127.0.0.1:1"}, c.args...))
		if code != client.ExitUsage || strings.TrimSpace(errw.String()) != c.want || out.Len() > 0 {
			t.Errorf("mqctl %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", strings.Join(c.args, " "), code, errw.String(), out.String(), c.want)
		}
	}
}
