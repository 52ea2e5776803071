package main

import (
	"context"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func topicCommand() *cli.Command {
	return &cli.Command{
		Name:  "topic",
		Usage: "create, list, describe, alter and delete topics",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create topics",
				ArgsUsage: "TOPIC...",
				UsageText: doc("mqctl topic create [-p N] [-r N] [-c KEY=VALUE]... [--if-not-exists] TOPIC...", `Creates each TOPIC with --partitions partitions and --replication-factor
replicas (by default the broker's num.partitions and
default.replication.factor) and the topic configs given with -c.

Prints one row per topic: TOPIC RESULT DETAIL. JSON: an array of
{"topic": string, "result": "created"|"exists"|"failed",
 "partitions": int, "replication_factor": int, "set": {name: value},
 "error": string} (partitions, replication_factor, set and error only when
known). Exits 1 when a topic could not be created; with --if-not-exists a
topic that exists already is "exists" and not a failure.`),
				Flags: append(commandFlags(),
					&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Value: -1, Usage: "number of partitions", DefaultText: "the broker's num.partitions"},
					&cli.IntFlag{Name: "replication-factor", Aliases: []string{"r"}, Value: -1, Usage: "replicas per partition", DefaultText: "the broker's default.replication.factor"},
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "topic config `KEY=VALUE` (repeatable), e.g. -c retention.ms=86400000"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed when a topic exists already"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					req := admin.CreateTopics{Topics: c.Args().Slice(), IfNotExists: c.Bool("if-not-exists")}
					if err := admin.CheckTopicNames("topic create", req.Topics); err != nil {
						return nil, err
					}
					p, rf := c.Int("partitions"), c.Int("replication-factor")
					if p == 0 || p < -1 || p > math.MaxInt32 {
						return nil, client.Usagef("topic create: --partitions must be positive")
					}
					if rf == 0 || rf < -1 || rf > math.MaxInt16 {
						return nil, client.Usagef("topic create: --replication-factor must be positive")
					}
					req.Partitions, req.ReplicationFactor = int32(p), int16(rf)
					configs, err := admin.ParseConfigs("topic create: --config", c.StringSlice("config"))
					if err != nil {
						return nil, err
					}
					req.Configs = configs
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.CreateTopics(ctx, req)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "list",
				Aliases:   []string{"ls"},
				Usage:     "list topics",
				ArgsUsage: " ",
				UsageText: doc("mqctl topic list [--internal]", `Lists the topics of the cluster, sorted by name.

Prints TOPIC PARTITIONS REPLICATION-FACTOR. JSON: an array of
{"topic": string, "partitions": int, "replication_factor": int,
 "internal": bool}.`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "internal", Usage: "include internal topics (__consumer_offsets)"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					internal := c.Bool("internal")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.ListTopics(ctx, internal)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "describe",
				Usage:     "show topics' partitions: leader, replicas, ISR, offline replicas, log start, high-water mark",
				ArgsUsage: "[TOPIC...]",
				UsageText: doc("mqctl topic describe [--under-replicated] [--unavailable] [TOPIC...]", `Describes each TOPIC (default: every topic but the internal ones): one
row per partition with its leader, replicas, in-sync replicas (ISR),
offline replicas (on brokers that are fenced or not registered), log
start offset and high-water mark. --under-replicated shows only the
partitions whose ISR is smaller than their replica set, --unavailable
only those without a leader or whose leader does not answer (both:
either kind), and only the topics that have such partitions.

Prints TOPIC PARTITION LEADER REPLICAS ISR OFFLINE LOG-START
HIGH-WATERMARK ("-" for no replica, "none" for no leader), a
WRITES column when some partition's writes fail on a broker (a full disk,
an I/O error): "ok", or "failing on BROKER (CAUSE)", and a DAMAGED column
when some partition's log has damaged ranges (bytes that failed their
CRC, or were lost from a segment; mqd does not serve them, consumers that
reach them get an error): "offsets FROM-TO on BROKER", "skipped FROM-TO"
once given up with mqctl records skip-damaged, and an ERROR column when
some partition could not be described whole: no leader, or a leader that
does not answer ("leader 3 unreachable: connection refused"). Each
leader is asked for its partitions' offsets by itself, and asked again
for up to 30s (said on stderr) while it answers a retriable error (a
restarted mqd opening the partition, a leader that just moved); a leader
that does not answer is not asked again: during an incident (a node
killed and not yet fenced, a quorum lost) the partitions of the leaders
that answer are described and the others shown with unknown offsets
("?"). A partition without a leader is shown at once, LEADER none; the
exit status is 3 only when no broker answers.
JSON: an array of
{"topic": string, "id": string, "internal": bool,
 "partitions": [{"partition": int, "leader": int, "leader_epoch": int,
 "replicas": [int], "isr": [int], "offline_replicas": [int],
 "log_start_offset": int, "high_watermark": int, "error": string,
 "storage_errors": [{"broker": int, "dir": string, "error": string,
 "failing_since_ms": int}], "damaged": [{"broker": int, "from_offset":
 int, "to_offset": int, "segment": string, "position": int, "length": int,
 "reason": string, "detected_ms": int, "skipped": bool}]}]}, sorted by
topic and partition; leader is -1 when the partition has none, offsets are
-1 when unknown (error says why), offline_replicas the replicas on
fenced or unregistered brokers, storage_errors lists the replicas whose
writes fail, damaged the damaged ranges (to_offset exclusive). An unknown
TOPIC is a failure (exit 1); the other topics are still described.`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "under-replicated", Usage: "only partitions whose ISR is smaller than their replicas"},
					&cli.BoolFlag{Name: "unavailable", Usage: "only partitions without a leader, or whose leader does not answer"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					topics := c.Args().Slice()
					if len(topics) > 0 {
						if err := admin.CheckTopicNames("topic describe", topics); err != nil {
							return nil, err
						}
					}
					filter := admin.PartitionFilter{UnderReplicated: c.Bool("under-replicated"), Unavailable: c.Bool("unavailable")}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DescribeTopics(ctx, topics, filter)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "alter",
				Usage:     "add partitions to topics or change their configs",
				ArgsUsage: "TOPIC...",
				UsageText: doc("mqctl topic alter [-p N [--sample-keys[=COUNT]] [--execute|--dry-run]] [-c KEY=VALUE]... [-d KEY]... [--if-exists] TOPIC...", `Raises each TOPIC's partition count to --partitions, sets the configs
given with -c and deletes (resets to the default) those given with
--delete-config. Configs not named keep their values.

Adding partitions cannot be undone, and it moves keys: a record with a key
goes to the partition murmur2(key) mod the partition count gives (Kafka's
default partitioner, which kgo clients, mqpipe and the Java client use),
so after the change most keys map to a different partition, and a
consumer no longer sees each key's records in order across the change.
mqctl says so on stderr first. With --sample-keys it also reads up to
COUNT (default 1000) distinct keys from the topic's recent records (the
last COUNT/partitions records of each partition, for at most 10s and
64 MiB) and says how many of them would map to a different partition
("412 of 1000 sampled keys (41%) would map to a different partition"),
or that the records have no keys, and how many keys are not on their
hash's partition now (their producers choose partitions otherwise).
Then, when stdin is a terminal, it asks before adding the partitions;
--execute adds them without asking. Without a terminal and without
--execute it refuses, with exit status 2, before reading anything.
--dry-run prints the warning (and the sample) and has the broker check
every change without making any: RESULT "planned". A count that is not
larger than the topic's is refused by the broker (exit 1), as before.

Prints TOPIC RESULT DETAIL. JSON: an array of {"topic": string,
 "result": "altered"|"planned"|"missing"|"failed", "partitions": int,
 "set": {name: value}, "deleted": [name], "key_sample":
 {"from_partitions": int, "to_partitions": int, "records": int,
 "keyed": int, "keys": int, "moved": int, "elsewhere": int,
 "incomplete": string}, "error": string}; key_sample only with
--sample-keys, for a topic that grows (records: records read; keyed: of
them, those with a key; keys: distinct keys; moved: keys that map to
another partition after the change; elsewhere: keys found only on
other partitions than their hash's; incomplete: why the sample stopped
short).
An unknown topic is a failure unless --if-exists is given (then it is
"missing").`),
				Flags: append(commandFlags(),
					&cli.IntFlag{Name: "partitions", Aliases: []string{"p"}, Usage: "new total number of partitions (can only grow)"},
					newOptionalCountFlag("sample-keys", admin.SampleKeysDefault, "read up to COUNT keys (default 1000) of the recent records and say how many adding partitions moves"),
					&cli.BoolFlag{Name: "execute", Usage: "add the partitions without asking"},
					&cli.BoolFlag{Name: "dry-run", Usage: "only warn (and sample), and have the broker check the changes; change nothing"},
					&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "set topic config `KEY=VALUE` (repeatable)"},
					&cli.StringSliceFlag{Name: "delete-config", Aliases: []string{"d"}, Usage: "reset topic config `KEY` to its default (repeatable)"},
					&cli.BoolFlag{Name: "if-exists", Usage: "succeed when a topic does not exist"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					set, err := admin.ParseConfigs("topic alter: --config", c.StringSlice("config"))
					if err != nil {
						return nil, err
					}
					sample, err := optionalCountOf(c, "topic alter", "sample-keys")
					if err != nil {
						return nil, err
					}
					req := admin.AlterTopics{
						Topics:     c.Args().Slice(),
						Partitions: c.Int("partitions"),
						Set:        set,
						Delete:     c.StringSlice("delete-config"),
						IfExists:   c.Bool("if-exists"),
						Execute:    c.Bool("execute"),
						DryRun:     c.Bool("dry-run"),
						Ask:        askOnTerminal(c),
						Warn:       c.App.ErrWriter,
						SampleKeys: sample,
					}
					if err := req.Check(); err != nil {
						return nil, err
					}
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.AlterTopics(ctx, req)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "delete",
				Aliases:   []string{"rm"},
				Usage:     "delete topics and their data",
				ArgsUsage: "TOPIC...",
				UsageText: doc("mqctl topic delete [--if-exists] TOPIC...", `Deletes each TOPIC and all its records.

Prints TOPIC RESULT DETAIL. JSON: an array of {"topic": string,
 "result": "deleted"|"missing"|"failed", "error": string}. An unknown topic
is a failure unless --if-exists is given (then it is "missing").`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "if-exists", Usage: "succeed when a topic does not exist"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					topics := c.Args().Slice()
					if err := admin.CheckTopicNames("topic delete", topics); err != nil {
						return nil, err
					}
					ifExists := c.Bool("if-exists")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DeleteTopics(ctx, topics, ifExists)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
		},
	}
}
