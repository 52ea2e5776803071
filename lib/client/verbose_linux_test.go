package client

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/mqtest"

	"github.com/urfave/cli/v2"
)

// TestResolveSaysWhichBrokerWhenAskedOrFallingBack: with no socket where
// the daemon's default one would be, a tool falls back to 127.0.0.1:9092,
// and says so when stderr is a terminal; in a script it stays quiet unless
// given -v, which always names the address and where it came from.
func TestResolveSaysWhichBrokerWhenAskedOrFallingBack(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	t.Setenv("MQ_SOCKET", sock)
	t.Setenv("MQ_BROKER", "")
	ptmx, tty := mqtest.Terminal(t)
	run := func(stderr io.Writer, args ...string) {
		t.Helper()
		notes.said = false
		app := &cli.App{Name: "prog", ErrWriter: stderr, Writer: io.Discard, Commands: []*cli.Command{{
			Name:  "cmd",
			Flags: []cli.Flag{BrokerFlag()},
			Action: func(c *cli.Context) error {
				_, err := Resolve(FlagString(c, "broker"), os.Getenv, os.Getuid())
				return err
			},
		}}}
		if code := Run(app, append([]string{"prog"}, args...)); code != 0 {
			t.Fatalf("prog %v: exit %d", args, code)
		}
	}

	run(tty, "cmd")
	buf := make([]byte, 512)
	n, err := ptmx.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(buf[:n]), "prog: no mqd socket at "+sock+": using tcp://127.0.0.1:9092"; !strings.HasPrefix(got, want) {
		t.Errorf("on a terminal: %q, want %q", got, want)
	}

	var quiet bytes.Buffer
	run(&quiet, "cmd")
	if quiet.Len() != 0 {
		t.Errorf("stderr not a terminal, no -v: %q, want nothing", quiet.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cmd", "-v"}, "prog: broker tcp://127.0.0.1:9092 (no mqd socket at " + sock + ")\n"},
		{[]string{"cmd", "-b", "h:1", "--verbose"}, "prog: broker tcp://h:1 (from -b)\n"},
	} {
		var stderr bytes.Buffer
		run(&stderr, c.args...)
		if stderr.String() != c.want {
			t.Errorf("prog %v: stderr %q, want %q", c.args, stderr.String(), c.want)
		}
	}
}
