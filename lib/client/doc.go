// Package client is what every mq tool (mqctl, mqpipe, mqtail, mqbench)
// shares: finding the broker, connecting to it, exit codes and the one-line
// error on stderr, and the table and JSON output helpers.
//
// # Finding the broker
//
// A tool takes its broker from -b/--broker, else $MQ_BROKER, else the default
// Unix socket of the daemon (config.DefaultSocket) when that file exists,
// else tcp://127.0.0.1:9092 (Resolve). An address is unix:///path,
// tcp://host:port, ssl://host:port (TCP with TLS) or host:port; several are
// separated by commas (ParseAddrs).
// Every command with -b has -v (VerboseFlag), with which Resolve says on
// stderr which address it picked and why; without it, only a fallback to
// 127.0.0.1:9092 is said, and only when stderr is a terminal, as a local
// mqd that is restarting would otherwise let a tool reach another broker
// on the same host unawares. --version therefore has no -v.
//
// Every tool also takes --tls-ca, --tls-cert and --tls-key (TLSFlags):
// given any of them, or an ssl:// address, the addresses carry a TLS
// configuration (Addr.TLS; TLSFiles.Apply, ResolveTLS) and NewClient dials
// every broker with it (kgo.DialTLSConfig). The files are read when the
// addresses are resolved, before any connection: a missing file, bad PEM,
// a key without its certificate (or the reverse) or TLS to a Unix socket
// is a usage error.
//
// And --sasl-mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), --sasl-user
// and --sasl-password-file (SASLFlags), the password otherwise from
// $MQ_SASL_PASSWORD, never a flag (flags are visible in ps): they travel
// in TLSFiles.SASL, and Apply gives every address the franz-go mechanism
// (Addr.SASL), which NewClient passes to kgo.SASL. With TLS (ssl://,
// --tls-*) that is Kafka's SASL_SSL, else SASL_PLAINTEXT; -b also takes
// sasl_plaintext:// and sasl_ssl://, which need the SASL flags. A user
// or password file without a mechanism, a mechanism without a user or a
// password, an unknown mechanism and SASL to a Unix socket (which needs
// no login) are usage errors.
//
// NewClient builds a kgo client on those seeds. Kafka clients connect to the
// host:port a broker advertises, which is useless when all we have is a
// socket path; so when the seeds are Unix sockets the client dials the socket
// for every broker address it learns (a single node advertises one broker).
// It asks for metadata again after 250 ms rather than kgo's 5 s, so
// that a tool finds a partition's new leader soon after a failover.
// A producing tool adds ProducerTimeouts: a request a broker leaves
// unanswered is given up after 5 s, or 5 s past its own timeout (a
// produce 12 s after it was sent), so that a producer behind a frozen
// broker moves on soon after the cluster has elected another leader; a
// slow broker that is alive costs a retry, never a record
// (docs/operations.md, Failover). The other tools keep kgo's 10 s: a
// broker holds some administrative answers longer on purpose. Options
// given to NewClient override these.
//
// Ping checks that the broker answers and turns "cannot connect" into an
// *Error with ExitUnreachable.
//
// Retry asks again while the broker's answer is retriable (Retriable:
// LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS,
// …, as every Kafka client does), for up to RetryTimeout: a tool run
// while mqd restarts and opens its partitions, or while a cluster elects
// new leaders, waits for them instead of failing.
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
// A usage error, whether urfave/cli finds it (an unknown flag or command, a
// bad value, a missing required flag) or a command returns it (Usagef), is
// one line that names the command and ends "(see PROG COMMAND --help)";
// nothing goes to stdout. Prepare arranges it for every command.
//
// # Command lines
//
// Every tool, and mqd, runs its arguments through Intersperse: flags may
// follow arguments, and short options are taken as getopt (and kcat) take
// them: a value attached to its option (-K: -tTOPIC -o-10) and booleans run
// together (-e0). Times on the command line (mqpipe -o @TIME, mqctl
// --to-time) are read by ParseTime: RFC 3339, epoch milliseconds, or a time
// ago (-1h, -30m, -2d).
//
// # Help, man pages and completion
//
// A command without a written UsageText gets one generated from its flags
// (FillSynopses, CommandSynopsis): "mqpipe consume [-b ADDR] -t TOPIC...
// [-o OFFSET] ...", in --help and in the man page, whose SYNOPSIS lists
// every command (ManPage, CheckManPage; make man). The completion scripts
// (Completion) ask the program: a command line ending in
// --generate-bash-completion prints what may replace its last word:
// subcommands, flags, or the topic and group names of the broker for a
// flag or argument that takes one, asked with a one-second timeout and
// nothing when the broker does not answer.
//
// # Share groups
//
// GroupConfigs and AlterGroupConfigs read and change a group's configs
// (Kafka's GROUP config resource). StartShareGroup is what mqpipe exec and
// mqctl queue create do before a share group's first member joins: a new
// group (ShareGroupIsNew: no coordinator knows it and it has no
// share-partition state) without a share.auto.offset.reset of its own
// gets the start asked for, earliest by default, so that a work queue
// delivers what was queued before its first worker.
//
// # Output
//
// Data goes to stdout, diagnostics to stderr. WriteTable aligns columns for
// people; WriteJSON writes one compact JSON document per call, for scripts.
// The shapes are the tools' documented contract: keep them stable.
//
// IsTerminal tells a terminal (which answers the terminal ioctl) from a
// pipe, a file or /dev/null: mqpipe draws progress and flushes each line
// only for one, and mqctl asks a person a question only when its stdin is
// one.
package client
