package main

import (
	"context"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func recordsCommand() *cli.Command {
	return &cli.Command{
		Name:  "records",
		Usage: "delete records from the start of partitions",
		Subcommands: []*cli.Command{
			{
				Name:      "delete",
				Usage:     "delete the records before an offset",
				ArgsUsage: " ",
				UsageText: doc("mqctl records delete -t TOPIC [-p PARTITION]... --before OFFSET|end", `Deletes the records of the topic's partitions (-p, repeatable; default:
all) that come before --before OFFSET, by moving each partition's log
start offset up to OFFSET. "--before end" deletes every record up to the
high-water mark. An offset beyond the high-water mark is a failure.

Prints TOPIC PARTITION LOG-START (the new log start offset). JSON: an array
of {"topic": string, "partition": int, "log_start_offset": int,
 "error": string}; log_start_offset is -1 for a partition that failed.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "the `TOPIC`"},
					&cli.IntSliceFlag{Name: "partition", Aliases: []string{"p"}, Usage: "a `PARTITION` (repeatable; default: all)"},
					&cli.StringFlag{Name: "before", Usage: "delete records before `OFFSET` (a number, or end)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					topic := c.String("topic")
					if topic == "" {
						return nil, client.Usagef("records delete: missing --topic")
					}
					if !c.IsSet("before") {
						return nil, client.Usagef("records delete: missing --before OFFSET")
					}
					before, err := admin.ParseOffset("records delete: --before", c.String("before"))
					if err != nil {
						return nil, err
					}
					var partitions []int32
					for _, p := range c.IntSlice("partition") {
						if p < 0 || p > math.MaxInt32 {
							return nil, client.Usagef("records delete: bad partition %d", p)
						}
						partitions = append(partitions, int32(p))
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DeleteRecords(ctx, topic, partitions, before)
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
