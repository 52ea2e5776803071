package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func brokerCommand() *cli.Command {
	return &cli.Command{
		Name:  "broker",
		Usage: "show what brokers hold; move every replica off one; remove one for good",
		Subcommands: []*cli.Command{
			{
				Name:      "describe",
				Usage:     "show each broker's replicas, leaderships and bytes on disk",
				ArgsUsage: "[ID]",
				UsageText: doc("mqctl broker describe [ID]", `Shows what each broker holds, or broker ID only: BROKER RACK STATE
REPLICAS LEADERS PREFERRED BYTES. REPLICAS counts the partitions it holds
a replica of, LEADERS those it leads, PREFERRED those whose preferred
leader (first replica) it is, BYTES what its replicas hold on disk
(DescribeLogDirs, asked of each broker within 5s; "?" and why when it
does not answer). STATE is "alive", "fenced" or "shutting down", as in
cluster describe, which shows the brokers' addresses, versions and log
directories. An unknown ID is a failure (exit 1).

JSON: an array of {"id": int, "host": string, "port": int, "rack":
string|null, "state": string, "replicas": int, "leaders": int,
"preferred_leaders": int, "bytes": int, "bytes_error": string}, sorted by
id; bytes is -1 when unknown.`),
				Flags: commandFlags(),
				Action: action(func(c *cli.Context) (job, error) {
					id := int32(-1)
					switch c.NArg() {
					case 0:
					case 1:
						n, err := parseBrokerID("broker describe", c.Args().First())
						if err != nil {
							return nil, err
						}
						id = n
					default:
						return nil, client.Usagef("broker describe: unexpected argument %q", c.Args().Get(1))
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DescribeBrokerLoads(ctx, id)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "decommission",
				Usage:     "move every replica off a broker, so that it can be stopped",
				ArgsUsage: "ID",
				UsageText: doc("mqctl broker decommission ID [--dry-run] [--throttle RATE] [--no-wait]", `Moves every replica broker ID holds to the other live brokers (neither
fenced nor shutting down, and answering mqctl), keeping
each partition's replication factor: each replica goes to a broker that
does not hold the partition, in a rack that holds the fewest of its
replicas (when every broker has a rack), holding the fewest replicas.
Nothing else moves. Refuses, with exit 2, when the live brokers left
cannot hold some partition's replicas (3 replicas and 2 brokers left), or
while partitions are moving.

Prints the partitions that move, TOPIC PARTITION REPLICAS TARGET, and on
stderr how many replicas move and how many bytes they copy. Then, unless
--dry-run, it executes the plan as partition reassign --execute does
(--throttle RATE as there), shows the moves' progress on stderr until
they end, elects the preferred leaders of the partitions moved, checks
that broker ID holds no replica and says that it can be stopped. --no-wait returns once the moves are submitted. JSON: as
cluster rebalance's.`),
				Flags: append(commandFlags(), moveFlags()...),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() != 1 {
						return nil, client.Usagef("broker decommission: want one broker ID, got %d arguments", c.NArg())
					}
					id, err := parseBrokerID("broker decommission", c.Args().First())
					if err != nil {
						return nil, err
					}
					run, err := prepareMove(c, "broker decommission")
					if err != nil {
						return nil, err
					}
					dry, wait := c.Bool("dry-run"), !c.Bool("no-wait")
					stderr := c.App.ErrWriter
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						p, err := a.ProposeDecommission(ctx, id)
						if err != nil {
							return nil, err
						}
						if err := run(ctx, a, p); err != nil || dry || !wait {
							return nil, err
						}
						if err := a.CheckDecommissioned(ctx, id); err != nil {
							return nil, err
						}
						fmt.Fprintf(stderr, "%s: broker %d holds no replica: it can be stopped\n", c.App.Name, id)
						return nil, nil
					}, nil
				}),
			},
			{
				Name:      "unregister",
				Usage:     "remove a stopped broker that holds no replica from the cluster for good",
				ArgsUsage: "ID",
				UsageText: doc("mqctl broker unregister ID", `Removes broker ID from the cluster for good (Kafka's UnregisterBroker):
its registration, the binding of its node ID to its certificate (so that
another node may take the ID or the certificate), and, for a node that
joined the controller quorum as a non-voter, its place there. Needs ALTER
on the CLUSTER. Refused (exit 1, saying why) for a voter of the
controller quorum (--voters), for a broker still running or holding a
replica (mqctl broker decommission ID, then stop it), and for an ID the
cluster does not know. Stop the node for good first: a node that starts
again registers and joins again. Prints BROKER RESULT; JSON: {"broker":
int, "result": "unregistered"}.`),
				Flags: commandFlags(),
				Action: action(func(c *cli.Context) (job, error) {
					if c.NArg() != 1 {
						return nil, client.Usagef("broker unregister: want one broker ID, got %d arguments", c.NArg())
					}
					id, err := parseBrokerID("broker unregister", c.Args().First())
					if err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.UnregisterBroker(ctx, id)
						if err != nil {
							return nil, err
						}
						return r, nil
					}, nil
				}),
			},
		},
	}
}

// parseBrokerID reads a broker id argument.
func parseBrokerID(what, s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, client.Usagef("%s: want a broker id (a number >= 0), got %q", what, s)
	}
	return int32(n), nil
}
