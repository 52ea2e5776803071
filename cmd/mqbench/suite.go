package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
)

func suiteCommand() *cli.Command {
	return &cli.Command{
		Name:      "suite",
		Usage:     "run the standard benchmark suite (make perf) and print one table of medians",
		ArgsUsage: " ",
		UsageText: doc("mqbench suite [--runs N] [-n MESSAGES] [--fan-out N] [--e2e-rate R] [--e2e-duration D] [--broker-pid PID]",
			`Runs each standard run --runs times against an empty broker and prints the
median of each figure with its target:
  produce acks=all to a topic with flush.policy=os, then =always
  consume MESSAGES from the start, alone and with --fan-out consumer groups
  e2e at --e2e-rate for --e2e-duration: p99, p99.9, lost
and with --broker-pid: broker CPU time per million messages produced and
peak resident memory. Each produce run gets its own new one-partition
topic (PREFIX-os-N, PREFIX-always-N, PREFIX-e2e-N); the consume runs read
PREFIX-os-0. Messages have 8-byte keys and --value-size random bytes.
Each run's summary line goes to stderr as it finishes. JSON: {"rows":
[{"name", "target", "unit": string, "median": float, "runs": [float],
"ok": bool}], "settings": {name: string}, "results": [run results]}.
Exit status 1 when a message was lost or not acknowledged (a missed
target is reported in the table, not in the exit status).`),
		Flags: append(append(append(commandFlags(),
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "repeat each run `N` times"},
			&cli.Int64Flag{Name: "messages", Aliases: []string{"n"}, Value: 1_000_000, Usage: "`MESSAGES` per produce and consume run"},
			&cli.IntFlag{Name: "value-size", Aliases: []string{"s"}, Value: 100, Usage: "value size in `BYTES`"},
			&cli.Int64Flag{Name: "keys", Value: 1_000_000, Usage: "8-byte keys drawn from `N` distinct keys"},
			&cli.IntFlag{Name: "fan-out", Value: 4, Usage: "`N` consumer groups in the fan-out run"},
			&cli.Float64Flag{Name: "e2e-rate", Value: 20_000, Usage: "e2e `RATE` in messages/s"},
			&cli.DurationFlag{Name: "e2e-duration", Value: 10 * time.Second, Usage: "e2e duration"},
			&cli.StringFlag{Name: "topic-prefix", Usage: "`PREFIX` of the suite's topics (default: mqbench-suite-UNIXTIME)"},
		), producerFlags(defaultLinger)...), consumerFlags()...),
		Action: func(c *cli.Context) error {
			format, err := client.ParseFormat(client.FlagString(c, "output"))
			if err != nil {
				return err
			}
			ps, err := producerSettings(c)
			if err != nil {
				return err
			}
			cs, err := consumerSettings(c)
			if err != nil {
				return err
			}
			cfg := bench.SuiteConfig{Messages: c.Int64("messages"), ValueSize: c.Int("value-size"), Keys: c.Int64("keys"),
				E2ERate: c.Float64("e2e-rate"), E2EDuration: c.Duration("e2e-duration"), TopicPrefix: c.String("topic-prefix"),
				Producer: ps, Consumer: cs, BrokerPID: c.Int("broker-pid"), Log: c.App.ErrWriter,
				E2EGCMemoryLimit: e2eGCLimit}
			if cfg.Log == nil {
				cfg.Log = os.Stderr
			}
			for _, f := range []struct {
				name string
				into *int
			}{{"runs", &cfg.Runs}, {"fan-out", &cfg.FanOut}} {
				if *f.into, err = positive(c, f.name); err != nil {
					return err
				}
			}
			if cfg.Messages <= 0 || cfg.ValueSize < bench.MinE2EValueSize || cfg.Keys < 0 || cfg.E2ERate <= 0 || cfg.E2EDuration <= 0 {
				return client.Usagef("suite: --messages, --e2e-rate and --e2e-duration must be positive, --value-size at least %d", bench.MinE2EValueSize)
			}
			if cfg.TopicPrefix == "" {
				cfg.TopicPrefix = fmt.Sprintf("mqbench-suite-%d", time.Now().Unix())
			}
			dial, closeAll, err := connect(c)
			if err != nil {
				return err
			}
			defer closeAll()
			rep, err := bench.Suite(c.Context, dial, cfg)
			if rep != nil {
				if werr := bench.WriteSuite(c.App.Writer, format, rep); werr != nil && err == nil {
					err = werr
				}
			}
			return err
		},
	}
}
