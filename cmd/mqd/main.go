// Command mqd is the mq daemon: a Kafka-protocol message broker. This file
// wires flags and signals to lib/config and lib/node.Daemon.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/node"
	"github.com/mqproject/mq/lib/version"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1   // runtime failure: data directory in use, cannot listen, …
	exitUsage       = 2   // bad flag, environment variable or config file
	exitInterrupted = 130 // a second SIGTERM/SIGINT during shutdown
)

// shutdownGrace bounds how long connections may take to drain on shutdown,
// after the controlled shutdown (controlled.shutdown.timeout.ms); after it
// they are cut and the logs are flushed and closed anyway.
const shutdownGrace = 30 * time.Second

func main() { os.Exit(run(os.Args, os.Stderr)) }

// usageError is a bad flag or configuration: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// flagProperty maps mqd's dedicated flags to the property each sets.
var flagProperty = []struct{ flag, property, env string }{
	{"data-dir", "log.dirs", "MQ_DATA_DIR"},
	{"listen", "listeners", "MQ_LISTEN"},
	{"advertise", "advertised.listeners", "MQ_ADVERTISE"},
	{"node-id", "node.id", "MQ_NODE_ID"},
	{"voters", "controller.quorum.voters", "MQ_VOTERS"},
	{"raft-address", "controller.raft.address", "MQ_RAFT_ADDRESS"},
	{"rack", "broker.rack", "MQ_RACK"},
	{"log-level", "log.level", "MQ_LOG_LEVEL"},
	{"log-format", "log.format", "MQ_LOG_FORMAT"},
	{"metrics", "metrics.listen", "MQ_METRICS_LISTEN"},
}

func newApp() *cli.App {
	def := config.Defaults()
	return &cli.App{
		Name:      "mqd",
		Version:   version.String(),
		Usage:     "the mq message broker daemon (Apache Kafka protocol)",
		UsageText: "mqd [--data-dir DIR] [--listen ADDR]... [--config FILE] [-c key=value]...",
		Description: `mqd stores topic partitions on disk and serves them to any Kafka client
over a Unix socket and TCP. With no flags it keeps its data in
$XDG_STATE_HOME/mq (else ~/.local/state/mq) and listens on the Unix socket
$XDG_RUNTIME_DIR/mq/mqd.sock (else /run/mq/mqd.sock for root, else
/tmp/mq-$UID/mqd.sock; $MQ_SOCKET overrides) and on tcp://127.0.0.1:9092.

Settings use Apache Kafka's broker property names (num.partitions,
log.retention.hours, log.segment.bytes, min.insync.replicas, ...). Each is
taken from, in increasing precedence: the built-in default, the --config
file ("key = value" lines, # comments), the environment variable MQ_ plus
the name in upper case with dots as underscores (MQ_NUM_PARTITIONS=3), and
the command line: the flags below, then --set. mqd --help-config lists
every setting and topic config with its default, its valid values and
whether it may change while mqd runs; so do the BROKER SETTINGS and TOPIC
CONFIGS sections of the mqd(8) man page.

With an ssl://HOST:PORT listener mqd serves TLS (1.2 and later) there,
with the PEM files of ssl.certificate.location and ssl.key.location;
-c ssl.client.auth=required -c ssl.ca.location=FILE asks every client
for a certificate of those CAs. On SIGHUP mqd reads the TLS files
again: new connections get the new certificate, open ones keep theirs,
and files that do not load leave the previous certificate in service
(one log line says which).

Every request is authorized against the cluster's ACLs (mqctl acl):
super.users may do anything, and so may root and mqd's own user on the
Unix socket, whose peer uid is the principal User:uid:N. While every
listener is tcp:// or unix://, a resource without ACLs is open to all
(allow.everyone.if.no.acl.found defaults to true); once an ssl://
listener exists it is closed to all but super users.

On SIGTERM or SIGINT mqd stops accepting connections, answers the requests
it has read (for up to 30 seconds), flushes and closes its logs and exits
0; a second signal exits at once with status 130. When the reader of its
stderr goes away (mqd | tee log, then Ctrl-C) mqd keeps running and
shuts down as usual; the log lines it writes meanwhile are lost. Under systemd
(Type=notify) it sends READY=1 to $NOTIFY_SOCKET once it is serving and
STOPPING=1 when it begins to shut down. With WatchdogSec= ($WATCHDOG_USEC,
and $WATCHDOG_PID unset or mqd's pid) it sends WATCHDOG=1 every half of
that interval, each time after it answered a Metadata request it made to
itself on a new connection to its own listener: a wedged mqd falls silent
and systemd restarts it.

Exit status: 0 after a clean shutdown; 1 when mqd fails at runtime (the
data directory is in use by another mqd, a listener cannot be opened, ...);
2 for a bad flag, environment variable or config file; 130 when a second
signal interrupted the shutdown.

Every flag but --set may also be given in the environment: MQ_DATA_DIR,
MQ_LISTEN (comma-separated), MQ_ADVERTISE, MQ_NODE_ID, MQ_VOTERS, MQ_CONFIG,
MQ_LOG_LEVEL, MQ_LOG_FORMAT, MQ_RAFT_ADDRESS, MQ_RACK, MQ_METRICS_LISTEN;
the flag wins over the variable. An MQ_ variable that is none of these and
sets no property is logged as a warning at startup, with the name it is
probably a typo of; an unknown property in the config file or on the
command line is an error with the same hint. Every refused setting is
reported, one line each, before mqd exits 2.

A stock Apache Kafka server.properties can be given to --config: the Kafka
properties that mean nothing to mq (process.roles, num.io.threads,
num.network.threads, controller.listener.names, socket buffer sizes,
transaction and ZooKeeper settings, ...) are accepted from the file and
logged as ignored, with why. Listeners are still written as mq's
(tcp://host:port, not PLAINTEXT://host:port; ssl://host:port, not
SSL://host:port), and TLS takes PEM files (ssl.certificate.location,
ssl.key.location, ssl.ca.location), not ssl.keystore.* stores.

With --metrics tcp://HOST:PORT mqd serves Prometheus metrics at
http://HOST:PORT/metrics: requests, errors and latency per API, traffic
per topic, offsets and sizes per partition, ISR and controller state,
groups and their lag in messages and seconds, fsync latency and
connections (docs/metrics.md in the source lists every series).`,
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // listener and --set values contain commas
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", EnvVars: []string{"MQ_DATA_DIR"}, Usage: "keep partition logs and controller state in `DIR` (log.dirs)",
				DefaultText: "$XDG_STATE_HOME/mq, else ~/.local/state/mq"},
			&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MQ_LISTEN"}, Usage: "listen on `ADDR`: unix:///path, tcp://host:port, ssl://host:port (TLS) or host:port (port 0: any free port); repeatable, or comma-separated (listeners)",
				DefaultText: "unix://$XDG_RUNTIME_DIR/mq/mqd.sock and " + config.DefaultTCPListener},
			&cli.StringFlag{Name: "advertise", EnvVars: []string{"MQ_ADVERTISE"}, Usage: "give clients `HOST:PORT` as this broker's address (advertised.listeners)",
				DefaultText: "the first TCP listener's address"},
			&cli.StringFlag{Name: "node-id", EnvVars: []string{"MQ_NODE_ID"}, Usage: "this node's `ID` in the cluster (node.id)",
				Value: fmt.Sprint(def.NodeID)},
			&cli.StringFlag{Name: "voters", EnvVars: []string{"MQ_VOTERS"}, Usage: "the controller quorum, `ID@HOST:PORT,...` (controller.quorum.voters)",
				DefaultText: "this node alone"},
			&cli.StringFlag{Name: "raft-address", EnvVars: []string{"MQ_RAFT_ADDRESS"}, Usage: "when this node is not one of the voters, join the quorum as a non-voter with Raft at `HOST:PORT` (controller.raft.address)",
				DefaultText: "none: a node that is not a voter needs one"},
			&cli.StringFlag{Name: "rack", EnvVars: []string{"MQ_RACK"}, Usage: "this broker's `RACK` or zone: replicas of a partition go to different racks (broker.rack)",
				DefaultText: "none"},
			&cli.StringFlag{Name: "config", EnvVars: []string{"MQ_CONFIG"}, Usage: "read settings from `FILE`: key = value lines with Kafka property names",
				DefaultText: "none"},
			&cli.StringFlag{Name: "log-level", EnvVars: []string{"MQ_LOG_LEVEL"}, Usage: "log messages at `LEVEL` and above: debug, info, warn or error (log.level)",
				Value: def.LogLevel},
			&cli.StringFlag{Name: "log-format", EnvVars: []string{"MQ_LOG_FORMAT"}, Usage: "write logs to stderr as `FORMAT`: text or json (log.format)",
				Value: def.LogFormat},
			&cli.StringFlag{Name: "metrics", EnvVars: []string{"MQ_METRICS_LISTEN"}, Usage: "serve Prometheus metrics over HTTP at /metrics on `tcp://HOST:PORT` (port 0: any free port); -c metrics.partition.series=false drops the per-partition series; docs/metrics.md lists them (metrics.listen)",
				DefaultText: "off"},
			&cli.StringFlag{Name: "pprof", EnvVars: []string{"MQ_PPROF"}, Usage: "serve Go runtime profiles (net/http/pprof) over HTTP on `HOST:PORT`, for profiling under load",
				DefaultText: "off"},
			&cli.BoolFlag{Name: "help-config", Usage: "list every broker setting and topic config: its default, valid values, whether it may change while mqd runs; then exit"},
			&cli.StringSliceFlag{Name: "set", Aliases: []string{"c"}, Usage: "set the broker property `KEY=VALUE`, e.g. -c num.partitions=3; repeatable; applied after the other flags",
				DefaultText: "none"},
		},
		Action: serve,
		// Errors are printed and turned into exit codes by run, not by cli.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
	}
}

// run runs mqd with args and returns the exit code. Short options are
// split as getopt does (-cnum.partitions=3), like every mq tool's. A usage
// error is one line on stderr with a pointer to --help.
func run(args []string, stderr io.Writer) int {
	app := newApp()
	app.ErrWriter = stderr
	err := app.Run(client.Intersperse(app, args))
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		// Every refused setting is one line, the last with the pointer.
		errs := []error{usage.err}
		var list config.Errors
		if errors.As(usage.err, &list) {
			errs = list
		}
		for i, e := range errs {
			if i == len(errs)-1 {
				fmt.Fprintf(stderr, "mqd: %v (see mqd --help)\n", e)
			} else {
				fmt.Fprintf(stderr, "mqd: %v\n", e)
			}
		}
		return exitUsage
	}
	fmt.Fprintf(stderr, "mqd: %v\n", err)
	return exitFailure
}

// flagSettings turns the command line (and the environment variables of
// the dedicated flags) into property name → value for config.Load.
func flagSettings(c *cli.Context) (map[string]string, error) {
	if c.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q (settings are flags: see mqd --help)", c.Args().First())}
	}
	flags := map[string]string{}
	for _, f := range flagProperty {
		if !c.IsSet(f.flag) {
			continue
		}
		value := c.String(f.flag)
		if f.flag == "listen" {
			value = strings.Join(c.StringSlice(f.flag), ",")
		}
		if err := config.ValidateBrokerConfig(f.property, value); err != nil {
			where := "--" + f.flag
			if env := os.Getenv(f.env); env != "" && env == value {
				where = "$" + f.env
			}
			return nil, usageError{fmt.Errorf("%s: %w", where, err)}
		}
		flags[f.property] = value
	}
	for _, kv := range c.StringSlice("set") {
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, usageError{fmt.Errorf("--set %q: want key=value", kv)}
		}
		if err := config.ValidateBrokerConfig(name, value); err != nil {
			return nil, usageError{fmt.Errorf("--set %s: %w", kv, err)}
		}
		flags[name] = strings.TrimSpace(value)
	}
	return flags, nil
}

// serve loads the settings, starts the daemon and runs it until a signal.
func serve(c *cli.Context) error {
	if c.Bool("help-config") {
		return writeSettingsHelp(c.App.Writer)
	}
	flags, err := flagSettings(c)
	if err != nil {
		return err
	}
	settings, err := config.Load(c.String("config"), os.Getenv, flags)
	if err != nil {
		return usageError{err}
	}
	logger := newLogger(c.App.ErrWriter, settings)
	for _, w := range settings.Ignored {
		logger.Warn(w)
	}
	for _, w := range config.UnknownEnvironment(os.Environ()) {
		logger.Warn(w)
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	// SIGHUP, whose default would end mqd, reloads the TLS files; one
	// that comes during startup is handled once mqd serves.
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	ignoreSIGPIPE()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan os.Signal, 1)
	go func() {
		sig := <-signals
		stopped <- sig
		cancel()
		<-signals
		fmt.Fprintln(c.App.ErrWriter, "mqd: second signal: exiting without finishing the shutdown")
		os.Exit(exitInterrupted)
	}()

	// Profiles are served from before the daemon starts to after it has
	// stopped, so that opening and closing many partitions can be profiled.
	var pprofURL string
	if addr := c.String("pprof"); addr != "" {
		bound, stop, err := servePprof(addr, logger)
		if err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
		defer stop()
		pprofURL = "http://" + bound + "/debug/pprof/"
		logger.Info("pprof serving", "pprof", pprofURL)
	}
	d, err := node.Start(ctx, node.Config{Settings: settings, Logger: logger})
	if err != nil {
		if ctx.Err() != nil {
			logger.Info("stopped during startup")
			return nil
		}
		if cerr := (*node.ConfigError)(nil); errors.As(err, &cerr) {
			return usageError{err}
		}
		return err
	}
	serving := []any{"version", version.String(), "listen", strings.Join(d.Addrs(), ","), "data_dir", settings.DataDir, "node_id", settings.NodeID}
	if addr := d.MetricsAddr(); addr != "" {
		serving = append(serving, "metrics", "http://"+addr+"/metrics")
	}
	if pprofURL != "" {
		serving = append(serving, "pprof", pprofURL)
	}
	logger.Info("mqd serving", serving...)
	if err := notify("READY=1"); err != nil {
		logger.Warn("cannot notify systemd", "err", err)
	}
	stopWatchdog := startWatchdog(d, logger)

	var conflict error
wait:
	for {
		select {
		case sig := <-stopped:
			logger.Info("shutting down", "signal", sig.String())
			break wait
		case conflict = <-d.Fatal():
			logger.Info("shutting down: configuration conflict")
			break wait
		case <-hangups:
			reloadTLS(d, logger)
		}
	}
	stopWatchdog()
	if err := notify("STOPPING=1"); err != nil {
		logger.Warn("cannot notify systemd", "err", err)
	}
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), settings.ControlledShutdownTimeout+shutdownGrace)
	defer cancelShutdown()
	if err := d.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	if conflict != nil {
		return usageError{conflict}
	}
	return nil
}

// reloadTLS reads the TLS files again, on SIGHUP, and says in one line
// what came of it: the certificate now served, or why the files were
// refused and the previous certificate is still served.
func reloadTLS(d *node.Daemon, logger *slog.Logger) {
	switch err := d.ReloadTLS(); {
	case errors.Is(err, node.ErrNoTLS):
		logger.Info("SIGHUP: no TLS certificate to reload (ssl.certificate.location is not set)")
	case err != nil:
		logger.Error("SIGHUP: TLS reload failed; still serving the previous certificate", "err", err)
	default:
		cert := d.TLSCertificate()
		logger.Info("SIGHUP: TLS certificate reloaded", "subject", cert.Subject.String(), "serial", cert.SerialNumber.String(),
			"not_after", cert.NotAfter.UTC().Format(time.RFC3339))
	}
}

// ignoreSIGPIPE keeps mqd alive when the reader of its stderr exits
// (mqd | tee log, then Ctrl-C): Go kills a program that writes to a closed
// pipe on fd 1 or 2 unless it is notified of SIGPIPE. Notified, the write
// fails with EPIPE, the log line is lost, and mqd shuts down cleanly on
// the signal that came with the Ctrl-C instead of dying mid-write and
// leaving every log to be recovered at the next start. The channel is
// never read: a full channel drops the signal, which is all we want.
func ignoreSIGPIPE() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

func newLogger(w io.Writer, s config.Broker) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
