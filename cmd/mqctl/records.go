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
		Usage: "delete records from the start of partitions, or skip damaged ranges",
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
					partitions, err := partitionFlags(c, "records delete")
					if err != nil {
						return nil, err
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
			{
				Name:      "skip-damaged",
				Usage:     "give up damaged ranges of partitions so consumers get past them",
				ArgsUsage: " ",
				UsageText: doc("mqctl records skip-damaged -t TOPIC [-p PARTITION]... [--offset OFFSET]", `mqd never serves a damaged range of a partition's log (bytes that failed
their CRC or were lost from a segment): consumers that reach it get an
error, and mqctl topic describe lists it. When no healthy copy of those
records exists, skip-damaged gives the range up for good: its offsets
become a gap that consumers step over, like the gaps of a compacted
topic, and mqd logs who asked. The records in it are lost.

It skips the damaged range holding --offset, or every damaged range of
the partitions (-p, repeatable; default: all) when --offset is not given.
The alternative that keeps no gap is mqctl records delete --before the
range's end, which also drops every record before it.

Prints TOPIC PARTITION FROM TO REASON per range skipped (FROM and TO
inclusive). JSON: an array of {"topic": string, "partition": int,
"from_offset": int, "to_offset": int (exclusive), "segment": string,
"reason": string, "error": string}.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "the `TOPIC`"},
					&cli.IntSliceFlag{Name: "partition", Aliases: []string{"p"}, Usage: "a `PARTITION` (repeatable; default: all)"},
					&cli.Int64Flag{Name: "offset", Value: -1, Usage: "skip the damaged range holding `OFFSET` (default: every damaged range)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					topic := c.String("topic")
					if topic == "" {
						return nil, client.Usagef("records skip-damaged: missing --topic")
					}
					offset := c.Int64("offset")
					if c.IsSet("offset") && offset < 0 {
						return nil, client.Usagef("records skip-damaged: --offset %d: must not be negative", offset)
					}
					partitions, err := partitionFlags(c, "records skip-damaged")
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.SkipDamaged(ctx, topic, partitions, offset)
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

// partitionFlags returns the -p/--partition values.
func partitionFlags(c *cli.Context, what string) ([]int32, error) {
	var partitions []int32
	for _, p := range c.IntSlice("partition") {
		if p < 0 || p > math.MaxInt32 {
			return nil, client.Usagef("%s: bad partition %d", what, p)
		}
		partitions = append(partitions, int32(p))
	}
	return partitions, nil
}
