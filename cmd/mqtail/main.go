// Command mqtail is a live terminal view of an mq cluster: throughput,
// consumer lag, leaders and in-sync replicas, refreshed every second; with
// --once, one snapshot on stdout for scripts. This file wires urfave/cli
// flags to lib/tail, which holds the model, the collection and the
// output.
package main

import (
	"context"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/tail"
	"github.com/mqproject/mq/lib/version"
)

func main() {
	os.Exit(client.Run(newApp(), os.Args))
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "mqtail",
		Version: version.String(),
		Usage:   "watch an mq cluster live: throughput, consumer lag, leaders, in-sync replicas",
		UsageText: "mqtail [-b ADDR] [--interval DURATION] [--window DURATION] [--metrics [ID=]URL]...\n" +
			"mqtail [-b ADDR] --once [-o table|json] [--interval DURATION] [--metrics [ID=]URL]...",
		Description:     description,
		HideHelpCommand: true,
		Flags: append(client.ConnectionFlags(),
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: time.Second,
				Usage: "refresh every `DURATION` (with --once: the time between the two samples the rates come from)"},
			&cli.DurationFlag{Name: "window", Value: 5 * time.Minute,
				Usage: "keep `DURATION` of lag history, for the sparklines and the stalled mark"},
			&cli.StringSliceFlag{Name: "metrics", Aliases: []string{"m"},
				Usage: "read bytes out from a broker's Prometheus endpoint at `[ID=]URL` (repeatable; ID: the broker's node id)"},
			&cli.BoolFlag{Name: "once", Usage: "print one snapshot to stdout and exit, instead of the live view"},
			client.OutputFlag(),
		),
		Action:   run,
		Commands: []*cli.Command{client.CompletionCommand("mqtail")},
	}
}

const description = `mqtail shows an mq cluster (or any Kafka cluster) live in the terminal,
refreshed every --interval. Three views, switched with 1, 2, 3 (or t, g, b,
tab):

- topics: every partition with its leader, replicas, in-sync replicas and
  state (under-replicated and offline in red, and in words), log start,
  high-water mark, messages/s in (the high-water mark's growth) and bytes/s
  in (the leader's log size growth, from DescribeLogDirs).
- groups: every group's state and members, and per partition the committed
  offset, the lag in records and in time, a sparkline of the lag over
  --window, and STALLED when over the whole window the committed offset has
  not moved while the lag stayed above zero.
- brokers: alive or fenced, the controller, partitions led, bytes in, and
  bytes out from the broker's metrics endpoint (mq_topic_bytes_out_total)
  when --metrics names it; ID=URL names the broker, a plain URL counts for a
  single-node cluster.

Enter opens the selected topic or group, esc goes back; / filters by name,
s changes the sort order, the arrow keys or j and k move, q or Ctrl-C quits.
When the broker goes away mqtail says "DISCONNECTED", keeps the last data
on screen and retries every interval. Colour follows the terminal, and
NO_COLOR turns it off: states are written in words either way.

mqtail --once prints one snapshot on stdout and exits: tables, or with -o
json one JSON document (docs/mqtail.md describes every field; fields are
only ever added). It samples twice, --interval apart, so that its rates are
measured.

The broker is taken from -b/--broker, else $MQ_BROKER, else the default mqd
socket ($MQ_SOCKET, else $XDG_RUNTIME_DIR/mq/mqd.sock, else /run/mq/mqd.sock
for root, else /tmp/mq-$UID/mqd.sock) when it exists, else 127.0.0.1:9092.
An address is unix:///path.sock, tcp://host:port or host:port; several are
separated by commas.

Exit status: 0 success; 1 the cluster could not be described; 2 usage
error; 3 cannot reach the broker (at the start, or for --once); 130
interrupted. The reason is given on stderr in one line.`

// refreshTimeout bounds one refresh: a broker that went away must not
// hang the view, which says "disconnected" and tries again.
const refreshTimeout = 10 * time.Second

func run(c *cli.Context) error {
	if c.Args().Present() {
		return client.Usagef("unexpected argument %q", c.Args().First())
	}
	interval, window := c.Duration("interval"), c.Duration("window")
	if interval <= 0 {
		return client.Usagef("--interval %s: want a duration above zero", interval)
	}
	if window < interval {
		return client.Usagef("--window %s: want at least --interval (%s)", window, interval)
	}
	format, err := client.ParseFormat(c.String("output"))
	if err != nil {
		return err
	}
	if c.IsSet("output") && !c.Bool("once") {
		return client.Usagef("-o/--output needs --once")
	}
	var sources []tail.MetricsSource
	for _, v := range c.StringSlice("metrics") {
		src, err := tail.ParseMetricsSource(v)
		if err != nil {
			return client.Usagef("%v", err)
		}
		sources = append(sources, src)
	}
	ctx := c.Context
	cl, addrs, err := client.Connect(ctx, c.String("broker"), client.TLSFilesOf(c), tail.ClientOptions()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	collector := tail.NewCollector(cl, sources)
	defer collector.Close()
	tracker := tail.NewTracker(window)
	sample := func() (tail.Snapshot, error) {
		ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
		defer cancel()
		// A broker that went away is told at once (a refused
		// connection), not after kgo's retries run out the timeout.
		if err := client.Ping(ctx, cl, addrs); err != nil {
			return tail.Snapshot{}, err
		}
		s, err := collector.Collect(ctx)
		if err != nil {
			return tail.Snapshot{}, err
		}
		return tracker.Observe(s), nil
	}
	if c.Bool("once") {
		snap, err := tail.Once(ctx, sample, interval)
		if err != nil {
			return err
		}
		if format == client.FormatJSON {
			return client.WriteJSON(c.App.Writer, snap)
		}
		return tail.WriteTable(c.App.Writer, snap)
	}
	m := tail.NewModel(tail.Options{Interval: interval, Fetch: sample})
	// The program restores the terminal however it ends: q, Ctrl-C,
	// SIGTERM or SIGINT (client.Run cancels the context), or a panic in
	// the model. Signals are client.Run's alone: bubbletea's own handler
	// blocks sending its quit message once the context has ended the
	// loop, and the program never exits.
	_, err = tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithoutSignalHandler()).Run()
	return err
}
