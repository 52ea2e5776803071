package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "show the cluster: brokers, controller, versions",
		Subcommands: []*cli.Command{
			{
				Name:      "describe",
				Usage:     "show the cluster id, the controller, the brokers and their log directories",
				ArgsUsage: " ",
				UsageText: doc("mqctl cluster describe [--apis]", `Shows the cluster id and controller, then one row per broker: BROKER HOST
PORT RACK CONTROLLER VERSION PROTOCOL. VERSION is what the broker runs: mq
and its release for mqd, which says so ("mq v0.4.0"); for another broker
the Apache Kafka release whose protocol its API versions match best
(franz-go's guess), or "unknown". PROTOCOL is the newest Kafka release
whose version of every API the broker answers it reaches ("Kafka 3.8"): a
client written for that release finds those APIs at its versions or newer
(mq answers a subset of Kafka's APIs). Then one row per log directory of
each broker: BROKER LOG-DIR USABLE TOTAL STATE, with the free and total
bytes of the directory's volume, and STATE "ok", or "failing since TIME:
ERROR" while writes to it fail (a full disk, an I/O error; producers get
KAFKA_STORAGE_ERROR until a write succeeds). With --apis, the Kafka APIs
each broker answers and their version ranges.

JSON: {"cluster_id": string, "controller": int, "brokers": [{"id": int,
 "host": string, "port": int, "rack": string|null, "controller": bool,
 "version": string, "software": {"name": string, "version": string}|null,
 "kafka_protocol": string, "apis": [{"key": int, "name": string, "min":
 int, "max": int}], "error": string, "log_dirs": [{"path": string,
 "total_bytes": int, "usable_bytes": int, "failing": bool, "error":
 string, "failing_since_ms": int, "storage_errors": int, "damaged_ranges":
 int}], "log_dirs_error": string}]}; controller is -1 when none is known,
 software null when the broker does not name it, kafka_protocol "" when
 unknown, bytes are -1 when unknown, storage_errors counts the failed
 writes since the broker started, damaged_ranges the damaged ranges of
 partition logs it found (mqctl topic describe lists them).`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "apis", Usage: "list the Kafka APIs and versions each broker answers"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					apis := c.Bool("apis")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DescribeCluster(ctx, apis)
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
