// Package client is what every mq tool (mqctl, mqpipe, mqtail, mqbench)
// shares: finding the broker, connecting to it, exit codes and the one-line
// error on stderr, and the table and JSON output helpers.
//
// # Finding the broker
//
// A tool takes its broker from -b/--broker, else $MQ_BROKER, else the default
// Unix socket of the daemon (config.DefaultSocket) when that file exists,
// else tcp://127.0.0.1:9092 (Resolve). An address is unix:///path,
// tcp://host:port or host:port; several are separated by commas (ParseAddrs).
//
// NewClient builds a kgo client on those seeds. Kafka clients connect to the
// host:port a broker advertises, which is useless when all we have is a
// socket path; so when the seeds are Unix sockets the client dials the socket
// for every broker address it learns (a single node advertises one broker).
// Ping checks that the broker answers and turns "cannot connect" into an
// *Error with ExitUnreachable.
//
// # Exit codes
//
// Run runs a urfave/cli app and turns its error into the exit status every
// mq tool shares (README.md, "exit codes") and one line on stderr: ExitOK, ExitFailure (the operation
// failed: the broker said no), ExitUsage (bad flag, argument or value),
// ExitUnreachable (no broker at the address) and ExitInterrupted (SIGINT or
// SIGTERM). Commands return Usagef and Failf errors, or any other error:
// connection errors map to ExitUnreachable and everything else to
// ExitFailure.
//
// # Output
//
// Data goes to stdout, diagnostics to stderr. WriteTable aligns columns for
// people; WriteJSON writes one compact JSON document per call, for scripts.
// The shapes are the tools' documented contract: keep them stable.
package client
