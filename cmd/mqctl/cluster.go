package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mqproject/mq/lib/admin"
	"github.com/mqproject/mq/lib/client"
)

func clusterCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster",
		Usage: "show the cluster: brokers, controller, versions; check its health; rebalance it",
		Subcommands: []*cli.Command{
			rebalanceCommand(),
			{
				Name:      "describe",
				Usage:     "show the cluster id, the controller, the brokers, the controller quorum and the log directories",
				ArgsUsage: " ",
				UsageText: doc("mqctl cluster describe [--apis]", `Shows the cluster id and controller, then one row per broker: BROKER HOST
PORT RACK STATE LEADS CONTROLLER VERSION PROTOCOL. STATE is "alive",
"fenced" (the controller stopped hearing from it; it leads nothing and
clients do not see it in Metadata), "shutting down" (SIGTERM: its
leaderships are moving to other in-sync replicas before it stops) or
"unreachable" (the controller still counts it alive, but it does not
answer mqctl: killed, stopped or cut off and not fenced yet; every broker
is asked directly, so this shows at once). LEADS
counts the partitions it leads. VERSION is what the broker runs: mq
and its release for mqd, which says so ("mq v0.4.0"); for another broker
the Apache Kafka release whose protocol its API versions match best
(franz-go's guess), or "unknown". PROTOCOL is the newest Kafka release
whose version of every API the broker answers it reaches ("Kafka 3.8"): a
client written for that release finds those APIs at its versions or newer
(mq answers a subset of Kafka's APIs). Then the controller quorum
(DescribeQuorum): its leader (the active controller) and epoch, and one
row per member: NODE ROLE LOG-END LAG LAST-FETCH, ROLE "leader", "voter"
or "non-voter" (a broker that holds the metadata without voting), LAG how
many records its metadata log is behind the leader's, LAST-FETCH when it
last fetched from the leader; "quorum: unavailable" when the brokers do
not describe it, "quorum: no active controller answered within 5s (asked
through broker 1)" or "quorum: NOT_CONTROLLER: ..." when the controller
has lost its quorum (the quorum is asked of a broker that answered, which
asks its controller). Then one row per log directory of
each broker, every broker asked in turn: BROKER LOG-DIR USABLE TOTAL
STATE (a broker that does not answer gets one row saying why, "?" for
its directory), with the free and total
bytes of the directory's volume, and STATE "ok", or "failing since TIME:
ERROR" while writes to it fail (a full disk, an I/O error; producers get
KAFKA_STORAGE_ERROR until a write succeeds). With --apis, the Kafka APIs
each broker answers and their version ranges.

JSON: {"cluster_id": string, "controller": int, "brokers": [{"id": int,
 "host": string, "port": int, "rack": string|null, "controller": bool,
 "state": "alive"|"fenced"|"shutting down"|"unreachable", "partitions_led": int,
 "version": string, "software": {"name": string, "version": string}|null,
 "kafka_protocol": string, "apis": [{"key": int, "name": string, "min":
 int, "max": int}], "error": string, "log_dirs": [{"path": string,
 "total_bytes": int, "usable_bytes": int, "failing": bool, "error":
 string, "failing_since_ms": int, "storage_errors": int, "damaged_ranges":
 int}], "log_dirs_error": string}], "quorum": {"leader": int, "epoch":
 int, "high_watermark": int, "members": [{"id": int, "voter": bool,
 "log_end_offset": int, "lag": int, "last_fetch_ms": int,
 "last_caught_up_ms": int}]}|null, "quorum_error": string}; controller is
 -1 when none is known,
 software null when the broker does not name it, kafka_protocol "" when
 unknown, bytes are -1 when unknown, storage_errors counts the failed
 writes since the broker started, damaged_ranges the damaged ranges of
 partition logs it found (mqctl topic describe lists them);
 log_dirs_error says why a broker's directories are not listed
 ("unreachable: connection refused", "no answer within 5s", "not asked:
 the broker is fenced"); error why its API versions are not; quorum is
 null when the brokers do not describe it (quorum_error says why,
 "unavailable" for brokers without DescribeQuorum), members lists the
 voters then the non-voters, each by id, with -1 for what is unknown.`),
				Flags: append(commandFlags(),
					&cli.BoolFlag{Name: "apis", Usage: "list the Kafka APIs and versions each broker answers"},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					apis := c.Bool("apis")
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						r, err := a.DescribeCluster(ctx, apis)
						if r == nil {
							return nil, err
						}
						return r, err
					}, nil
				}),
			},
			{
				Name:      "health",
				Usage:     "check the cluster for cron and monitoring: exit 0 when healthy, 1 when degraded",
				ArgsUsage: " ",
				UsageText: doc("mqctl cluster health [--max-lag DURATION] [--group GROUP]... [--timeout DURATION]", `Checks the cluster and prints one line per cause of trouble, or one line
saying it is healthy. Problems: a broker that does not answer (every
broker is asked directly, so a node killed or cut off shows at once,
before the controller fences it) or that the controller fenced, each with
the partitions it leaves under-replicated or without a live leader,
counted on its one line ("broker 1 unreachable (HOST:PORT, connection
refused): 56 partitions under-replicated, 6 user, 50 internal"); an
offline partition (no leader) or an under-replicated partition (fewer
in-sync replicas than replicas) that no such broker explains; a log
directory whose writes fail; a controller without quorum (no active
controller: the broker asked answers NOT_CONTROLLER or nothing within the
timeout, or the leader is in contact with no majority of the voters:
itself and the voters neither fenced nor unreachable); a hung
transaction: open (Ongoing or ending) for longer than its timeout and a
minute, which its coordinator should have aborted ("hung transaction ID:
PrepareCommit for 5m0s (timeout 1m0s), producer 7 epoch 3, coordinator
2"; mqctl txn describe shows it) and, with
--max-lag, each partition on which a consumer group's lag in time (as
group describe reports it) exceeds DURATION (30s, 5m, 1h30m, 2d). Groups
without members (state Empty: their consumers are gone) are not judged
unless named with --group, which limits the check to the groups named.
Internal topics are checked too. --timeout bounds the whole check
(default 5s).

Exit status: 0 healthy; 1 degraded (the problems on stdout, their count
on stderr); 2 a bad flag; 3 no broker can be reached.

JSON: {"healthy": bool, "problems": [{"kind": "unreachable_broker"|
 "fenced_broker"|"offline_partition"|"under_replicated"|
 "failing_log_dir"|"controller_no_quorum"|"controller_quorum_unknown"|
 "lagging_group"|"group_lag_unknown"|"hung_transaction"|
 "transactions_unknown", "topic": string, "partition": int,
 "broker": int, "group": string, "lag_time_ms": int,
 "transactional_id": string (hung_transaction only), "detail": string,
 "partitions": [{"topic": string, "partition": int, "internal": bool,
 "leader": int, "replicas": [int], "isr": [int], "offline": bool}]}]};
 fields that do not apply to a kind are "" or -1; broker is the broker
 that does not answer or is fenced, the broker of the log directory, the
 leader of an under-replicated partition or of the quorum, the
 coordinator of a hung transaction; partitions are
 the partitions an unreachable or fenced broker affects (offline: no live
 leader), [] for the other kinds; detail is the line the table prints.`),
				Flags: append(commandFlags(),
					&cli.StringFlag{Name: "max-lag", Usage: "report groups whose lag in time on a partition exceeds `DURATION` (30s, 5m, 1h30m, 2d)", DefaultText: "lag not checked"},
					&cli.StringSliceFlag{Name: "group", Aliases: []string{"g"}, Usage: "check the lag of `GROUP` only, even without members (repeatable; with --max-lag)", DefaultText: "every group with members"},
					&cli.StringFlag{Name: "timeout", Usage: "give up on brokers that have not answered after `DURATION`", Value: admin.HealthTimeout.String()},
				),
				Action: action(func(c *cli.Context) (job, error) {
					if err := noArgs(c); err != nil {
						return nil, err
					}
					var check admin.HealthCheck
					if s := c.String("max-lag"); s != "" {
						d, err := client.ParseDuration(s)
						if err != nil {
							return nil, client.Usagef("--max-lag: %v", err)
						}
						check.MaxLag = d
					}
					check.Groups = c.StringSlice("group")
					if len(check.Groups) > 0 && check.MaxLag == 0 {
						return nil, client.Usagef("--group: give --max-lag too (the groups' lag is checked only against a maximum)")
					}
					d, err := client.ParseDuration(c.String("timeout"))
					if err != nil || d <= 0 {
						return nil, client.Usagef("--timeout: want a duration above zero (5s, 1m), got %q", c.String("timeout"))
					}
					check.Timeout = d
					return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
						h, err := a.ClusterHealth(ctx, check)
						if h == nil {
							return nil, err
						}
						return h, err
					}, nil
				}),
			},
		},
	}
}

func rebalanceCommand() *cli.Command {
	return &cli.Command{
		Name:      "rebalance",
		Usage:     "even out replicas and preferred leaders over the live brokers, moving as little as possible",
		ArgsUsage: " ",
		UsageText: doc("mqctl cluster rebalance [--dry-run] [--throttle RATE] [--no-wait]", `Plans where every partition's replicas should be for the live brokers
(neither fenced nor shutting down, and answering mqctl) to hold as many replicas as each
other, within one, and to be the preferred leader (first replica) of as
many partitions, with as few replicas moved as can be: a replica moves
only off a broker holding more than its share, the smallest partitions
first, and never to a second replica in one rack while another rack has
room (when every broker has a rack). Internal topics count too. This is
the plan partition reassign --generate makes, for the whole cluster.

Prints the partitions that move, TOPIC PARTITION REPLICAS TARGET, and on
stderr how many replicas move and how many bytes they copy (the
partitions' sizes from DescribeLogDirs). Then, unless --dry-run, it
executes the plan as partition reassign --execute does (the current
assignment on stderr first, to roll back with; --throttle RATE as there)
and shows the moves' progress on stderr until every one has ended, as
partition reassign --watch does, then elects the preferred leader of each
partition moved, as partition elect-leaders does, so that leaderships
spread as the plan's first replicas do (--no-wait: return once the moves
are submitted). On a balanced cluster it says there is nothing to move and
exits 0, so running it again after a rebalance changes nothing. It
refuses while partitions are moving.

JSON: {"plan": PLAN, "current": PLAN, "replicas": int, "bytes": int,
"partitions": int}, PLAN Kafka's reassignment JSON ({"version": 1,
"partitions": [{"topic": string, "partition": int, "replicas": [int],
"log_dirs": [string]}]}) of the partitions that move, plan where they go
and current where they are; replicas counts the replicas that move, bytes
what they copy, partitions the partitions of the cluster.`),
		Flags: append(commandFlags(), moveFlags()...),
		Action: action(func(c *cli.Context) (job, error) {
			if err := noArgs(c); err != nil {
				return nil, err
			}
			run, err := prepareMove(c, "cluster rebalance")
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, a *admin.Admin) (admin.Result, error) {
				p, err := a.ProposeRebalance(ctx)
				if err != nil {
					return nil, err
				}
				return nil, run(ctx, a, p)
			}, nil
		}),
	}
}

// moveFlags are the flags of the commands that plan moves and carry them
// out: cluster rebalance, broker decommission.
func moveFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print what would move, and move nothing"},
		&cli.StringFlag{Name: "throttle", Usage: "limit the copies to `RATE` bytes per second (10MB, 512KiB)"},
		&cli.BoolFlag{Name: "no-wait", Usage: "return once the moves are submitted, without waiting for them to end"},
	}
}

// prepareMove reads the move flags and returns what carries a proposal
// out: print it, and unless --dry-run execute it and wait.
func prepareMove(c *cli.Context, what string) (func(context.Context, *admin.Admin, admin.Proposal) error, error) {
	format, err := client.ParseFormat(client.FlagString(c, "output"))
	if err != nil {
		return nil, err
	}
	m := admin.Move{NoWait: c.Bool("no-wait"), Notices: c.App.ErrWriter, Terminal: isTerminal(c.App.ErrWriter)}
	if c.IsSet("throttle") {
		if m.Throttle, err = admin.ParseRate(what+": --throttle", c.String("throttle")); err != nil {
			return nil, err
		}
	}
	dry := c.Bool("dry-run")
	if dry && (c.IsSet("throttle") || m.NoWait) {
		return nil, client.Usagef("%s: --dry-run moves nothing: leave --throttle and --no-wait out", what)
	}
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	return func(ctx context.Context, a *admin.Admin, p admin.Proposal) error {
		if format == client.FormatJSON || len(p.Plan.Partitions) > 0 {
			if err := admin.Write(stdout, format, p); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "%s: %s\n", c.App.Name, p.Summary())
		if dry || len(p.Plan.Partitions) == 0 {
			if dry && len(p.Plan.Partitions) > 0 {
				fmt.Fprintf(stderr, "%s: dry run, nothing moved: leave --dry-run out to move\n", c.App.Name)
			}
			return nil
		}
		return a.RunProposal(ctx, p, m)
	}, nil
}
