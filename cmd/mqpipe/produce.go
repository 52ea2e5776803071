package main

import (
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/client"
	"github.com/mqproject/mq/lib/pipe"
)

// produceDoc describes produce, in its --help and in mqpipe(1).
const produceDoc = `Sends one message per line of the FILEs in order, or of stdin when there
are none ("-" also means stdin), and waits until the broker acknowledged
each. kcat -P FILE sends each file as one message instead: that is
--whole-file (the file's bytes, newlines and all; too large a file is
reported and not sent, the others are). Lines may be of any length up to the topic's max.message.bytes; a
longer line is reported with its line number and not sent, the others
are. Messages are sent as they are read, so a slow pipe
(tail -f log | mqpipe produce -t logs) is live: each line goes out within
--linger.

A message goes to the partition given by -p, else (--format json) the
record's own partition, else the partition of its key's murmur2 hash, as
Kafka's default partitioner does; messages without a key are spread over
the partitions batch by batch.

An empty value is sent as an empty message, not a null one. With -Z (as
kcat -Z), an empty value is sent as null and an empty key as a null key:
with -K:, the line "user-7:" is a tombstone for the key user-7, the line
":" a record with null key and null value, and an empty line a null
value. --tombstone KEY sends a tombstone (a record with key KEY and a
null value) to the partition of KEY: in a topic with
cleanup.policy=compact, compaction drops the older records of KEY, and
the tombstone itself once delete.retention.ms has passed. --tombstone may
be repeated and reads no input (FILEs, -K, -k and --format json are usage
errors with it, and so is an empty KEY):
mqpipe produce -t users --tombstone user-7 --tombstone user-9. In --format
json input, "value":null is a tombstone and "key":null a null key (and
-Z is a usage error).

With --report, prints "PARTITION OFFSET" for each acknowledged message, in
input order (offsets are -1 with --acks none). When stderr is a terminal a
progress line shows messages, megabytes and messages per second once the
input takes more than a second.

While the broker refuses messages with an error the client retries (a
partition whose disk is full or failing answers KAFKA_STORAGE_ERROR),
prints one line per partition on stderr,
"mqpipe: storage error on TOPIC-PARTITION (CAUSE); retrying", and keeps
trying. A message that waits --ack-timeout (default 30s) for its
acknowledgment ends the run: with exit 3 when mqd does not answer, else
with exit 1, saying why and which lines were not acknowledged. Messages
acknowledged before are stored; --report lists them.

Exits 0 only when every message was acknowledged; otherwise describes the
first failures, then says on one line how many messages were not sent
(refused by mqpipe itself: a line too long, or with --format json a line
that is not the JSON envelope) and how many were sent and not
acknowledged, and which lines they were, and exits 1.`

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:        "produce",
		Aliases:     []string{"P"},
		Usage:       "send each line of stdin or FILEs as a message",
		ArgsUsage:   "[FILE...]",
		Description: produceDoc,
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "send to `TOPIC` (created on first use if the broker allows)", Required: true},
			&cli.StringFlag{Name: "key-delimiter", Aliases: []string{"K"}, Usage: "split each line at the first `DELIM` into key and value (a line without it has a null key)"},
			&cli.StringFlag{Name: "key", Aliases: []string{"k"}, Usage: "give every message the key `KEY`"},
			&cli.IntFlag{Name: "partition", Aliases: []string{"p"}, Value: -1, Usage: "send every message to partition `N`", DefaultText: "by key"},
			&cli.StringSliceFlag{Name: "header", Aliases: []string{"H"}, Usage: "add the header `NAME=VALUE` to every message; repeatable"},
			&cli.StringFlag{Name: "compression", Aliases: []string{"z"}, Value: "none", Usage: "compress batches with `CODEC`: " + pipe.Codecs},
			&cli.StringFlag{Name: "acks", Value: "all", Usage: "wait for `ACKS`: all (every in-sync replica), leader or none"},
			&cli.DurationFlag{Name: "linger", Value: 5 * time.Millisecond, Usage: "let a batch wait up to `DURATION` for more messages before it is sent"},
			&cli.DurationFlag{Name: "ack-timeout", Value: 30 * time.Second, Usage: "give up once a message has waited `DURATION` for its acknowledgment: exit 3 if mqd does not answer, 1 if it answers but refuses (a full disk); 0 waits forever"},
			&cli.BoolFlag{Name: "null", Aliases: []string{"0"}, Usage: "messages end with NUL instead of newline (find -print0)"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "read lines as `FORMAT`: text, or json (JSON envelopes, see mqpipe(1))"},
			&cli.BoolFlag{Name: "empty-as-null", Aliases: []string{"Z"}, Usage: "send an empty value as null (a tombstone) and an empty key as a null key, as kcat -Z"},
			&cli.StringSliceFlag{Name: "tombstone", Usage: "send a tombstone (a null value) for `KEY` instead of reading input; repeatable"},
			&cli.BoolFlag{Name: "report", Usage: `print "PARTITION OFFSET" for each acknowledged message`},
			&cli.BoolFlag{Name: "whole-file", Usage: "send each FILE (or stdin) whole as one message, as kcat -P FILE does, not one message per line"},
		),
		Action: func(c *cli.Context) error {
			sec, err := security(c)
			if err != nil {
				return err
			}
			cfg := pipe.ProduceConfig{
				Broker:      client.FlagString(c, "broker"),
				TLS:         sec,
				Topic:       c.String("topic"),
				Files:       c.Args().Slice(),
				WholeFiles:  c.Bool("whole-file"),
				KeyDelim:    c.String("key-delimiter"),
				Partition:   int32(c.Int("partition")),
				NUL:         c.Bool("null"),
				NullEmpty:   c.Bool("empty-as-null"),
				Compression: c.String("compression"),
				Acks:        c.String("acks"),
				Linger:      c.Duration("linger"),
				AckTimeout:  c.Duration("ack-timeout"),
				Report:      c.Bool("report"),
				Progress:    client.IsTerminal(os.Stderr),
				Stdin:       os.Stdin,
				Stdout:      c.App.Writer,
				Stderr:      c.App.ErrWriter,
			}
			if c.IsSet("tombstone") {
				cfg.Tombstones = [][]byte{}
				for _, k := range c.StringSlice("tombstone") {
					cfg.Tombstones = append(cfg.Tombstones, []byte(k))
				}
			}
			if c.IsSet("key") {
				cfg.Key = []byte(c.String("key"))
			}
			if p := c.Int("partition"); p < -1 || p > 1<<31-1 {
				return client.Usagef("-p %d: want a partition number (0, 1, ...)", p)
			}
			switch f := c.String("format"); f {
			case "text":
			case "json":
				cfg.JSON = true
			default:
				return client.Usagef("--format %q: want text or json", f)
			}
			for _, h := range c.StringSlice("header") {
				hdr, err := pipe.ParseHeader(h)
				if err != nil {
					return err
				}
				cfg.Headers = append(cfg.Headers, hdr)
			}
			return pipe.Produce(c.Context, cfg)
		},
	}
}
