package main

import (
	"context"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
)

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "list and describe share groups (queues), replay their dead letters",
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
				Name:  "dlq",
				Usage: "the dead letters of share groups",
				Subcommands: []*cli.Command{
					{
						Name:      "replay",
						Usage:     "put dead letters back on their topic for another try",
						ArgsUsage: " ",
						UsageText: doc("mqctl queue dlq replay --group GROUP [--to TOPIC] [--since TIME]", `Reads the dead-letter topic of share group GROUP (its
errors.deadletterqueue.topic.name) up to its current end and produces
each dead letter again: on the topic and partition it came from, or on
TOPIC with --to (partitioned by key), with its key, value, headers and
timestamp, without the mq.dlq.* headers. With --since only the dead
letters whose record time is at or after TIME (RFC 3339, epoch
milliseconds, or a time ago: -30m, -2d). The dead-letter topic keeps its
records.

Prints GROUP DEAD-LETTER-TOPIC REPLAYED SKIPPED. JSON: {"group": string,
 "from": string, "replayed": int, "skipped": int}.`),
						Flags: append(commandFlags(),
							&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "the share `GROUP`"},
							&cli.StringFlag{Name: "to", Usage: "replay to `TOPIC` instead of each record's source topic"},
							&cli.StringFlag{Name: "since", Usage: "only dead letters from `TIME` on (RFC 3339, epoch milliseconds, or -30m, -2d)"},
						),
						Action: action(func(c *cli.Context) (job, error) {
							if err := noArgs(c); err != nil {
								return nil, err
							}
							group := c.String("group")
							if err := admin.CheckGroupNames("queue dlq replay: --group", []string{group}); err != nil {
								return nil, err
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
								r, err := g.ReplayDeadLetters(ctx, group, to, since)
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
