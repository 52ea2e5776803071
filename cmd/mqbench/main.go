// Command mqbench measures a Kafka-compatible broker: produce throughput
// and latency, consume throughput (with fan-out), end-to-end latency, and
// the standard suite of `make perf`. This file and one file per command
// wire urfave/cli flags to lib/bench, which holds the logic and the output
// formats.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/bench"
	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/version"
)

func main() {
	e2eGCLimit = tuneGC(os.Getenv, physicalMemory())
	os.Exit(client.Run(newApp(), os.Args))
}

// mqbench's own garbage collector competes for the CPUs with the broker it
// measures, and its collections show up in the latencies it reports: its
// client library allocates a few KiB per request. Unless the user tunes
// the collector (GOGC or GOMEMLIMIT), e2e runs turn it off until the heap
// reaches a memory limit: a quarter of the machine's memory, at most
// 1 GiB, which a 10 s run at 20,000 msgs/s does not reach. Alternating
// runs on one broker: p99 1.34–1.52 ms and p99.9 2.3–4.1 ms with GOGC=400
// (what mqbench used before; 100 gave 3.8–6.0 ms at the time), 1.13–1.33
// and 1.9–2.8 ms with the limit alone. Throughput runs keep Go's default:
// with GOGC=400, or living at the limit, a suite's heap grew and its later
// consume runs slowed down by up to 3x, page-faulting fresh memory.
const maxE2EGCMemLimit = 1 << 30

// e2eGCLimit is the memory limit of e2e runs (0: the collector is left
// as it is).
var e2eGCLimit int64

// tuneGC returns the memory limit for e2e runs: 0 (leave the collector
// alone) when the user chose GOGC or GOMEMLIMIT or the machine's memory
// (bytes) is unknown (0).
func tuneGC(getenv func(string) string, memory uint64) int64 {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return int64(min(memory/4, maxE2EGCMemLimit))
}

func newApp() *cli.App {
	return &cli.App{
		Name:      "mqbench",
		Version:   version.String(),
		Usage:     "measure a Kafka-compatible broker: throughput, latency, fan-out",
		UsageText: "mqbench [-b ADDR] [-o table|json] produce|consume|e2e|suite [FLAGS...]",
		Description: `mqbench is a load generator and latency probe. It is a Kafka client like
any other (franz-go), so it measures mqd or any Kafka-compatible broker.

The broker is taken from -b/--broker, else $MQ_BROKER, else the default mqd
socket ($MQ_SOCKET, else $XDG_RUNTIME_DIR/mq/mqd.sock, else /run/mq/mqd.sock
for root, else /tmp/mq-$UID/mqd.sock) when it exists, else 127.0.0.1:9092.
An address is unix:///path.sock, tcp://host:port or host:port.

Each run prints one summary line on stdout, or with -o json one JSON object
on one line:
  {"test": "produce"|"consume"|"e2e", "topic": string, "messages": int,
   "bytes": int, "seconds": float, "msgs_per_sec": float,
   "mb_per_sec": float, "latency_ms": {"p50", "p99", "p99.9", "max": float}
   (produce and e2e), "failed": int, "late": int, "lost": int,
   "consumers": int (consume), "broker": {"cpu_seconds": float,
   "cpu_seconds_per_million": float, "rss_peak_mib": float} (with
   --broker-pid), "settings": {name: string}}
Fields are added, never renamed or removed. Bytes count keys and values;
MB are 1,000,000 bytes. Progress goes to stderr, only when it is a
terminal.

With --broker-pid PID (a broker on this machine), each run also reports
the broker's CPU time (utime+stime from /proc/PID/stat, before and after
the run; creating the run's topic is not counted) and its peak resident
memory (VmHWM from /proc/PID/status).

Unless GOGC or GOMEMLIMIT is set, mqbench's Go garbage collector runs
during e2e runs only when its heap reaches a quarter of the machine's
memory, at most 1 GiB (GOGC=off with a memory limit), so that its own
collections do not land in the latencies it measures; the heap it keeps
live is tens of MiB. --cpuprofile and --memprofile write mqbench's own
pprof profiles of a run.

Exit status: 0 success; 1 the run failed (messages not acknowledged, lost
messages, the broker said no); 2 usage error; 3 cannot reach the broker;
130 interrupted.`,
		Flags:           append(client.ConnectionFlags(), client.OutputFlag()),
		HideHelpCommand: true,
		Commands: []*cli.Command{
			produceCommand(),
			consumeCommand(),
			e2eCommand(),
			suiteCommand(),
			client.CompletionCommand("mqbench"),
		},
	}
}

// commandFlags are the global flags again, hidden, so that they may follow
// the command; then the flags every run shares.
func commandFlags() []cli.Flag {
	var shared []cli.Flag
	for _, f := range append(client.ConnectionFlags(), client.OutputFlag()) {
		f.(*cli.StringFlag).Hidden = true
		shared = append(shared, f)
	}
	return append(shared,
		&cli.IntFlag{Name: "broker-pid", Usage: "also report the CPU time and peak memory of the broker process `PID` (same machine)"},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write mqbench's own CPU profile (pprof) of the run to `FILE`"},
		&cli.StringFlag{Name: "memprofile", Usage: "write mqbench's own allocation profile (pprof) of the run to `FILE`"},
	)
}

func topicFlag(def string) cli.Flag {
	return &cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Value: def, Usage: "the `TOPIC`"}
}

// runFunc is the part of a command that needs the broker.
type runFunc func(ctx context.Context, dial bench.Dialer) (*bench.Result, error)

// setupFunc prepares a run (creates its topic) before the broker is
// measured: --broker-pid counts the load, not the creation of 10,000
// partitions.
type setupFunc func(ctx context.Context, dial bench.Dialer) error

// action makes a command's action: check -o, let prepare check the flags
// and return the setup (nil: none) and the run (usage errors come before
// connecting), connect, set up, run under --broker-pid and print the
// result, also when the run failed after measuring.
func action(prepare func(c *cli.Context) (setupFunc, runFunc, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		format, err := client.ParseFormat(client.FlagString(c, "output"))
		if err != nil {
			return err
		}
		if c.NArg() > 0 {
			return client.Usagef("%s: unexpected argument %q", c.Command.Name, c.Args().First())
		}
		setup, run, err := prepare(c)
		if err != nil {
			return err
		}
		dial, closeAll, err := connect(c)
		if err != nil {
			return err
		}
		defer closeAll()
		if setup != nil {
			// A --broker-pid that cannot be read fails before the setup
			// changes anything.
			if pid := c.Int("broker-pid"); pid > 0 {
				if _, err := bench.ReadProc(pid); err != nil {
					return fmt.Errorf("--broker-pid: %w", err)
				}
			}
			if err := setup(c.Context, dial); err != nil {
				return err
			}
		}
		stopProfiles, err := startProfiles(c.String("cpuprofile"), c.String("memprofile"))
		if err != nil {
			return err
		}
		res, err := bench.Watch(c.Int("broker-pid"), func() (*bench.Result, error) { return run(c.Context, dial) })
		if perr := stopProfiles(); perr != nil && err == nil {
			err = perr
		}
		if res != nil {
			if werr := bench.WriteResult(c.App.Writer, format, res); werr != nil && err == nil {
				err = werr
			}
		}
		return err
	}
}

// startProfiles starts mqbench's own CPU profile and, for the allocation
// profile, records every allocation; the returned func writes them. Either
// file may be "".
func startProfiles(cpuFile, memFile string) (func() error, error) {
	var cpu *os.File
	if cpuFile != "" {
		f, err := os.Create(cpuFile)
		if err != nil {
			return nil, client.Usagef("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, client.Failf("--cpuprofile: %v", err)
		}
		cpu = f
	}
	if memFile != "" {
		runtime.MemProfileRate = 4096
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if memFile != "" {
			f, err := os.Create(memFile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				err = errors.Join(err, f.Close())
			}
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return client.Failf("writing a profile: %v", err)
		}
		return nil
	}, nil
}

// connect checks that the broker answers and returns a Dialer for it.
func connect(c *cli.Context) (bench.Dialer, func(), error) {
	cl, addrs, err := client.Connect(c.Context, client.FlagString(c, "broker"), client.TLSFilesOf(c))
	if err != nil {
		return nil, nil, err
	}
	cl.Close()
	dial := func(opts ...kgo.Opt) (*kgo.Client, error) { return client.NewClient(addrs, opts...) }
	return dial, func() {}, nil
}

// progress is where runs report progress: the app's stderr when it is a
// terminal, else nowhere (nil).
func progress(c *cli.Context) io.Writer { return progressTo(c.App.ErrWriter) }

// progressTo returns stderr when it is a terminal (a character device),
// else nil. urfave/cli always sets ErrWriter (to os.Stderr by default), so
// it is the file to look at, not whether it was set.
func progressTo(stderr io.Writer) io.Writer {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return f
	}
	return nil
}

// doc is a command's UsageText: its synopsis, then what it does.
func doc(synopsis, text string) string { return synopsis + "\n\n" + text }

// topicConfigs reads --topic-config KEY=VALUE flags.
func topicConfigs(c *cli.Context) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range c.StringSlice("topic-config") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, client.Usagef("--topic-config: want KEY=VALUE, not %q", kv)
		}
		m[k] = v
	}
	return m, nil
}
