// Command mqctl administers an mq cluster: topics, configs, records and
// the cluster itself. This file and one file per noun (topic.go,
// cluster.go, config.go, records.go, partition.go, reassign.go, broker.go,
// acl.go) wire urfave/cli flags to lib/admin,
// which holds the logic and the output formats.
package main

import (
	"context"
	"os"
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/version"
)

func main() { os.Exit(client.Run(newApp(), os.Args)) }

func newApp() *cli.App {
	return &cli.App{
		Name:      "mqctl",
		Version:   version.String(),
		Usage:     "administer an mq cluster: topics, configs, records, brokers, ACLs",
		UsageText: "mqctl [-b ADDR] [-o table|json] COMMAND [ARGS...]",
		Description: `mqctl talks to mqd (or any Kafka broker) with the Kafka admin APIs.

The broker is taken from -b/--broker, else $MQ_BROKER, else the default mqd
socket ($MQ_SOCKET, else $XDG_RUNTIME_DIR/mq/mqd.sock, else /run/mq/mqd.sock
for root, else /tmp/mq-$UID/mqd.sock) when it exists, else 127.0.0.1:9092.
An address is unix:///path.sock, tcp://host:port or host:port; several are
separated by commas.

The global flags -b and -o may also be given after the command
(mqctl topic list -o json).

Commands that print state print an aligned table, or with -o json one JSON
document on one line, whose shape is stable (fields are added, never
renamed or removed). The shapes are listed with each command.

A broker that answers a retriable error (LEADER_NOT_AVAILABLE while a
restarted mqd opens its partitions, NOT_LEADER_OR_FOLLOWER during a leader
move, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR for a group) is
asked again for up to 30s, as any Kafka client does, and mqctl says once
on stderr what it waits for ("mqctl: waiting up to 30s: ..."); what is
still retriable then is reported as the broker answered it. A broker
that does not answer is not asked again: the describes show its part as
unreachable. A partition with no leader at all is waited for only by the
commands that need its offsets (group reset-offsets, queue reset, queue
dlq replay); the describes show it as it is, at once.

Data goes to stdout, diagnostics to stderr. Exit status: 0 success; 1 the
operation failed (the broker said no: unknown topic, topic exists, invalid
config...); 2 usage error (bad flag, argument or -o value); 3 cannot reach
the broker; 130 interrupted (SIGINT or SIGTERM). A failure is explained on
stderr in one line.`,
		Flags:                  globalFlags(),
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		Commands: []*cli.Command{
			topicCommand(),
			groupCommand(),
			queueCommand(),
			txnCommand(),
			configCommand(),
			recordsCommand(),
			partitionCommand(),
			brokerCommand(),
			clusterCommand(),
			userCommand(),
			aclCommand(),
			client.CompletionCommand("mqctl"),
		},
	}
}

// globalFlags are -b/--broker, the TLS and SASL flags and -o/--output. They are defined on the app
// and again on every command that talks to the broker, so that they may
// come before or after the command; client.FlagString reads the innermost.
func globalFlags() []cli.Flag {
	return append(client.ConnectionFlags(), client.OutputFlag())
}

// job is the part of a command that needs the broker.
type job func(ctx context.Context, a *admin.Admin) (admin.Result, error)

// action makes a command's action: check -o, let prepare check the
// arguments and return the job (usage errors come before connecting),
// connect, run the job and print its result. A result that comes with an
// error is printed only when part of it succeeded (admin.Partial: some
// topics failed, others did not); a command that failed wholly prints
// only its error, on stderr.
func action(prepare func(c *cli.Context) (job, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		format, err := client.ParseFormat(client.FlagString(c, "output"))
		if err != nil {
			return err
		}
		run, err := prepare(c)
		if err != nil {
			return err
		}
		cl, _, err := client.Connect(c.Context, client.FlagString(c, "broker"), client.TLSFilesOf(c))
		if err != nil {
			return err
		}
		defer cl.Close()
		res, err := run(c.Context, admin.New(cl).Retrying(client.RetryTimeout, c.App.ErrWriter))
		if present(res) && (err == nil || admin.Partial(res)) {
			if werr := admin.Write(c.App.Writer, format, res); werr != nil && err == nil {
				err = werr
			}
		}
		return err
	}
}

// present reports whether a command returned a result to print: not a
// nil interface, slice or pointer.
func present(r admin.Result) bool {
	if r == nil {
		return false
	}
	v := reflect.ValueOf(r)
	switch v.Kind() {
	case reflect.Slice, reflect.Pointer, reflect.Map:
		return !v.IsNil()
	}
	return true
}

// noArgs refuses arguments to a command that takes none.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		name := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
		return client.Usagef("%s: unexpected argument %q", name, c.Args().First())
	}
	return nil
}

// doc is a command's UsageText: its synopsis, then what it does and the
// shape of its JSON output. urfave/cli prints it under USAGE in --help and
// puts it, whole, in the man page, so both say everything.
func doc(synopsis, text string) string {
	return synopsis + "\n\n" + text
}

// commandFlags are the global flags again, for commands: hidden, so that
// help and the man page list them once, under GLOBAL OPTIONS.
func commandFlags() []cli.Flag {
	return hidden(globalFlags())
}

// hidden hides flags from help and the man page.
func hidden(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		if s, ok := f.(*cli.StringFlag); ok {
			s.Hidden = true
		}
	}
	return flags
}
