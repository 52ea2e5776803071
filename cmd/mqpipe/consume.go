package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/pipe"
)

// consumeDoc describes consume, in its --help and in mqpipe(1).
const consumeDoc = `Prints each record of the topics, by default its value and a newline.
Records of one partition come in offset order; partitions interleave.
Without -g, mqpipe reads the partitions directly and commits no offsets.

A -t value that starts with ^ is a regular expression (Go's syntax, as
kcat's convention has it), not split at commas: -t '^logs-.*' reads every
topic, but the internal ones, whose name it matches. With -e it matches
the topics there are when mqpipe starts; without, topics created later
that match are read too, from their beginning (looked for every few
seconds). -p then picks those partitions of each matched topic that it has.

With -g GROUP, mqpipe joins the consumer group: the group splits the
topics' partitions among its members (run mqpipe consume -g GROUP twice
and each gets some), each partition starts at the group's committed
offset, and -o applies only to partitions the group has none for. What
mqpipe has written to stdout is committed: after each batch (--commit
written, the default), every few seconds (periodic), or never (none); and
always before it exits, also when interrupted. When a member dies, the
others take over its partitions after --session-timeout, from the last
commit. A member outlives the loss of the group's coordinator (its broker
killed or restarting) and the group forgetting it (its session expired,
or a new coordinator holds an older generation): it joins the group again.
With -e a member exits when the partitions assigned to it reached
the high-water marks they had when it got them.

-o picks where each partition starts: beginning, end (only new records),
N (offset N), -N (the last N records of each partition, like tail -n) or
@TIME (the first record at or after TIME: an RFC 3339 time such as
2024-05-01T12:00:00Z, milliseconds since the epoch, or a time ago as
date -d users write it: @-1h an hour ago, @-30m, @-2d, @-1h30m, with the
units ms, s, m, h, d and w; @now is now). An offset outside the log
starts at its nearest end. As kcat's, s@TIME is @TIME, and e@TIME (a
second -o) ends the read: each partition stops before its first record
at or after TIME, or where -e would stop when it has none;
-o s@-2h -o e@-1h prints the records of the hour before the last.
@TIME1:TIME2 (rpk's) is the two at once: -o @-2h:-1h. An end is not
taken with -g.

With -e, mqpipe notes each partition's high-water mark when it starts and
exits once it has printed every record below them, however busy the topic;
empty partitions are done at once.

A partition without a leader yet (mqd restarting and still opening its
logs, an election after a broker left) is asked again, as any Kafka
client does: mqpipe says once on stderr what it waits for and gives up
after 30 seconds with exit status 1.

-f prints each record with kcat's tokens: %t topic, %p partition, %o
offset, %T timestamp (ms since the epoch), %k key, %K key length (-1 for
null), %s value, %S value length (-1 for null), %h headers as
name=value,..., %% a percent sign; and the escapes \n \t \r \0 (a doubled
backslash prints one backslash). A null key or value (a tombstone's
value) prints as nothing, like an empty one; with -Z (as kcat -Z) %k, %s
and the values of %h print a null as NULL, so
mqpipe consume -t users -Z -f '%k=%s\n' prints user-7=NULL for a
tombstone. %K and %S print -1 for null, 0 for empty.
-K DELIM (as kcat -K on consume) prints the key, DELIM and the value:
-K: is -f '%k:%s\n'.
-J (--kcat-json) prints each record as kcat -J does, one per line (with
-0, each ended by NUL instead), for scripts written for kcat
(mqpipe consume -t T -J | jq .payload): topic, partition, offset, tstype
(create or logappend), ts (ms since the epoch), broker (the id of the
broker it was fetched from, -1 if not known), headers (only when there
are some: a flat list of name, value, ...), key and payload; a null
key, value or header value is null (-Z changes nothing). As kcat's, it
escapes only quotes, backslashes and control characters and copies
every other byte, so a key or value that is not UTF-8 makes a line that
is not strictly JSON.
--json prints mqpipe's JSON envelope instead, one per line, which
produce --format json reads back exactly: value for kcat's payload,
timestamp for ts, headers as objects, and bytes that are not UTF-8 in
base64 (key_b64, value_b64); a null value is "value":null and an empty
one "value":"" (-Z changes nothing).

Output is flushed after every record when stdout is a terminal or with
--line-buffered, else after each batch fetched. When stdout is closed
(| head) mqpipe exits quietly with status 0, with -g after committing
what it wrote; a pipe or Unix socket closed by its reader ends it at
once, also while no record comes.`

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:        "consume",
		Aliases:     []string{"C"},
		Usage:       "print the records of topics to stdout",
		Description: consumeDoc,
		Flags: append(connectionFlags(),
			&cli.StringSliceFlag{Name: "topic", Aliases: []string{"t"}, Usage: "read `TOPIC`; several comma-separated or repeated; ^REGEX reads the topics it matches", Required: true},
			&cli.StringSliceFlag{Name: "partition", Aliases: []string{"p"}, Usage: "read only partition `N` of each topic; several comma-separated or repeated", DefaultText: "all"},
			&cli.StringSliceFlag{Name: "offset", Aliases: []string{"o"}, Usage: "start at `OFFSET`: " + pipe.OffsetsUsage, DefaultText: "beginning"},
			&cli.Int64Flag{Name: "count", Aliases: []string{"c"}, Usage: "exit after `COUNT` messages", DefaultText: "no limit"},
			&cli.BoolFlag{Name: "exit", Aliases: []string{"e"}, Usage: "exit at the end: when every partition reached the high-water mark it had at the start"},
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Usage: "print each record as `FORMAT` (kcat's tokens: %t %p %o %T %k %K %s %S %h, see mqpipe(1))", DefaultText: `%s\n`},
			&cli.BoolFlag{Name: "json", Usage: "print each record as mqpipe's JSON envelope, which produce --format json reads back (see mqpipe(1))"},
			&cli.BoolFlag{Name: "kcat-json", Aliases: []string{"J"}, Usage: "print each record as kcat -J does, with its field names (see mqpipe(1))"},
			&cli.StringFlag{Name: "key-delimiter", Aliases: []string{"K"}, Usage: "print each record as its key, `DELIM`, its value and a newline, as kcat -K"},
			&cli.BoolFlag{Name: "print-null", Aliases: []string{"Z"}, Usage: "print a null key or value as NULL instead of nothing, as kcat -Z"},
			&cli.BoolFlag{Name: "null", Aliases: []string{"0"}, Usage: "end each message with NUL instead of newline"},
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "join the consumer group `GROUP`, start at its committed offsets and commit what was written"},
			&cli.StringFlag{Name: "commit", Usage: "with -g, commit `WHEN`: " + pipe.CommitModes, DefaultText: pipe.CommitWritten},
			&cli.DurationFlag{Name: "session-timeout", Value: pipe.DefaultSessionTimeout, Usage: "with -g, let the group wait `DURATION` for a silent member before reassigning its partitions"},
			&cli.BoolFlag{Name: "line-buffered", Usage: "flush stdout after every message, also into a pipe"},
		),
		Action: func(c *cli.Context) error {
			sec, err := security(c)
			if err != nil {
				return err
			}
			cfg := pipe.ConsumeConfig{
				Broker:         client.FlagString(c, "broker"),
				TLS:            sec,
				Topics:         topicList(c.StringSlice("topic")),
				Count:          c.Int64("count"),
				Exit:           c.Bool("exit"),
				JSON:           c.Bool("json"),
				KcatJSON:       c.Bool("kcat-json"),
				ShowNull:       c.Bool("print-null"),
				NUL:            c.Bool("null"),
				LineBuffered:   c.Bool("line-buffered") || client.IsTerminal(os.Stdout),
				Group:          c.String("group"),
				Commit:         c.String("commit"),
				SessionTimeout: c.Duration("session-timeout"),
				Stdout:         c.App.Writer,
				Stderr:         c.App.ErrWriter,
			}
			if c.NArg() > 0 {
				return client.Usagef("consume: unexpected argument %q", c.Args().First())
			}
			if cfg.Partitions, err = partitionList(c.StringSlice("partition")); err != nil {
				return err
			}
			if cfg.Offset, cfg.Until, err = pipe.ParseOffsets(c.StringSlice("offset")); err != nil {
				return client.Usagef("%v", err)
			}
			format := c.String("format")
			if c.IsSet("key-delimiter") {
				if c.IsSet("format") || cfg.JSON || cfg.KcatJSON {
					return client.Usagef("consume: -K prints key DELIM value: not with -f, --json or -J")
				}
				format = keyValueFormat(c.String("key-delimiter"), cfg.NUL)
				cfg.NUL = false
			}
			if c.IsSet("format") || c.IsSet("key-delimiter") {
				if cfg.Format, err = pipe.ParseFormat(format); err != nil {
					return client.Usagef("-f: %v", err)
				}
			}
			return pipe.Consume(c.Context, cfg)
		},
	}
}

// keyValueFormat is the -f format of -K DELIM: the key, DELIM taken
// literally, the value, and a newline (NUL with -0).
func keyValueFormat(delim string, nul bool) string {
	end := `\n`
	if nul {
		end = `\0`
	}
	return "%k" + strings.NewReplacer("%", "%%", `\`, `\\`).Replace(delim) + "%s" + end
}

// topicList reads -t values: topic names, comma-separated or repeated,
// and regular expressions, which start with ^ and are taken whole (a
// comma is part of the expression: ^a{1,3}$).
func topicList(values []string) []string {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, "^") {
			out = append(out, v)
			continue
		}
		out = append(out, splitList([]string{v})...)
	}
	return out
}
