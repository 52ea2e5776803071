package main

import (
	"context"
	"math"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
)

func e2eCommand() *cli.Command {
	return &cli.Command{
		Name:      "e2e",
		Usage:     "produce at a fixed rate to a live consumer and time publish-to-consume",
		ArgsUsage: " ",
		UsageText: doc("mqbench e2e [-t TOPIC] [-p PARTITIONS] [--replication-factor REPLICAS] [--topic-config KEY=VALUE]... [--rate R] [-d DURATION] [-s VALUE-SIZE] [--late D] [--wait D]",
			`Sends --rate messages/s for --duration while a consumer reads the topic
from its end, live. Each value carries the run's id, a sequence number and
its send time (sender and receiver are this one process), so every arrival
gives its publish-to-consume latency. Reports p50, p99, p99.9 and max, how
many messages arrived later than --late, and how many acknowledged ones
never arrived within --wait after the last acknowledgment (lost: exit
status 1). One message is sent and received before the clock starts, so
connecting is not timed. The producer lingers 0 by default.`),
		Flags: append(append(append(commandFlags(),
			topicFlag("mqbench-e2e"),
			&cli.Float64Flag{Name: "rate", Aliases: []string{"r"}, Value: 1000, Usage: "`RATE` in messages/s"},
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: 10 * time.Second, Usage: "how long to send"},
			&cli.IntFlag{Name: "value-size", Aliases: []string{"s"}, Value: 100, Usage: "value size in `BYTES` (at least 24)"},
			&cli.DurationFlag{Name: "late", Value: 5 * time.Millisecond, Usage: "latency above which a message counts as late"},
			&cli.DurationFlag{Name: "wait", Value: 5 * time.Second, Usage: "how long to wait for stragglers after the last acknowledgment"},
			&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Usage: "`PARTITIONS` of the topic when it is created (default: the broker's)"},
			replicationFlag(false),
			&cli.StringSliceFlag{Name: "topic-config", Usage: "`KEY=VALUE` config of the topic when it is created (repeatable), e.g. min.insync.replicas=2"},
		), producerFlags(0)...), consumerFlags()...),
		Action: action(func(c *cli.Context) (setupFunc, runFunc, error) {
			ps, err := producerSettings(c)
			if err != nil {
				return nil, nil, err
			}
			cs, err := consumerSettings(c)
			if err != nil {
				return nil, nil, err
			}
			cfg := bench.E2EConfig{Topic: c.String("topic"), Rate: c.Float64("rate"), Duration: c.Duration("duration"),
				ValueSize: c.Int("value-size"), Late: c.Duration("late"), Wait: c.Duration("wait"),
				Producer: ps, Consumer: cs, Progress: progress(c), GCMemoryLimit: e2eGCLimit}
			if cfg.Rate <= 0 || cfg.Duration <= 0 {
				return nil, nil, client.Usagef("--rate and --duration must be positive")
			}
			if cfg.ValueSize < bench.MinE2EValueSize {
				return nil, nil, client.Usagef("--value-size: e2e needs at least %d bytes", bench.MinE2EValueSize)
			}
			parts := c.Int("partitions")
			if parts < 0 || parts > math.MaxInt32 {
				return nil, nil, client.Usagef("--partitions: out of range")
			}
			rf, err := replicationFactor(c)
			if err != nil {
				return nil, nil, err
			}
			configs, err := topicConfigs(c)
			if err != nil {
				return nil, nil, err
			}
			setup := func(ctx context.Context, dial bench.Dialer) error {
				return ensureTopic(ctx, dial, bench.TopicSpec{Name: cfg.Topic, Partitions: int32(parts), ReplicationFactor: rf, Configs: configs})
			}
			return setup, func(ctx context.Context, dial bench.Dialer) (*bench.Result, error) {
				return bench.E2E(ctx, dial, cfg)
			}, nil
		}),
	}
}
