package main

import (
	"context"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
)

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:      "produce",
		Usage:     "produce messages as fast as possible (or at --rate) and time every acknowledgment",
		ArgsUsage: " ",
		UsageText: doc("mqbench produce [-t TOPIC] [-n MESSAGES] [-s VALUE-SIZE] [--keys N] [-p PARTITIONS] [-r REPLICAS] [--acks all|1|0] [-z CODEC] [--linger D] [--batch-bytes N] [--max-buffered N] [--partitioner uniform|adaptive] [--producers N] [--rate R]",
			`Produces MESSAGES messages with random values of VALUE-SIZE bytes (and,
with --keys N, 8-byte keys drawn from N distinct ones) and waits for every
acknowledgment. Reports messages/s, MB/s and the produce latency (from the
produce call to its acknowledgment) p50, p99, p99.9 and max.

The topic is created when it does not exist, with --partitions partitions
(default: the broker's num.partitions), --replication-factor replicas
(default: the broker's default.replication.factor) and the --topic-config
settings. Against a cluster, give -b the bootstrap list (a,b,c).
With --producers N, N clients (each its own connection) share the messages
and the rate. Any message not acknowledged makes the exit status 1.`),
		Flags: append(append(commandFlags(),
			topicFlag("mqbench"),
			&cli.Int64Flag{Name: "messages", Aliases: []string{"n"}, Value: 1_000_000, Usage: "how many `MESSAGES` to produce"},
			&cli.IntFlag{Name: "value-size", Aliases: []string{"s"}, Value: 100, Usage: "value size in `BYTES`"},
			&cli.Int64Flag{Name: "keys", Value: 0, Usage: "draw 8-byte keys from `N` distinct keys (0: no keys)"},
			&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Usage: "`PARTITIONS` of the topic when it is created (default: the broker's)"},
			replicationFlag(true),
			&cli.StringSliceFlag{Name: "topic-config", Usage: "`KEY=VALUE` config of the topic when it is created (repeatable), e.g. flush.policy=always"},
			&cli.IntFlag{Name: "producers", Value: 1, Usage: "`N` producer clients at once"},
			&cli.Float64Flag{Name: "rate", Usage: "target `RATE` in messages/s over all producers (default: as fast as possible)"},
			&cli.Int64Flag{Name: "transaction-size", Usage: "produce in transactions of `N` messages, each producer with a transactional id of its own (0: none; needs --acks all)"},
		), producerFlags(defaultLinger)...),
		Action: action(func(c *cli.Context) (setupFunc, runFunc, error) {
			ps, err := producerSettings(c)
			if err != nil {
				return nil, nil, err
			}
			cfg := bench.ProduceConfig{Topic: c.String("topic"), Messages: c.Int64("messages"), ValueSize: c.Int("value-size"),
				Keys: c.Int64("keys"), Rate: c.Float64("rate"), Producer: ps, Progress: progress(c)}
			if cfg.Messages <= 0 {
				return nil, nil, client.Usagef("--messages: must be positive")
			}
			if cfg.ValueSize < 0 || cfg.Keys < 0 || cfg.Rate < 0 {
				return nil, nil, client.Usagef("--value-size, --keys and --rate must not be negative")
			}
			if cfg.TransactionSize = c.Int64("transaction-size"); cfg.TransactionSize < 0 {
				return nil, nil, client.Usagef("--transaction-size: must not be negative")
			}
			if cfg.TransactionSize > 0 && ps.Acks != -1 {
				return nil, nil, client.Usagef("--transaction-size: transactions need --acks all")
			}
			if cfg.Producers, err = positive(c, "producers"); err != nil {
				return nil, nil, err
			}
			parts := c.Int("partitions")
			if parts < 0 || parts > math.MaxInt32 {
				return nil, nil, client.Usagef("--partitions: out of range")
			}
			configs, err := topicConfigs(c)
			if err != nil {
				return nil, nil, err
			}
			rf, err := replicationFactor(c)
			if err != nil {
				return nil, nil, err
			}
			setup := func(ctx context.Context, dial bench.Dialer) error {
				return ensureTopic(ctx, dial, bench.TopicSpec{Name: cfg.Topic, Partitions: int32(parts), ReplicationFactor: rf, Configs: configs})
			}
			return setup, func(ctx context.Context, dial bench.Dialer) (*bench.Result, error) {
				return bench.Produce(ctx, dial, cfg)
			}, nil
		}),
	}
}

// replicationFlag is --replication-factor of the commands that create
// their topic, and -r where no other flag has it (e2e's -r is --rate).
func replicationFlag(short bool) cli.Flag {
	f := &cli.IntFlag{Name: "replication-factor", Usage: "`REPLICAS` of each partition when the topic is created (default: the broker's)"}
	if short {
		f.Aliases = []string{"r"}
	}
	return f
}

// replicationFactor reads -r (0: the broker's default).
func replicationFactor(c *cli.Context) (int16, error) {
	rf := c.Int("replication-factor")
	if rf < 0 || rf > math.MaxInt16 {
		return 0, client.Usagef("--replication-factor: out of range")
	}
	return int16(rf), nil
}

// ensureTopic creates the topic a run needs when it does not exist.
func ensureTopic(ctx context.Context, dial bench.Dialer, spec bench.TopicSpec) error {
	cl, err := dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = bench.EnsureTopic(ctx, cl, spec)
	return err
}
