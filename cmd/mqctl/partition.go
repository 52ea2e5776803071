package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func partitionCommand() *cli.Command {
	return &cli.Command{
		Name:  "partition",
		Usage: "act on partitions: elect their leaders, move their replicas",
		Subcommands: []*cli.Command{
			reassignCommand(),
			reassignmentsCommand(),
			{
				Name:      "elect-leaders",
				Usage:     "move partitions' leadership back to their preferred replica, or elect a live one (unclean)",
				ArgsUsage: " ",
				UsageText: doc("mqctl partition elect-leaders [--preferred|--unclean] (-t TOPIC[:PARTITION]... | --all)", `Asks the controller to elect the leader of each partition named with -t
(TOPIC alone: all its partitions; repeatable) or, with --all, of every
partition of the cluster.

--preferred (the default) elects the preferred replica, the first of the
partition's replicas, where it is alive and in sync: after a broker came
back, this moves the leaderships it had back to it.
--unclean elects a live replica of a partition that has no live in-sync
replica (its leader is -1): the partition is writable again, but records
acknowledged by the lost replicas and not copied to the new leader are
gone. Use it only when those replicas will not come back.

Prints TOPIC PARTITION RESULT DETAIL, RESULT "elected", "unchanged" (the
replica to elect leads already) or "failed". JSON: an array of
{"topic": string, "partition": int, "result": string, "error": string}
sorted by topic and partition (partition -1 for an unknown topic named
alone). Exits 1 when some partition failed.`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "the partitions of `TOPIC`, or one of them as TOPIC:PARTITION (repeatable)"},
					&cli.BoolFlag{Name: "all", Usage: "every partition of the cluster"},
					&cli.BoolFlag{Name: "preferred", Usage: "elect the preferred replica (the default)"},
					&cli.BoolFlag{Name: "unclean", Usage: "elect a live replica where no in-sync replica is alive (may lose acknowledged records)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					if c.Bool("preferred") && c.Bool("unclean") {
						return nil, client.Usagef("partition elect-leaders: --preferred and --unclean exclude each other")
					}
					specs, err := admin.ParsePartitionSpecs("partition elect-leaders: --topic", c.StringSlice("topic"))
					if err != nil {
						return nil, err
					}
					req := admin.ElectLeaders{Unclean: c.Bool("unclean"), All: c.Bool("all"), Partitions: specs}
					if err := req.Check(); err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.ElectLeaders(ctx, req)
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
