package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
)

// askOnTerminal is how a command that is about to do what cannot be
// undone asks a person first: the question on stderr, the answer ("y" or
// "yes", any case) read from stdin. It is nil when stdin is not a
// terminal: a script is not asked, it says --execute or is refused.
func askOnTerminal(c *cli.Context) func(ctx context.Context, question string) (bool, error) {
	in, ok := c.App.Reader.(*os.File)
	if !ok || !client.IsTerminal(in) {
		return nil
	}
	errw := c.App.ErrWriter
	return func(ctx context.Context, question string) (bool, error) {
		fmt.Fprintf(errw, "%s: %s [y/N] ", c.App.Name, question)
		answer := make(chan string, 1)
		// A read of a terminal cannot be interrupted; on a signal the
		// command ends and this goroutine with it.
		go func() {
			line, _ := bufio.NewReader(in).ReadString('\n')
			answer <- line
		}()
		select {
		case <-ctx.Done():
			fmt.Fprintln(errw)
			return false, ctx.Err()
		case line := <-answer:
			a := strings.ToLower(strings.TrimSpace(line))
			return a == "y" || a == "yes", nil
		}
	}
}

// optionalCount is the value of a flag given bare, for a default count
// (--sample-keys), or with one (--sample-keys=500). Like a boolean flag
// it takes no separate argument: "--sample-keys 500" would be a flag and
// an argument. A value that is no count is kept and refused by
// optionalCountOf, in a usage error of the command's own words.
type optionalCount struct {
	n    int // 0: not given
	bare int // the count of the bare flag
	bad  string
}

func (o *optionalCount) Set(s string) error {
	o.bad = ""
	switch s {
	case "true":
		o.n = o.bare
		return nil
	case "false":
		o.n = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		o.bad = s
		return nil
	}
	o.n = n
	return nil
}

func (o *optionalCount) String() string {
	if o == nil || o.n == 0 {
		return ""
	}
	return strconv.Itoa(o.n)
}

// IsBoolFlag lets the flag package take the flag without a value.
func (o *optionalCount) IsBoolFlag() bool { return true }

// optionalCountFlag is a flag whose value is an optionalCount: it takes
// no separate argument (client.Intersperse, the synopses and the man page
// ask TakesValue), and --help shows it as --NAME[=COUNT].
type optionalCountFlag struct{ *cli.GenericFlag }

func newOptionalCountFlag(name string, bare int, usage string) optionalCountFlag {
	return optionalCountFlag{&cli.GenericFlag{Name: name, Value: &optionalCount{bare: bare}, Usage: usage}}
}

func (optionalCountFlag) TakesValue() bool { return false }

func (f optionalCountFlag) String() string {
	return fmt.Sprintf("--%s[=COUNT]\t%s", f.Name, f.Usage)
}

// optionalCountOf is the count given with the optionalCountFlag name, or
// 0 when the flag is not given; a value that is no count is a usage error
// of command what.
func optionalCountOf(c *cli.Context, what, name string) (int, error) {
	o, ok := c.Generic(name).(*optionalCount)
	if !ok {
		return 0, nil
	}
	if o.bad != "" {
		return 0, client.Usagef("%s: --%s=%s: want a count above 0", what, name, o.bad)
	}
	return o.n, nil
}
