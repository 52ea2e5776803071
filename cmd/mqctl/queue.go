package main

import (
	"context"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "create, configure, list, describe and reset share groups (queues), replay their dead letters",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list share groups",
				ArgsUsage: " ",
				UsageText: doc("mqctl queue list", `Lists the share groups (KIP-932 queues, docs/queues.md) of the cluster,
sorted by name.

Prints GROUP STATE MEMBERS. JSON: an array of {"group": string,
 "state": string, "members": int}.`),
				Flags: commandFlags(),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.ListQueues(ctx)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "describe",
				Usage:     "show share groups' members, in-flight records and dead letters",
				ArgsUsage: "[GROUP...]",
				UsageText: doc("mqctl queue describe [-g GROUP]... [GROUP...]", `Describes each share GROUP (given with -g or as arguments; default:
every share group): a header line with its state, member count and
dead-letter topic with the records it holds, its members with their
assigned partitions, then one row per share-partition: the start offset
(every record before it is done with), the log end offset, the in-flight
window, the available records (in the window or never delivered), those
acquired by a member now, those archived, and the age of the oldest
record not acknowledged.

JSON: an array of {"group": string, "state": string,
 "members": [{"member_id": string, "client_id": string, "host": string,
   "epoch": int, "assignment": [{"topic": string, "partitions": [int]}]}],
 "partitions": [{"topic": string, "partition": int, "start_offset": int,
   "log_end_offset": int, "in_flight": int, "available": int,
   "acquired": int, "acknowledged": int, "archived": int,
   "oldest_unacked_ms": int, "error": string}],
 "dead_letter_topic": string, "dead_letters": int, "error": string}.`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "group", Aliases: []string{"g"}, Usage: "describe `GROUP` (repeatable)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					groups := append(c.StringSlice("group"), c.Args().Slice()...)
					if err := admin.CheckGroupNames("queue describe", groups); err != nil {
						return nil, err
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.DescribeQueues(ctx, groups)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "create",
				Usage:     "prepare a share group before its first member: where it starts, its configs",
				ArgsUsage: "GROUP [KEY=VALUE...]",
				UsageText: doc("mqctl queue create GROUP [--start earliest|latest] [KEY=VALUE...]", `A share group comes into being when its first member joins; where it
then starts reading each partition is its share.auto.offset.reset. queue
create gives a new GROUP (no member and no state yet) without a
share.auto.offset.reset of its own the one of --start: earliest (the
default: the members get every record already queued) or latest (only
those produced after they join). It also sets each KEY=VALUE, as queue
config does. A group already used keeps where it is.

Prints GROUP STATE START (STATE: new or existing). JSON: {"group": string,
 "new": bool, "start": string, "set": {name: value}}.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "start", Value: "earliest", Usage: "where a new group starts: `earliest` or latest"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() == 0 {
						return nil, client.Usagef("queue create: missing GROUP")
					}
					group := c.Args().First()
					if err := admin.CheckGroupNames("queue create", []string{group}); err != nil {
						return nil, err
					}
					start := c.String("start")
					if start != "earliest" && start != "latest" {
						return nil, client.Usagef("queue create: --start %q: want earliest or latest", start)
					}
					set, err := admin.ParseConfigs("queue create", c.Args().Tail())
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.CreateQueue(ctx, group, start, set)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "config",
				Usage:     "show or change a share group's configs (start, lock duration, delivery limit, dead-letter topic)",
				ArgsUsage: "GROUP [NAME...|KEY=VALUE...]",
				UsageText: doc("mqctl queue config GROUP [NAME...] [--docs]\nmqctl queue config GROUP KEY=VALUE... [-d KEY]...", `Shows or changes the configs of share GROUP (Kafka's group config
resource; the group need not exist yet):

    share.auto.offset.reset            where the group starts a partition it has no state for: earliest or latest
    share.record.lock.duration.ms      how long a member holds the records it acquired
    share.delivery.count.limit         deliveries before a record is archived (and dead-lettered)
    share.session.timeout.ms           a silent member leaves after this long
    share.heartbeat.interval.ms        how often members heartbeat
    errors.deadletterqueue.topic.name  the dead-letter topic (mq); empty: none

With no KEY=VALUE and no --delete it shows every config, or the NAMEs
given, with its value and its source: GROUP_CONFIG (the group's own) or
DEFAULT_CONFIG (the broker's group.share.* setting). Prints NAME VALUE
SOURCE, and with --docs DOC. JSON: {"resource": "group", "name": string,
 "configs": [{"name": string, "value": string, "source": string,
 "sensitive": false, "doc": string}]}.

With KEY=VALUE it sets each KEY and resets each --delete KEY to its
default, leaving the others (incremental). Prints NAME ACTION VALUE.
JSON: {"resource": "group", "name": string, "set": {name: value},
 "deleted": [name]}. An unknown config or a bad value is a failure
(exit 1).`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "delete", Aliases: []string{"d"}, Usage: "reset config `KEY` to its default (repeatable)"},
					&cli.BoolFlag{Name: "docs", Usage: "add a DOC column: what each config means"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() == 0 {
						return nil, client.Usagef("queue config: missing GROUP")
					}
					group, rest := c.Args().First(), c.Args().Tail()
					if err := admin.CheckGroupNames("queue config", []string{group}); err != nil {
						return nil, err
					}
					var names, kvs []string
					for _, a := range rest {
						if strings.Contains(a, "=") {
							kvs = append(kvs, a)
						} else {
							names = append(names, a)
						}
					}
					deleted := c.StringSlice("delete")
					if len(kvs)+len(deleted) == 0 {
						docs := c.Bool("docs")
						return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
							r, err := g.QueueConfigs(ctx, group, names, docs)
							if r == nil {
								return nil, err
							}
							return r, err
						}, nil
					}
					if len(names) > 0 {
						return nil, client.Usagef("queue config: want KEY=VALUE, got %q (names show configs; they do not mix with changes)", names[0])
					}
					set, err := admin.ParseConfigs("queue config", kvs)
					if err != nil {
						return nil, err
					}
					if err := admin.CheckConfigChange("queue config", set, deleted); err != nil {
						return nil, err
					}
					return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
						r, err := g.SetQueueConfigs(ctx, group, set, deleted)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "reset",
				Usage:     "move a share group's start offsets (a dry run unless --execute)",
				ArgsUsage: "[GROUP]",
				UsageText: doc("mqctl queue reset -g GROUP (-t TOPIC[:PARTITIONS]...|--all-topics) (--to-earliest|--to-latest|--to-offset N|--to-time TIME) [--dry-run|--execute]", `Plans a new start offset for each share-partition of share GROUP given
with -t (TOPIC: all its partitions; TOPIC:0,2 or TOPIC:1-3: those;
repeatable) or, with --all-topics, for every partition the group has
state for, and prints the plan. Nothing changes unless --execute is
given. With --execute each share-partition starts again at its new
offset: the records before it are done with, those from it on are
available again (delivery counts start over), nothing is in flight.

The new offset is the log start offset (--to-earliest), the log end
offset (--to-latest: skip the backlog), N (--to-offset) or the first
record at or after TIME (--to-time; RFC 3339, epoch milliseconds or a
time ago: -30m, -2d), kept within the log start and end offsets.

A share group's start can only be reset while it has no members: with a
member the command fails (exit 1) and changes nothing. A partition
without a leader is waited for, for up to 30s (said on stderr), as by
group reset-offsets.

Prints GROUP TOPIC PARTITION LOG-START LOG-END CURRENT NEW RESULT, CURRENT
being the share-partition's start offset (- without state). JSON: as
group reset-offsets.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "the share `GROUP`"},
					&cli.GenericFlag{Name: "topic", Aliases: []string{"t"}, Value: &listValue{}, Usage: "reset `TOPIC[:PARTITIONS]` (repeatable), e.g. -t jobs or -t jobs:0,2-3"},
					&cli.BoolFlag{Name: "all-topics", Usage: "reset every partition the group has state for"},
					&cli.BoolFlag{Name: "to-earliest", Usage: "to the log start offset (deliver everything again)"},
					&cli.BoolFlag{Name: "to-latest", Usage: "to the log end offset (skip the backlog)"},
					&cli.StringFlag{Name: "to-offset", Usage: "to offset `N`"},
					&cli.StringFlag{Name: "to-time", Usage: "to the first record at or after `TIME` (RFC 3339, epoch milliseconds, or a time ago: -30m, -2d)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "only print the plan, which is also what happens without --execute"},
					&cli.BoolFlag{Name: "execute", Usage: "set the new start offsets"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					return resetJob(c, "queue reset", "set the new start offsets", (*admin.Admin).ResetQueue)
				}),
			},
			{
				Name:  "dlq",
				Usage: "the dead letters of share groups",
				Subcommands: []*cli.Command{
					{
						Name:      "replay",
						Usage:     "put dead letters back on their topic for another try",
						ArgsUsage: " ",
						UsageText: doc("mqctl queue dlq replay (--group GROUP | --from TOPIC) [--to TOPIC] [--since TIME]", `Reads a dead-letter topic up to its current end and produces each dead
letter again: on the topic and partition it came from, or on TOPIC with
--to (partitioned by key), with its key, value, headers and timestamp,
without the mq.dlq.* headers. The dead-letter topic is the one of share
group GROUP (its errors.deadletterqueue.topic.name, which mqpipe exec
--dlq sets for a group without one), or TOPIC with --from (the --dlq of
mqpipe exec --ordered, say). Dead letters of the broker and of mqpipe
exec carry the same headers (mq.dlq.source.topic,
mq.dlq.source.partition, ...); those of older mqpipe releases
(mq.dlq.topic, mq.dlq.partition) are read too. With --since only the
dead letters whose record time is at or after TIME (RFC 3339, epoch
milliseconds, or a time ago: -30m, -2d). The dead-letter topic keeps its
records.

Prints GROUP DEAD-LETTER-TOPIC REPLAYED SKIPPED. JSON: {"group": string,
 "from": string, "replayed": int, "skipped": int}.`),
						Flags: append(commandFlags(),
							&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "replay the dead letters of share `GROUP`"},
							&cli.StringFlag{Name: "from", Usage: "replay the dead-letter topic `TOPIC`"},
							&cli.StringFlag{Name: "to", Usage: "replay to `TOPIC` instead of each record's source topic"},
							&cli.StringFlag{Name: "since", Usage: "only dead letters from `TIME` on (RFC 3339, epoch milliseconds, or -30m, -2d)"},
						),
						Action: action(func(c *cli.Context) (job, error) {
							if err := noArgs(c); err != nil {
								return nil, err
							}
							group, from := c.String("group"), c.String("from")
							switch {
							case group != "" && from != "":
								return nil, client.Usagef("queue dlq replay: --group and --from exclude each other")
							case from == "":
								if err := admin.CheckGroupNames("queue dlq replay: --group", []string{group}); err != nil {
									return nil, err
								}
							}
							var since time.Time
							if c.IsSet("since") {
								t, err := admin.ParseTime("queue dlq replay: --since", c.String("since"))
								if err != nil {
									return nil, err
								}
								since = t
							}
							to := c.String("to")
							return func(ctx context.Context, g *admin.Admin) (admin.Result, error) {
								r, err := g.ReplayDeadLetters(ctx, group, from, to, since)
								if r == nil {
									return nil, err
								}
								return r, err
							}, nil
						}),
					},
				},
			},
		},
	}
}
