package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
)

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "consume",
		Usage:     "read a topic from the start, with one or several consumers at once",
		ArgsUsage: " ",
		UsageText: doc("mqbench consume [-t TOPIC] [-n MESSAGES] [--groups N] [--fetch-max-bytes N] [--fetch-max-partition-bytes N]",
			`Reads MESSAGES messages (default: all the topic holds when the run starts)
from the start of every partition and reports messages/s and MB/s.

One consumer reads the partitions directly. With --groups N (N > 1), N
consumers read the whole topic at once (fan-out) and the rate is their
total: each joins a consumer group of its own, new for the run, and reads
from the start; the clock starts once all have their partitions. With --direct they read the partitions without joining groups
(the same fetch load, for brokers without consumer groups).`),
		Flags: append(append(commandFlags(),
			topicFlag("mqbench"),
			&cli.Int64Flag{Name: "messages", Aliases: []string{"n"}, Usage: "`MESSAGES` each consumer reads (default: all there are at the start)"},
			&cli.IntFlag{Name: "groups", Aliases: []string{"g"}, Value: 1, Usage: "`N` consumer groups reading everything at once (fan-out)"},
			&cli.BoolFlag{Name: "direct", Usage: "read partitions directly, without joining consumer groups"},
		), consumerFlags()...),
		Action: action(func(c *cli.Context) (setupFunc, runFunc, error) {
			cs, err := consumerSettings(c)
			if err != nil {
				return nil, nil, err
			}
			cfg := bench.ConsumeConfig{Topic: c.String("topic"), Messages: c.Int64("messages"), Direct: c.Bool("direct"), Consumer: cs, Progress: progress(c)}
			if cfg.Messages < 0 {
				return nil, nil, client.Usagef("--messages: must not be negative")
			}
			if cfg.Consumers, err = positive(c, "groups"); err != nil {
				return nil, nil, err
			}
			cfg.Direct = cfg.Direct || cfg.Consumers == 1
			return nil, func(ctx context.Context, dial bench.Dialer) (*bench.Result, error) {
				return bench.Consume(ctx, dial, cfg)
			}, nil
		}),
	}
}
