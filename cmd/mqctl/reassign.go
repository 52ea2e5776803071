package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

// reassignCommand is partition reassign: Kafka's kafka-reassign-partitions
// with its plan format, and a progress view.
func reassignCommand() *cli.Command {
	return &cli.Command{
		Name:      "reassign",
		Usage:     "move partitions' replicas to other brokers: generate a plan, execute, verify, watch or cancel it",
		ArgsUsage: "[FILE]",
		UsageText: doc(`mqctl partition reassign --generate --brokers ID,ID... -t TOPIC...
mqctl partition reassign --execute FILE [--throttle RATE] [--watch]
mqctl partition reassign --verify FILE
mqctl partition reassign --watch
mqctl partition reassign --cancel (FILE | -t TOPIC...)
mqctl partition reassign --list [-t TOPIC...]`, `Moves replicas of partitions between brokers while they serve (KIP-455):
the brokers a partition gains copy it in the background, join its in-sync
replicas, and then the controller drops the replicas it loses. Plans are
Kafka's reassignment JSON, which kafka-reassign-partitions reads and
writes too: {"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}, the first replica
of each partition its preferred leader. FILE "-" is stdin.

--generate prints on stdout a plan that spreads the replicas of the -t
topics evenly over the --brokers (replication factors kept): each broker
ends within one replica of the others, a replica stays where it is unless
its broker holds more than its share (the smallest partitions move first),
no partition gets two replicas in one rack while another rack has room
(when every broker has a rack), and the preferred leaders are spread
evenly too. Only the partitions that change are in it. Their current
assignment goes to stderr, with how many replicas and bytes would move.

--execute submits a plan. A plan naming a topic, partition or broker the
cluster does not have, a partition twice, a broker twice in a partition
or a partition without replicas is refused before anything changes (exit
2). The current assignment of the plan's partitions is printed on stderr
first: --execute it to go back. --throttle RATE (bytes per second: 10MB,
512KiB, 1048576) limits the copies, as Kafka's tool does: it sets the
broker configs leader.replication.throttled.rate and
follower.replication.throttled.rate on every broker the plan involves
(one that is fenced or does not answer gets them through another broker,
named on stderr, and applies them when it is back), and lists the moving replicas in the topics' configs
leader.replication.throttled.replicas (the replicas each partition has
now) and follower.replication.throttled.replicas (those it gains).
--execute again with the same plan and another --throttle changes the
rate of the running moves. Prints TOPIC PARTITION REPLICAS TARGET RESULT
DETAIL, RESULT "started", "moving" (already moving to the plan's
replicas), "unchanged" (already there) or "failed".

--verify says for each partition of the plan whether its move is
"complete", "in progress" or "failed" (not moving and not on the plan's
replicas: cancelled or refused). Once every move is complete it removes
the throttle configs no move needs any more, also from brokers that are
down. Exits 1 while a move runs or
when one failed, 0 once all are complete.

--watch (alone, or after --execute) shows each running move until all
have ended: on stderr, redrawn in place when stderr is a terminal, and
otherwise as a line for each partition whose progress changed by a
percent, and one when its move ends. Progress is the bytes the gained
replicas hold against the leader's (DescribeLogDirs), with what is left
and the time that should take at the rate seen; a move whose new broker
is fenced or does not answer says it waits for that broker. Then it
removes the throttles, as --verify does. Exits 0 once every move is
complete.

--cancel stops the running moves of the plan's partitions, or of every
partition of the -t topics: each partition goes back to the replicas it
had. RESULT "cancelled" or "not moving".

--list (or mqctl partition reassignments) lists the running moves, of the
-t topics or all: TOPIC PARTITION REPLICAS ADDING REMOVING.

JSON (-o json) of --execute, --verify and --cancel: an array of
{"topic": string, "partition": int, "replicas": [int], "target": [int],
"adding": [int], "removing": [int], "result": string, "error": string};
replicas are the partition's when asked (during a move the target and
the replicas leaving), target where it goes. Of --list: an array of
{"topic": string, "partition": int, "replicas": [int], "adding": [int],
"removing": [int]}.`),
		Flags: append(commandFlags(),
			&cli.BoolFlag{Name: "generate", Usage: "print a plan spreading the -t topics over --brokers"},
			&cli.StringFlag{Name: "brokers", Usage: "with --generate, the brokers `ID,ID...` to place replicas on"},
			&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "`TOPIC` to plan for, cancel or list (repeatable)"},
			&cli.StringFlag{Name: "execute", Usage: "submit the plan in `FILE` (- for stdin)"},
			&cli.StringFlag{Name: "throttle", Usage: "with --execute, limit the copies to `RATE` bytes per second (10MB, 512KiB)"},
			&cli.StringFlag{Name: "verify", Usage: "report on the moves of the plan in `FILE`; remove the throttles once complete"},
			&cli.BoolFlag{Name: "watch", Usage: "show the running moves' progress on stderr until they end"},
			&cli.BoolFlag{Name: "cancel", Usage: "cancel the running moves of the plan FILE or of the -t topics"},
			&cli.BoolFlag{Name: "list", Usage: "list the running moves"},
		),
		Action: action(prepareReassign),
	}
}

// reassignmentsCommand is partition reassignments: reassign --list.
func reassignmentsCommand() *cli.Command {
	return &cli.Command{
		Name:      "reassignments",
		Usage:     "list the running moves of partitions (partition reassign --list)",
		ArgsUsage: " ",
		UsageText: doc("mqctl partition reassignments [-t TOPIC...]", `Lists the running moves (ListPartitionReassignments), of the -t topics or
all: TOPIC PARTITION REPLICAS ADDING REMOVING. JSON: an array of {"topic":
string, "partition": int, "replicas": [int], "adding": [int], "removing":
[int]}, sorted by topic and partition.`),
		Flags: append(commandFlags(),
			&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "list the moves of `TOPIC` only (repeatable)"},
		),
		Action: action(func(c *cli.Context) (job, error) {
			if err := noArgs(c); err != nil {
				return nil, err
			}
			return listJob(c.StringSlice("topic")), nil
		}),
	}
}

func listJob(topics []string) job {
	return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
		r, err := a.ListReassignments(ctx, topics)
		if r == nil {
			return nil, err
		}
		return r, err
	}
}

// prepareReassign checks partition reassign's flags and returns the job
// of the one mode they ask for.
func prepareReassign(c *cli.Context) (job, error) {
	const what = "partition reassign"
	var modes []string
	for _, m := range []string{"generate", "execute", "verify", "cancel", "list"} {
		if c.IsSet(m) {
			modes = append(modes, "--"+m)
		}
	}
	watch := c.Bool("watch")
	switch {
	case len(modes) > 1:
		return nil, client.Usagef("%s: %s and %s exclude each other", what, modes[0], modes[1])
	case len(modes) == 0 && !watch:
		return nil, client.Usagef("%s: give one of --generate, --execute, --verify, --cancel, --list or --watch", what)
	case watch && len(modes) == 1 && modes[0] != "--execute":
		return nil, client.Usagef("%s: --watch goes alone or with --execute, not with %s", what, modes[0])
	case c.IsSet("throttle") && !c.IsSet("execute"):
		return nil, client.Usagef("%s: --throttle goes with --execute", what)
	case c.IsSet("brokers") && !c.IsSet("generate"):
		return nil, client.Usagef("%s: --brokers goes with --generate", what)
	}
	topics := c.StringSlice("topic")
	if len(topics) > 0 && !c.Bool("generate") && !c.Bool("cancel") && !c.Bool("list") {
		return nil, client.Usagef("%s: --topic goes with --generate, --cancel or --list", what)
	}
	args := c.Args().Slice()
	if len(args) > 0 && !c.Bool("cancel") {
		return nil, client.Usagef("%s: unexpected argument %q", what, args[0])
	}
	format, err := client.ParseFormat(client.FlagString(c, "output"))
	if err != nil {
		return nil, err
	}
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	watchOpts := admin.Watch{Out: stderr, Terminal: isTerminal(stderr)}
	switch {
	case c.Bool("generate"):
		brokers, err := admin.ParseBrokerIDs(what+": --brokers", c.String("brokers"))
		if err != nil {
			return nil, err
		}
		if err := admin.CheckTopicNames(what+": --generate", topics); err != nil {
			return nil, err
		}
		return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
			p, err := a.GenerateReassignment(ctx, topics, brokers)
			if err != nil {
				return nil, err
			}
			return nil, writeProposal(stdout, stderr, p)
		}, nil
	case c.IsSet("execute"):
		plan, err := readPlan(c.String("execute"), c.App.Reader)
		if err != nil {
			return nil, err
		}
		var rate int64
		if c.IsSet("throttle") {
			if rate, err = admin.ParseRate(what+": --throttle", c.String("throttle")); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
			r, err := a.ExecuteReassignment(ctx, admin.Execute{Plan: plan, Throttle: rate, Notices: stderr})
			if r == nil {
				return nil, err
			}
			if err != nil || !watch {
				return r, err
			}
			// The results come before the watch, which may take long.
			if err := admin.Write(stdout, format, r); err != nil {
				return nil, err
			}
			watchOpts.Partitions = plan.Partitions
			return nil, a.WatchReassignment(ctx, watchOpts)
		}, nil
	case c.IsSet("verify"):
		plan, err := readPlan(c.String("verify"), c.App.Reader)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
			r, err := a.VerifyReassignment(ctx, plan, stderr)
			if r == nil {
				return nil, err
			}
			return r, err
		}, nil
	case c.Bool("cancel"):
		var plan *admin.Plan
		switch {
		case len(args) > 1:
			return nil, client.Usagef("%s: --cancel takes one plan FILE, got %d arguments", what, len(args))
		case len(args) == 1 && len(topics) > 0:
			return nil, client.Usagef("%s: --cancel takes a plan FILE or --topic, not both", what)
		case len(args) == 1:
			p, err := readPlan(args[0], c.App.Reader)
			if err != nil {
				return nil, err
			}
			plan = &p
		case len(topics) == 0:
			return nil, client.Usagef("%s: --cancel needs a plan FILE or --topic TOPIC", what)
		}
		return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
			r, err := a.CancelReassignment(ctx, plan, topics, stderr)
			if r == nil {
				return nil, err
			}
			return r, err
		}, nil
	case c.Bool("list"):
		return listJob(topics), nil
	}
	return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
		return nil, a.WatchReassignment(ctx, watchOpts)
	}, nil
}

// readPlan reads a plan from the file name, or from stdin for "-".
func readPlan(name string, stdin io.Reader) (admin.Plan, error) {
	if name == "-" {
		if stdin == nil {
			stdin = os.Stdin
		}
		return admin.ParsePlan(stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return admin.Plan{}, client.Usagef("the plan: %v", err)
	}
	defer f.Close()
	p, err := admin.ParsePlan(f)
	if err != nil {
		return admin.Plan{}, client.Usagef("%s: %v", name, err)
	}
	return p, nil
}

// writeProposal writes a proposal's plan on stdout, and the current
// assignment of its partitions and its summary on stderr.
func writeProposal(stdout, stderr io.Writer, p admin.Proposal) error {
	if len(p.Plan.Partitions) > 0 {
		fmt.Fprintln(stderr, "mqctl: the current assignment of the partitions that move (to roll back, --execute it):")
		if _, err := p.Current.WriteTo(stderr); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "mqctl: %s\n", p.Summary())
	_, err := p.Plan.WriteTo(stdout)
	return err
}

// isTerminal reports whether w is a terminal: an *os.File that
// client.IsTerminal accepts (/dev/null is not one).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && client.IsTerminal(f)
}
