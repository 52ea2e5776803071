package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "list, describe, reset the offsets of and delete consumer groups",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list consumer groups",
				ArgsUsage: " ",
				UsageText: doc("mqctl group list [--state STATE]...", `Lists the consumer groups of the cluster, sorted by name; with --state
only those in one of the given states: Empty, Stable, PreparingRebalance,
CompletingRebalance or Dead (any case; repeatable or comma-separated).

Prints GROUP STATE PROTOCOL-TYPE. JSON: an array of {"group": string,
 "state": string, "protocol_type": string}.`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "state", Aliases: []string{"s"}, Usage: "only groups in `STATE` (repeatable)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					states, err := admin.ParseGroupStates("group list: --state", c.StringSlice("state"))
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.ListGroups(ctx, states)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "describe",
				Usage:     "show groups' members, committed offsets and lag",
				ArgsUsage: "[GROUP...]",
				UsageText: doc("mqctl group describe [-g GROUP]... [GROUP...]", `Describes each GROUP (given with -g or as arguments; default: every
group): a header line with its name, state, partition assignor
(protocol) and number of members, then one row per partition that a
member consumes or that the group has committed an offset for: the
owning member ("-" when none), its client id and host, the committed
offset (the next record the group will read), the log end offset
(high-water mark), the lag in records, and the lag in time: now minus
the timestamp of the first record not yet consumed, 0 when there is no
lag. A member without partitions gets a row of its own with "-" for the
topic.

Prints GROUP ... then TOPIC PARTITION MEMBER CLIENT-ID HOST COMMITTED END
LAG LAG-TIME. JSON: an array of {"group": string, "state": string,
 "protocol_type": string, "protocol": string,
 "members": [{"member_id": string, "instance_id": string,
   "client_id": string, "host": string,
   "assignment": [{"topic": string, "partitions": [int]}]}],
 "partitions": [{"topic": string, "partition": int, "member_id": string,
   "client_id": string, "host": string, "committed": int,
   "log_start_offset": int, "log_end_offset": int, "lag": int,
   "lag_time_ms": int, "error": string}]},
members sorted by member_id, partitions by topic and partition;
member_id, client_id and host are "" when no member owns the partition;
committed is -1 when the group has committed no offset; offsets, lag and
lag_time_ms are -1 when unknown (error says why: "leader 3 unreachable:
connection refused" for a partition whose leader does not answer, the
group's other partitions still described); instance_id and error only
when set. An unknown GROUP is a failure (exit 1); the other groups are
still described.`),
				Flags: append(commandFlags(),
					&cli.GenericFlag{Name: "group", Aliases: []string{"g"}, Value: &listValue{}, Usage: "the `GROUP` (repeatable)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					groups := append(listFlag(c, "group"), c.Args().Slice()...)
					if len(groups) > 0 {
						if err := admin.CheckGroupNames("group describe", groups); err != nil {
							return nil, err
						}
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.DescribeGroups(ctx, groups)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "reset-offsets",
				Usage:     "move a group's committed offsets (a dry run unless --execute)",
				ArgsUsage: "[GROUP]",
				UsageText: doc("mqctl group reset-offsets -g GROUP (-t TOPIC[:PARTITIONS]...|--all-topics) (--to-earliest|--to-latest|--to-offset N|--to-time TIME|--shift-by N) [--dry-run|--execute]", `Plans new committed offsets for the partitions given with -t (TOPIC: all
its partitions; TOPIC:0,2 or TOPIC:1-3 or TOPIC:0,2-4: those; repeatable)
or, with --all-topics, for every partition the group has committed an
offset for, and prints the plan. Nothing changes unless --execute is
given; --dry-run (the default) says so explicitly.

The new offset is the log start offset (--to-earliest), the log end
offset (--to-latest), N (--to-offset), the first record at or after TIME
(--to-time; RFC 3339 like 2024-05-01T12:00:00Z, milliseconds since the
epoch, or a time ago: -30m, -1h, -2d, -1h30m, units ms, s, m, h, d and w;
the log end when there is none), or the committed offset moved by
N records (--shift-by, N may be negative; a partition without a committed
offset cannot be shifted). It is always kept within the log start and
end offsets.

Offsets can only be reset while the group has no members: with a live
consumer the command fails (exit 1) and changes nothing. A share group
is refused (exit 2): its progress is not committed offsets, and
committing some would make a consumer group of the same name; mqctl
queue reset moves a share group's start. A partition without a leader,
or whose leader answers a retriable error, is waited for, for up to 30s
(said on stderr); when some partition cannot be planned nothing is
committed.

Prints GROUP TOPIC PARTITION LOG-START LOG-END CURRENT NEW RESULT. JSON:
{"group": string, "executed": bool,
 "partitions": [{"topic": string, "partition": int,
   "log_start_offset": int, "log_end_offset": int, "current": int,
   "new": int, "result": "planned"|"committed"|"failed",
   "error": string}]}
sorted by topic and partition; current is -1 when the group has no
committed offset, new is -1 when it could not be planned (error says
why).`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "the `GROUP`"},
					&cli.GenericFlag{Name: "topic", Aliases: []string{"t"}, Value: &listValue{}, Usage: "reset `TOPIC[:PARTITIONS]` (repeatable), e.g. -t orders or -t orders:0,2-3"},
					&cli.BoolFlag{Name: "all-topics", Usage: "reset every partition the group has committed an offset for"},
					&cli.BoolFlag{Name: "to-earliest", Usage: "to the log start offset"},
					&cli.BoolFlag{Name: "to-latest", Usage: "to the log end offset (skip everything not consumed)"},
					&cli.StringFlag{Name: "to-offset", Usage: "to offset `N`"},
					&cli.StringFlag{Name: "to-time", Usage: "to the first record at or after `TIME` (RFC 3339, epoch milliseconds, or a time ago: -30m, -2d)"},
					&cli.StringFlag{Name: "shift-by", Usage: "move the committed offsets by `N` (negative: back)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "only print the plan, which is also what happens without --execute"},
					&cli.BoolFlag{Name: "execute", Usage: "commit the new offsets"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					return resetJob(c, "group reset-offsets", "commit the new offsets", (*admin.Admin).ResetOffsets)
				}),
			},
			{
				Name:      "delete",
				Aliases:   []string{"rm"},
				Usage:     "delete consumer groups and their committed offsets",
				ArgsUsage: "GROUP...",
				UsageText: doc("mqctl group delete [--if-exists] [-g GROUP]... [GROUP...]", `Deletes each GROUP and its committed offsets. A group that still has
members is refused by the broker (NON_EMPTY_GROUP): stop its consumers
first.

Prints GROUP RESULT ERROR. JSON: an array of {"group": string,
 "result": "deleted"|"missing"|"failed", "error": string}. An unknown
group is a failure unless --if-exists is given (then it is "missing").`),
				Flags: append(commandFlags(),
					&cli.GenericFlag{Name: "group", Aliases: []string{"g"}, Value: &listValue{}, Usage: "the `GROUP` (repeatable)"},
					&cli.BoolFlag{Name: "if-exists", Usage: "succeed when a group does not exist"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					groups := append(listFlag(c, "group"), c.Args().Slice()...)
					if err := admin.CheckGroupNames("group delete", groups); err != nil {
						return nil, err
					}
					ifExists := c.Bool("if-exists")
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.DeleteGroups(ctx, groups, ifExists)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
		},
	}
}

// resetJob reads the flags group reset-offsets and queue reset share into
// a request for reset. Without --execute or --dry-run it runs as a dry run
// and says so on stderr, naming what --execute would do (verb).
func resetJob(c *cli.Context, what, verb string, reset func(*admin.Admin, context.Context, admin.ResetOffsets) (*admin.ResetPlan, error)) (job, error) {
	req := admin.ResetOffsets{Group: c.String("group"), AllTopics: c.Bool("all-topics")}
	switch {
	case c.NArg() > 1:
		return nil, client.Usagef("%s: unexpected argument %q", what, c.Args().Get(1))
	case c.NArg() == 1 && req.Group != "" && req.Group != c.Args().First():
		return nil, client.Usagef("%s: two groups given: %q and %q", what, req.Group, c.Args().First())
	case c.NArg() == 1:
		req.Group = c.Args().First()
	}
	for _, s := range listFlag(c, "topic") {
		t, err := admin.ParseTopicPartitions(what+": --topic", s)
		if err != nil {
			return nil, err
		}
		req.Topics = append(req.Topics, t)
	}
	spec, err := resetSpec(c, what)
	if err != nil {
		return nil, err
	}
	req.Spec = spec
	if c.Bool("execute") && c.Bool("dry-run") {
		return nil, client.Usagef("%s: --execute and --dry-run exclude each other", what)
	}
	req.Execute = c.Bool("execute")
	if err := req.Check(what); err != nil {
		return nil, err
	}
	implicitDryRun := !c.IsSet("execute") && !c.IsSet("dry-run")
	return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
		r, err := reset(g, ctx, req)
		if r == nil {
			return nil, err
		}
		if err == nil && implicitDryRun {
			fmt.Fprintf(c.App.ErrWriter, "%s: dry run, nothing changed: add --execute to %s\n", c.App.Name, verb)
		}
		return r, err
	}, nil
}

// resetSpec reads the one reset mode flag of group reset-offsets and
// queue reset.
func resetSpec(c *cli.Context, what string) (admin.ResetSpec, error) {
	var specs []admin.ResetSpec
	if c.Bool("to-earliest") {
		specs = append(specs, admin.ResetSpec{Mode: admin.ResetToEarliest})
	}
	if c.Bool("to-latest") {
		specs = append(specs, admin.ResetSpec{Mode: admin.ResetToLatest})
	}
	if c.IsSet("to-offset") {
		n, err := strconv.ParseInt(c.String("to-offset"), 10, 64)
		if err != nil || n < 0 {
			return admin.ResetSpec{}, client.Usagef("%s: --to-offset: want an offset >= 0, got %q", what, c.String("to-offset"))
		}
		specs = append(specs, admin.ResetSpec{Mode: admin.ResetToOffset, Offset: n})
	}
	if c.IsSet("to-time") {
		t, err := admin.ParseTime(what+": --to-time", c.String("to-time"))
		if err != nil {
			return admin.ResetSpec{}, err
		}
		specs = append(specs, admin.ResetSpec{Mode: admin.ResetToTime, Time: t})
	}
	if c.IsSet("shift-by") {
		n, err := strconv.ParseInt(c.String("shift-by"), 10, 64)
		if err != nil {
			return admin.ResetSpec{}, client.Usagef("%s: --shift-by: want a number of records (negative: back), got %q", what, c.String("shift-by"))
		}
		specs = append(specs, admin.ResetSpec{Mode: admin.ResetShiftBy, Shift: n})
	}
	switch len(specs) {
	case 0:
		return admin.ResetSpec{}, nil // Check says what is missing
	case 1:
		return specs[0], nil
	}
	return admin.ResetSpec{}, client.Usagef("%s: %s and %s exclude each other", what, specs[0], specs[1])
}

// listValue is a repeatable flag whose values are kept whole: unlike
// cli.StringSliceFlag it does not split them at commas, which
// TOPIC:0,2 and group names need.
type listValue []string

// aliasCopy starts what Serialize returns. urfave/cli hands a flag's
// serialized value to its other names (-t given, --topic set too); they
// share this value, so Set ignores the copy. No argument can hold a NUL.
const aliasCopy = "\x00"

func (l *listValue) Set(s string) error {
	if !strings.HasPrefix(s, aliasCopy) {
		*l = append(*l, s)
	}
	return nil
}

func (l *listValue) String() string    { return "" }
func (l *listValue) Serialize() string { return aliasCopy + strings.Join(*l, aliasCopy) }

// listFlag is the values given to a listValue flag.
func listFlag(c *cli.Context, name string) []string {
	if l, ok := c.Generic(name).(*listValue); ok && l != nil {
		return append([]string(nil), *l...)
	}
	return nil
}
