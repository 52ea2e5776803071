package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/pipe"
)

// execDoc describes exec, in its --help and in mqpipe(1).
const execDoc = `Runs COMMAND once per message, as a worker that nothing escapes:

    mqpipe exec -t jobs -g workers -j 4 --dlq jobs.dead -- ./handle.sh
    mqpipe exec -t mail -g cron --exit-when-idle 10s -- sendmail -t
    mqpipe exec -t accounts -g ledger --ordered -- ./apply-change

COMMAND (after --, run directly, not by a shell) gets the message's value
on stdin and the rest of the record in its environment:

    MQ_TOPIC           the topic
    MQ_PARTITION       the partition
    MQ_OFFSET          the offset
    MQ_KEY             the key; unset for a null key (MQ_KEY_B64, in
                       base64, instead when the key holds a NUL byte)
    MQ_TIMESTAMP       the timestamp, ms since the Unix epoch
    MQ_DELIVERY_COUNT  1 on the first attempt, 2 on the second...
    MQ_GROUP           the group of -g
    MQ_HEADER_<NAME>   each header, NAME upper-cased and every character
                       but A-Z and 0-9 made _ (trace-id: MQ_HEADER_TRACE_ID);
                       _B64 appended when the value holds a NUL byte

Variables of these names in mqpipe's own environment are not passed on.
The command's stdout and stderr are mqpipe's.

Exit status 0 acknowledges the message. Any other (or being killed, or
failing to start) is a failed attempt: the message is delivered again
after --retry-backoff, doubled after each attempt (up to 32 times
--retry-backoff), and after --attempts deliveries it goes to the
dead-letter topic of --dlq: the same key, value, headers and timestamp,
and the headers mq.dlq.source.topic, mq.dlq.source.partition,
mq.dlq.source.offset, mq.dlq.delivery.count, mq.dlq.group and
mq.dlq.error, the last being how the command ended and the tail of its
stderr (up to 1 KiB), as in "exit status 3: no such user": the headers
the broker's own dead letters carry (docs/queues.md). Each failed attempt
is reported on stderr in one line.

-j N runs up to N commands at once. --timeout kills a command that runs
longer (a failed attempt): each command runs in a process group of its
own, which gets SIGTERM, then SIGKILL 5 s later. --exit-when-idle
DURATION ends the worker (exit 0) once no message came for DURATION and
every command finished: for a cron job that drains a queue.

SIGTERM (or SIGINT) stops the worker: it takes no more messages, lets the
running commands finish for up to --grace, acknowledges those that
succeeded (and handles those that failed as usual), kills the rest and
gives their messages back, and exits 0. A message is acknowledged only
after its command ran and exited 0; one that was not is delivered again.
A second signal ends mqpipe at once (status 130).

Without --ordered the worker is a member of the share group GROUP
(KIP-932): the broker hands each message to one member at a time, so any
number of workers share the topics, but messages run in no particular
order. Without --dlq the broker archives a message that failed its last
attempt (or dead-letters it, if the group is set up to). With --dlq,
a group without a dead-letter topic of its own gets TOPIC as its
errors.deadletterqueue.topic.name: mqctl queue describe counts its dead
letters and mqctl queue dlq replay finds them. The broker also counts
deliveries.

A new share group (no member and no state yet) starts at the earliest
offset: it gets every message queued before its first worker, as a work
queue should. --start latest makes it skip those. mqpipe sets the
group's share.auto.offset.reset before joining and says so on stderr; a
group already used, or whose share.auto.offset.reset an operator set
(mqctl queue config), keeps its own. mqpipe polls for more messages only once every
message of the last poll was acknowledged, so a slow command holds its
batch (of up to -j messages) back. A command must finish within the
broker's acquisition lock (group.share.record.lock.duration.ms), else the
message goes to another worker meanwhile: keep --timeout below it.

With --ordered GROUP is a consumer group: the group assigns partitions,
messages of one key (of a partition) run one at a time in offset order,
and messages with no key count as one key. Of the messages ready to run,
the lowest offset of a partition goes first: with -j 1 a partition's
messages run in offset order; with more, messages of different keys run
at once, so they may finish out of order. A failed command is run again
in place, after the backoff, before anything else of its key; after the
last attempt the message goes to --dlq, and without --dlq the worker
stops (status 1) leaving it uncommitted. Each partition's offset is
committed past the messages that are done and every one before them.
A new group starts at the beginning of the topics. Deliveries are
counted by the worker, from 1 again after a restart or a rebalance.`

func execCommand() *cli.Command {
	return &cli.Command{
		Name:        "exec",
		Usage:       "run a command once per message: exit 0 acknowledges, failures are retried and dead-lettered",
		Description: execDoc,
		ArgsUsage:   "-- COMMAND [ARG...]",
		Flags: append(connectionFlags(),
			&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "read `TOPIC`; several comma-separated or repeated", Required: true},
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "work as a member of `GROUP` (a share group; with --ordered a consumer group)", Required: true},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, Value: 1, Usage: "run up to `N` commands at once"},
			&cli.DurationFlag{Name: "timeout", Usage: "kill a command that runs longer than `DURATION` (a failed attempt)", DefaultText: "no limit"},
			&cli.IntFlag{Name: "attempts", Value: pipe.DefaultAttempts, Usage: "give a message up after `N` failed attempts (to --dlq)"},
			&cli.DurationFlag{Name: "retry-backoff", Value: pipe.DefaultRetryBackoff, Usage: "wait `DURATION` before the first retry, doubling for each next one"},
			&cli.StringFlag{Name: "dlq", Usage: "copy messages given up to the dead-letter topic `TOPIC`"},
			&cli.StringFlag{Name: "start", Usage: "where a new share group starts: `earliest` (every message queued) or latest", DefaultText: "earliest"},
			&cli.DurationFlag{Name: "exit-when-idle", Usage: "exit 0 once no message came for `DURATION` and every command finished", DefaultText: "never"},
			&cli.DurationFlag{Name: "grace", Value: pipe.DefaultGrace, Usage: "on SIGTERM, let running commands finish for up to `DURATION`"},
			&cli.BoolFlag{Name: "ordered", Usage: "use a consumer group and keep the order of each key: one command at a time per key (with -j 1, one partition's messages run in offset order)"},
			&cli.DurationFlag{Name: "session-timeout", Usage: "with --ordered, let the group wait `DURATION` for a silent member", DefaultText: pipe.DefaultSessionTimeout.String()},
		),
		Action: func(c *cli.Context) error {
			sec, err := security(c)
			if err != nil {
				return err
			}
			o := pipe.ExecOptions{
				Broker:         client.FlagString(c, "broker"),
				TLS:            sec,
				Topics:         splitList(c.StringSlice("topic")),
				Group:          c.String("group"),
				Ordered:        c.Bool("ordered"),
				DLQ:            c.String("dlq"),
				Start:          c.String("start"),
				SessionTimeout: c.Duration("session-timeout"),
				Run: pipe.ExecConfig{
					Command:      c.Args().Slice(),
					Jobs:         c.Int("jobs"),
					Timeout:      c.Duration("timeout"),
					Attempts:     c.Int("attempts"),
					RetryBackoff: c.Duration("retry-backoff"),
					ExitWhenIdle: c.Duration("exit-when-idle"),
					Grace:        c.Duration("grace"),
					Stdout:       c.App.Writer,
					Stderr:       c.App.ErrWriter,
				},
			}
			return pipe.Exec(c.Context, o)
		},
	}
}
