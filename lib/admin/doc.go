// Package admin is the logic of mqctl: each command (topics, configs,
// records, partitions, cluster, groups, queues, ACLs) is a method of Admin
// that talks to the broker through kadm and returns a result value, and
// each result knows how to print itself as an aligned table (for people)
// or as JSON (for scripts). cmd/mqctl only wires flags to these methods.
//
// The JSON shapes are a stable contract (documented in mqctl's man page):
// fields are only ever added, never renamed or removed. Lists are sorted
// (topics by name, partitions by number, configs by name) so output is
// deterministic.
//
// Errors follow lib/client: a usage mistake is client.Usagef (exit 2), a
// refusal by the broker client.Failf (exit 1). When a command acts on
// several topics and only some fail, the result holds every outcome and
// the error names the failures, so stdout shows what happened and the exit
// status is still 1. ClusterHealth works the same way: a degraded cluster
// is its Health (printed) with a client.Failf error (exit 1); the judgement
// itself is assessHealth, a pure function of what the broker said.
//
// The describes keep working while part of the cluster is down: what
// belongs to one broker (a leader's offsets, a broker's log directories
// and API versions) is asked of that broker by itself, within a bound
// (5 s), so a broker that does not answer costs its own part, said in
// words ("leader 3 unreachable: connection refused", STATE
// "unreachable"), and not the command. Only when no broker answers does a
// command end with exit 3. ClusterDescription.NoQuorum and the
// "unreachable" state are how mqtail shows the same judgement.
//
// With Retrying (mqctl: for up to client.RetryTimeout) a retriable answer
// of a broker that answered is asked again, as every Kafka client does,
// and the command says once on stderr what it waits for ("mqctl: waiting
// up to 30s: topic s10 partition 3: LEADER_NOT_AVAILABLE: …"): a leader
// still opening its partitions after a restart or one that no longer
// leads a partition (the offsets of the describes, reset-offsets, queue
// reset and records delete), a group coordinator that is loading or
// moved (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR). A partition with
// no leader at all is waited for only by the commands that need its
// offsets (group reset-offsets, queue reset, queue dlq replay); the
// describes show it as it is, at once. A broker that does not answer is
// never asked again: its part is reported as unreachable, as above. What
// is still retriable when the wait ends is reported as before the wait.
// Without Retrying (mqtail, whose next refresh asks again) every question
// is asked once.
//
// Adding partitions (AlterTopics with Partitions) is the one-way door
// among the topic commands: it moves keys, since a keyed record's
// partition is murmur2(key) mod the count. Before any topic grows,
// AlterTopics says so on the request's Warn writer, with SampleKeys reads
// the recent records of each growing topic (sampleKeys, bounded in
// records, time and bytes) and counts the keys that move with kgo's own
// partitioner (countMoves), then goes on only with Execute or when Ask
// says yes; with neither it refuses with a usage error before reading
// anything. DryRun sends the same requests validate-only, so the broker
// still checks them and nothing changes. A count that does not grow a
// topic is not warned about: the broker refuses it as it always did.
//
// Moving partitions (partition reassign, KIP-455) has one pure core,
// Place (plan.go): given the brokers (with racks) and every partition's
// replicas and size, it returns where the replicas should be, keeping
// replication factors. With balance it evens out replicas and preferred
// leaders moving as few replicas (and bytes) as it can, and its output
// placed again moves nothing; without (a decommission) only the replicas
// of brokers left out move. --generate, cluster rebalance and broker
// decommission all plan with it. Plans are Kafka's reassignment JSON
// (Plan, ParsePlan), so kafka-reassign-partitions reads ours and we read
// its. ExecuteReassignment submits a plan with AlterPartitionReassignments
// after refusing one that names what the cluster lacks (a usage error);
// its throttle is Kafka's: the rate as the brokers' dynamic configs
// leader/follower.replication.throttled.rate, the moving replicas as the
// topics' leader/follower.replication.throttled.replicas (merged with
// what is there). A broker that is fenced or does not answer gets its
// rates through another broker (alterDownBrokerConfigs): dynamic broker
// configs live in the controller's image, and it applies them when it is
// back. The throttles are removed, only where set dynamically,
// by clearThrottles once no move needs them: a topic's when none of its
// partitions moves, the brokers' when nothing moves in the cluster;
// --verify, --watch and --cancel call it. WatchReassignment measures a
// move by the bytes its adding replicas hold against its leader's
// (DescribeLogDirs). ProposeRebalance and ProposeDecommission plan with
// Place over every partition and the live brokers (without the broker
// leaving, for a decommission), RunProposal executes and watches, and
// DescribeBrokerLoads (broker describe) counts what each broker of
// DescribeBrokers holds.
//
// One group id names one group of one type: ResetOffsets refuses a share
// group (one its coordinator knows or with share-partition state), whose
// start offsets ResetQueue moves instead; both plan with planReset.
package admin
