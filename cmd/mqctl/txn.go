package main

import (
	"context"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func txnCommand() *cli.Command {
	return &cli.Command{
		Name:  "txn",
		Usage: "list, describe and abort transactions",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list transactional ids and their transactions' states",
				ArgsUsage: " ",
				UsageText: doc("mqctl txn list [--state STATE]... [--producer-id ID]...", `Lists the transactional ids every transaction coordinator of the cluster
holds, sorted; with --state only those in one of the given states:
Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
CompleteAbort, Dead or PrepareEpochFence (any case; repeatable or
comma-separated), with --producer-id only those of the given producers.

Prints TRANSACTIONAL-ID STATE PRODUCER-ID COORDINATOR. JSON: an array of
{"transactional_id": string, "state": string, "producer_id": int,
 "coordinator": int}.`),
				Flags: append(commandFlags(),
					&cli.StringSliceFlag{Name: "state", Aliases: []string{"s"}, Usage: "only transactions in `STATE` (repeatable)"},
					&cli.Int64SliceFlag{Name: "producer-id", Usage: "only the transactions of producer `ID` (repeatable)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					states, err := admin.ParseTxnStates("txn list: --state", c.StringSlice("state"))
					if err != nil {
						return nil, err
					}
					ids := c.Int64Slice("producer-id")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.ListTransactions(ctx, states, ids)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "describe",
				Usage:     "show transactions: state, producer, timeout, partitions",
				ArgsUsage: "[TRANSACTIONAL-ID...]",
				UsageText: doc("mqctl txn describe [TRANSACTIONAL-ID...]", `Describes each TRANSACTIONAL-ID (default: every one listed), as its
coordinator holds it: the state, the producer id and epoch, the timeout,
how long the open transaction has been running and the partitions in it
(TOPIC:PARTITIONS; __consumer_offsets for a group's offsets).

Prints TRANSACTIONAL-ID STATE PRODUCER-ID EPOCH TIMEOUT-MS RUNNING
PARTITIONS. JSON: an array of {"transactional_id": string,
 "state": string, "producer_id": int, "producer_epoch": int,
 "timeout_ms": int, "start_ms": int, "coordinator": int,
 "partitions": [{"topic": string, "partitions": [int]}], "error": string},
start_ms -1 when no transaction is open, error only when set. An id no
coordinator knows is a failure (exit 1); the others are still described.`),
				Flags: commandFlags(),
				Action: action(func(c *cli.Context) (job, error) {
					ids := c.Args().Slice()
					for _, id := range ids {
						if id == "" {
							return nil, client.Usagef("txn describe: empty transactional id")
						}
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DescribeTransactions(ctx, ids)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "abort",
				Usage:     "abort a hung transaction on one partition",
				ArgsUsage: " ",
				UsageText: doc("mqctl txn abort -t TOPIC -p PARTITION --producer-id ID --producer-epoch EPOCH [--coordinator-epoch N]", `Aborts the open transaction of producer ID (at EPOCH) on one partition,
as Kafka's kafka-transactions.sh abort does: this client sends
WriteTxnMarkers with an abort marker to the partition's leader, which
writes it; consumers reading read_committed go past the transaction's
records, which are dropped. It is for a hung transaction: one its
coordinator no longer knows of (cluster health and txn describe show
what the coordinators know; a transaction they know is aborted by them
at its timeout). --coordinator-epoch is the epoch of the coordinator the
marker claims to come from (default 0).

Prints TOPIC PARTITION PRODUCER-ID EPOCH LEADER RESULT. JSON:
{"topic": string, "partition": int, "producer_id": int,
 "producer_epoch": int, "leader": int}.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "the `TOPIC` of the partition", Required: true},
					&cli.IntFlag{Name: "partition", Aliases: []string{"p"}, Value: -1, Usage: "the `PARTITION`", Required: true},
					&cli.Int64Flag{Name: "producer-id", Value: -1, Usage: "the producer `ID` of the hung transaction", Required: true},
					&cli.IntFlag{Name: "producer-epoch", Value: -1, Usage: "the producer's `EPOCH`", Required: true},
					&cli.IntFlag{Name: "coordinator-epoch", Usage: "the coordinator epoch `N` the marker carries"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					ab := admin.TxnAbort{Topic: c.String("topic"), ProducerID: c.Int64("producer-id")}
					p, e, ce := c.Int("partition"), c.Int("producer-epoch"), c.Int("coordinator-epoch")
					switch {
					case ab.Topic == "":
						return nil, client.Usagef("txn abort: empty --topic")
					case p < 0 || p > math.MaxInt32:
						return nil, client.Usagef("txn abort: --partition: want 0 or more, got %d", p)
					case ab.ProducerID < 0:
						return nil, client.Usagef("txn abort: --producer-id: want 0 or more, got %d", ab.ProducerID)
					case e < 0 || e > math.MaxInt16:
						return nil, client.Usagef("txn abort: --producer-epoch: want 0 to %d, got %d", math.MaxInt16, e)
					case ce < 0 || ce > math.MaxInt32:
						return nil, client.Usagef("txn abort: --coordinator-epoch: want 0 or more, got %d", ce)
					}
					ab.Partition, ab.ProducerEpoch, ab.CoordinatorEpoch = int32(p), int16(e), int32(ce)
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.AbortTransaction(ctx, ab)
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
