package client

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// BrokerFlag is -b/--broker, the same in every tool. It reads no
// environment variable itself: Resolve falls back to $MQ_BROKER and then to
// the defaults.
func BrokerFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "broker",
		Aliases: []string{"b"},
		Usage: "broker `ADDR`ess: unix:///path.sock, tcp://host:port, ssl://host:port (TLS) or host:port, comma-separated " +
			"(default: $MQ_BROKER, else the mqd socket if it exists, else 127.0.0.1:9092)",
	}
}

// OutputFlag is -o/--output table|json.
func OutputFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "output",
		Aliases: []string{"o"},
		Value:   "table",
		Usage:   "output `FORMAT`: table (aligned columns) or json (stable, for scripts)",
	}
}

// Connect resolves the broker from the -b flag value and the TLS flags
// (ResolveTLS, with this process's environment and uid), makes a client
// (NewClient) and checks
// that the broker answers (Ping). The caller closes the client.
func Connect(ctx context.Context, broker string, files TLSFiles, opts ...kgo.Opt) (*kgo.Client, []Addr, error) {
	addrs, err := ResolveTLS(broker, files)
	if err != nil {
		return nil, nil, err
	}
	cl, err := NewClient(addrs, opts...)
	if err != nil {
		return nil, nil, err
	}
	if err := Ping(ctx, cl, addrs); err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, addrs, nil
}

// CompletionCommand is the "completion bash|zsh|fish" command every tool
// has: it prints the completion script of its app to stdout. prog is the
// program's name, for the examples in the help text.
func CompletionCommand(prog string) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: strings.ReplaceAll(`Prints the completion script for the shell to stdout. For example:
  source <(PROG completion bash)            # in ~/.bashrc
  PROG completion zsh > "${fpath[1]}/_PROG"
  PROG completion fish > ~/.config/fish/completions/PROG.fish`, "PROG", prog),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usagef("completion: want one shell: bash, zsh or fish")
			}
			s, err := Completion(c.App, c.Args().First())
			if err != nil {
				return err
			}
			_, err = c.App.Writer.Write([]byte(s))
			return err
		},
	}
}

// FlagString is the value of a string flag that may be given at any level
// of the command line, e.g. both "mqctl -o json topic list" and "mqctl
// topic list -o json": the innermost command that was given the flag
// wins; when none was, the innermost default.
func FlagString(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if ctx.Command == nil && ctx.App == nil {
			continue
		}
		for _, n := range ctx.LocalFlagNames() {
			if n == name {
				return ctx.String(name)
			}
		}
	}
	return c.String(name)
}
