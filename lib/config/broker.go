package config

import (
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Broker holds mqd's settings. Field comments name the Kafka property; the
// defaults are Kafka's unless the comment says otherwise. Build one with
// Defaults or Load and change it with Set, which validates and records that
// the property was set (DescribeBroker reports it as STATIC_BROKER_CONFIG).
// Assigning fields directly also works; Describe* then infer the source by
// comparing with the default.
//
// A Broker is a value: copies may be read concurrently, and Set on one copy
// never changes another.
type Broker struct {
	// Ignored says, for each property of the config file that Kafka has
	// and mq has no use for (process.roles, num.io.threads, ...), where
	// it was and why it means nothing here: Load accepts those, and mqd
	// logs these lines as warnings.
	Ignored []string

	NodeID    int32    // node.id (alias broker.id), default 1
	DataDir   string   // log.dirs (alias log.dir), one directory; default DefaultDataDir
	Listeners []string // listeners: unix:///path, tcp://host:port, ssl://host:port, sasl_plaintext://host:port, sasl_ssl://host:port; default DefaultListeners
	Advertise string   // advertised.listeners: host:port given to clients in Metadata; default the first TCP listener
	Voters    string   // controller.quorum.voters: id@host:port,…; empty = single voter
	LogLevel  string   // log.level (mq): debug|info|warn|error, default info
	LogFormat string   // log.format (mq): text|json, default text

	// TLS of the ssl:// listeners: PEM files, named as librdkafka names
	// them (Kafka's broker reads ssl.keystore.* and ssl.truststore.*
	// stores instead), and Kafka's ssl.client.auth. Read again on SIGHUP.
	SSLCertificateLocation string // ssl.certificate.location: the certificate (and chain)
	SSLKeyLocation         string // ssl.key.location: its private key, unencrypted
	SSLCALocation          string // ssl.ca.location: the CAs client certificates must chain to
	SSLClientAuth          string // ssl.client.auth: none|requested|required, default none
	// SASL of the sasl_plaintext:// and sasl_ssl:// listeners.
	SASLEnabledMechanisms   []string // sasl.enabled.mechanisms, default SCRAM-SHA-256,SCRAM-SHA-512
	SASLPlainAllowPlaintext bool     // sasl.plain.allow.plaintext (mq), default false
	SASLMaxReceiveSize      int32    // sasl.server.max.receive.size, default 524288
	// FailedAuthenticationDelay is connection.failed.authentication.delay.ms, default 100 ms.
	FailedAuthenticationDelay time.Duration

	// SuperUsers is Kafka's super.users: principals separated by ';'
	// (User:alice;User:CN=ops), allowed everything whatever the ACLs.
	SuperUsers string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: "true",
	// "false", or "" (the default) for AllowEveryone's choice by the
	// listeners.
	AllowEveryoneIfNoACLFound string

	// The node's identity among the nodes (mq): PEM files of its
	// certificate (serverAuth and clientAuth), its key, and the cluster
	// CA. Set, the controller port (Raft and the controller RPCs) is
	// mutual TLS and accepts only nodes of that CA, each speaking only
	// for its own node ID. Read again on SIGHUP. Separate from ssl.*: the
	// client CAs of the Kafka listeners must not make a client a node.
	ControllerSSLCertificateLocation string // controller.ssl.certificate.location
	ControllerSSLKeyLocation         string // controller.ssl.key.location
	ControllerSSLCALocation          string // controller.ssl.ca.location
	// InterBrokerProtocol is Kafka's security.inter.broker.protocol:
	// PLAINTEXT (the default) or SSL. With SSL a follower fetches from
	// its leader's ssl:// listener presenting the node's certificate
	// (controller.ssl.*), and a leader serves a fetch or Refetch with a
	// replica id only on a connection whose certificate is that node's.
	InterBrokerProtocol string

	// MetricsListen is where Prometheus metrics are served over HTTP,
	// tcp://host:port (metrics.listen, mq); empty (the default): not served.
	MetricsListen string
	// MetricsPartitionSeries keeps the per-partition and per-group-partition
	// series in the metrics (metrics.partition.series, mq), default true.
	MetricsPartitionSeries bool

	NumPartitions            int32         // num.partitions, default 1
	DefaultReplicationFactor int16         // default.replication.factor, default 1
	AutoCreateTopics         bool          // auto.create.topics.enable, default true
	MinInsyncReplicas        int32         // min.insync.replicas, default 1
	UncleanLeaderElection    bool          // unclean.leader.election.enable, default false
	MessageMaxBytes          int32         // message.max.bytes, default 1048588
	SocketRequestMaxBytes    int32         // socket.request.max.bytes, default 104857600
	QueuedMaxRequestBytes    int64         // queued.max.request.bytes, default 256 MiB (mq; Kafka's is -1, no bound); ≤ 0: no bound
	ConnectionsMaxIdle       time.Duration // connections.max.idle.ms, default 10 min
	// Connection limits of the Kafka listeners (Kafka's names). mq's
	// MaxConnections default 0 means three quarters of the open-files
	// limit that log.max.open.files leaves (lib/node).
	MaxConnections               int32  // max.connections, default 0 (mq; Kafka's is 2147483647)
	MaxConnectionsPerIP          int32  // max.connections.per.ip, default 2147483647
	MaxConnectionsPerIPOverrides string // max.connections.per.ip.overrides: ip:count,…; see ParseConnectionOverrides
	// Caps on what one request, and the cluster, may hold (mq).
	MaxPartitionsPerRequest    int32         // max.partitions.per.request, default 10000
	MaxPartitions              int32         // max.partitions, default 200000
	AutoCreateTopicsPerRequest int32         // auto.create.topics.max.per.request, default 10
	LogSegmentBytes            int64         // log.segment.bytes, default 1 GiB, at least 14
	LogRollMS                  int64         // log.roll.ms, else log.roll.hours; default 7 days
	LogRetentionMS             int64         // log.retention.ms, else .minutes, else .hours; default 168 h; -1 forever
	LogRetentionBytes          int64         // log.retention.bytes, default -1 (no limit)
	LogRetentionCheckInterval  time.Duration // log.retention.check.interval.ms, default 5 min
	// Tiered storage (topics with remote.storage.enable; lib/tier).
	RemoteLogStorageURL          string        // remote.log.storage.url: "" is file://DATA_DIR/remote-log (RemoteStorageURL)
	RemoteLogReaderCacheBytes    int64         // remote.log.reader.cache.bytes, default 256 MiB
	RemoteLogReaderTimeout       time.Duration // remote.log.reader.timeout.ms (mq), default 10 s
	RemoteLogManagerTaskInterval time.Duration // remote.log.manager.task.interval.ms, default 30 s
	LogScrubBytesPerSec          int64         // log.scrub.bytes.per.sec (mq), default 16 MiB/s; 0 off
	LogCleanerThreads            int32         // log.cleaner.threads, default 1; 0 turns compaction off
	LogMaxOpenFiles              int32         // log.max.open.files (mq): segment descriptors kept open, default 0 = half of RLIMIT_NOFILE at start
	LogCleanerDedupeBufferSize   int64         // log.cleaner.dedupe.buffer.size, default 128 MiB, shared by the threads
	LogCleanerBackoff            time.Duration // log.cleaner.backoff.ms, default 15 s
	LogScrubInterval             time.Duration // log.scrub.interval.ms (mq), default 7 days
	LogFlushPolicy               string        // log.flush.policy (mq): os|interval|always, default os
	LogFlushInterval             time.Duration // log.flush.interval.ms, default 1 s (mq; Kafka's is "never")
	LogIndexIntervalBytes        int32         // log.index.interval.bytes, default 4096
	LogMessageTimestampType      string        // log.message.timestamp.type: CreateTime|LogAppendTime, default CreateTime
	OffsetsTopicNumPartitions    int32         // offsets.topic.num.partitions, default 50
	OffsetsRetention             time.Duration // offsets.retention.minutes, default 7 days
	GroupInitialRebalanceDelay   time.Duration // group.initial.rebalance.delay.ms, default 3 s
	GroupInitialRebalanceAlone   time.Duration // group.initial.rebalance.alone.ms (mq), default 500 ms; 0 off

	// Share groups (KIP-932): the defaults of their group configs.
	ShareRecordLockDuration   time.Duration // group.share.record.lock.duration.ms, default 30 s
	ShareDeliveryAttemptLimit int32         // group.share.delivery.attempt.limit, default 5
	SharePartitionMaxLocks    int32         // group.share.partition.max.record.locks, default 2000
	ShareSessionTimeout       time.Duration // group.share.session.timeout.ms, default 45 s
	ShareHeartbeatInterval    time.Duration // group.share.heartbeat.interval.ms, default 5 s
	ShareStateTopicPartitions int32         // share.coordinator.state.topic.num.partitions, default 50

	// Transactions (KIP-98): the transaction coordinator.
	TransactionStateTopicPartitions   int32         // transaction.state.log.num.partitions, default 50
	TransactionStateReplicationFactor int16         // transaction.state.log.replication.factor, default 3 (at most the live brokers)
	TransactionMaxTimeout             time.Duration // transaction.max.timeout.ms, default 15 min
	TransactionalIDExpiration         time.Duration // transactional.id.expiration.ms, default 7 days
	TransactionAbortCheckInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms, default 10 s
	TransactionVersion                int16         // transaction.version (mq; Kafka's feature level, KIP-1022), default 2: the protocol ApiVersions offers transactional clients

	// The cluster: liveness, replication, leadership.
	RaftAddress                            string        // controller.raft.address (mq): this node's Raft host:port when it is not a voter
	Rack                                   string        // broker.rack, default none
	BrokerSessionTimeout                   time.Duration // broker.session.timeout.ms, default 9 s
	BrokerHeartbeatInterval                time.Duration // broker.heartbeat.interval.ms, default 2 s
	ProcessProbe                           bool          // broker.process.probe.enable (mq), default true
	ControlledShutdown                     bool          // controlled.shutdown.enable, default true
	ControlledShutdownTimeout              time.Duration // controlled.shutdown.timeout.ms (mq), default 30 s
	ReplicaLagTime                         time.Duration // replica.lag.time.max.ms, default 30 s
	TxnPartitionVerification               bool          // transaction.partition.verification.enable, default true: a leader asks the coordinator before a transaction's first batch (KIP-890)
	NumReplicaFetchers                     int32         // num.replica.fetchers, default 1
	ReplicaFetchMaxBytes                   int32         // replica.fetch.max.bytes, default 1 MiB
	ReplicaFetchResponseMaxBytes           int32         // replica.fetch.response.max.bytes, default 10 MiB
	ReplicaFetchWait                       time.Duration // replica.fetch.wait.max.ms, default 500 ms
	ReplicaFetchBackoff                    time.Duration // replica.fetch.backoff.ms, default 1 s
	ReplicaHighWatermarkCheckpointInterval time.Duration // replica.high.watermark.checkpoint.interval.ms, default 5 s
	AutoLeaderRebalance                    bool          // auto.leader.rebalance.enable, default true
	LeaderImbalanceCheckInterval           time.Duration // leader.imbalance.check.interval.seconds, default 300 s
	OffsetsTopicReplicationFactor          int16         // offsets.topic.replication.factor, default 3 (at most the live brokers)
	// The replication throttle (KIP-73), in bytes per second, all the
	// throttled replicas of this broker together; default
	// replica.Unlimited (math.MaxInt64), no throttle.
	LeaderReplicationThrottledRate   int64 // leader.replication.throttled.rate
	FollowerReplicationThrottledRate int64 // follower.replication.throttled.rate
	// ReplicationThrottleAutoTarget (replication.throttle.auto.target.ms,
	// mq): when above 0, this broker sets the two rates of its throttled
	// replicas itself, between 1 MiB/s and the rates above, to keep the
	// p99 of its acks=all produces' wait for the high-water mark at most
	// this, and a catch-up's share beyond it at most 12.5 ms for one
	// 100 ms step (lib/partition's auto throttle); default 0, off.
	ReplicationThrottleAutoTarget time.Duration

	// Extra holds known, valid properties that have no field (for example
	// log.cleanup.policy, compression.type, log.cleaner.*), by name, in
	// canonical form. Unknown properties are an error at load time.
	Extra map[string]string

	// explicit records every property set through Set, Load or
	// WithDynamic: its canonical value and where it came from. Copy on
	// write: it may be shared with copies of this Broker.
	explicit map[string]setting
}

type setting struct {
	value  string
	source Source
}

// Source says where a config value came from, as DescribeConfigs reports it.
type Source int8

// Sources, with the numbers of Kafka's DescribeConfigs ConfigSource.
const (
	SourceDynamicTopic         Source = 1 // DYNAMIC_TOPIC_CONFIG: a topic override
	SourceDynamicBroker        Source = 2 // DYNAMIC_BROKER_CONFIG: altered at runtime for this broker
	SourceDynamicDefaultBroker Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: altered at runtime for all brokers
	SourceStaticBroker         Source = 4 // STATIC_BROKER_CONFIG: config file, MQ_* environment or flags
	SourceDefault              Source = 5 // DEFAULT_CONFIG
)

// Entry is one config as DescribeConfigs shows it.
type Entry struct {
	Name      string
	Value     *string // nil: no value (Kafka's null), e.g. log.retention.ms when unset
	Source    Source
	ReadOnly  bool // cannot be altered at runtime
	Sensitive bool
	Type      int8 // Kafka's ConfigType: TypeBoolean, TypeString, …
	Doc       string
}

// brokerProperty describes one broker property.
type brokerProperty struct {
	name  string
	alias string // this name is another spelling of alias (broker.id → node.id)
	kind  kind
	def   string // default, canonical text
	// noDefault: Kafka shows no value unless set (log.retention.ms, whose
	// default comes from log.retention.hours).
	noDefault bool
	// envDefault: the default depends on the environment (log.dirs, listeners).
	envDefault bool
	dynamic    bool // may be altered at runtime (ValidateBrokerDynamicConfig)
	doc        string
	// set stores a canonical value in the Broker's field; nil keeps the
	// value in Extra.
	set func(b *Broker, v string)
	// get is the effective value of a field-backed property; nil: the
	// explicit value or the default.
	get func(b *Broker) string
}

func i32(v string) int32 { n, _ := strconv.ParseInt(v, 10, 32); return int32(n) }
func i64(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
func ms(v string) time.Duration {
	n := i64(v)
	if n > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Millisecond
}
func fmtInt[T ~int16 | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }
func fmtMS(d time.Duration) string                  { return strconv.FormatInt(d.Milliseconds(), 10) }

// groups lists the properties that give one value in different units, most
// specific first: the first one set wins, like Kafka (ms > minutes > hours).
var groups = map[string][]string{
	"log.retention.ms": {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	"log.roll.ms":      {"log.roll.ms", "log.roll.hours"},
}

// groupMS is the value in milliseconds of the group led by lead: the most
// specific member set explicitly, else the default. Negative retention
// means forever (-1).
func (b *Broker) groupMS(lead string, def int64) int64 {
	unit := map[string]int64{"ms": 1, "minutes": 60_000, "hours": 3_600_000}
	for _, name := range groups[lead] {
		s, ok := b.explicit[name]
		if !ok {
			continue
		}
		n := i64(s.value)
		if n < 0 {
			return -1
		}
		u := unit[name[strings.LastIndexByte(name, '.')+1:]]
		if n > math.MaxInt64/u {
			return math.MaxInt64
		}
		return n * u
	}
	return def
}

const week = 7 * 24 * 3_600_000

func setRetention(b *Broker, _ string) { b.LogRetentionMS = b.groupMS("log.retention.ms", week) }
func setRoll(b *Broker, _ string)      { b.LogRollMS = b.groupMS("log.roll.ms", week) }

const (
	maxInt32 = math.MaxInt32
	maxLong  = "9223372036854775807"
)

// brokerProperties is every broker property mq knows, sorted by name.
var brokerProperties = sortedProperties([]brokerProperty{
	// Identity and plumbing: fixed while mqd runs.
	{name: "node.id", kind: intAtLeast(0), def: "1", doc: "The node's ID in the cluster.",
		set: func(b *Broker, v string) { b.NodeID = i32(v) }, get: func(b *Broker) string { return fmtInt(b.NodeID) }},
	{name: "broker.id", alias: "node.id"},
	{name: "log.dirs", kind: directory, envDefault: true, doc: "The directory holding the partition logs and the controller's state.",
		set: func(b *Broker, v string) { b.DataDir = v }, get: func(b *Broker) string { return b.DataDir }},
	{name: "log.dir", alias: "log.dirs"},
	{name: "listeners", kind: listenerList, envDefault: true, doc: "Addresses to listen on: unix:///path, tcp://host:port, ssl://host:port (TCP with TLS: ssl.certificate.location and ssl.key.location; Kafka's SSL listener), " +
		"sasl_plaintext://host:port (SASL authentication, sasl.enabled.mechanisms, without TLS; Kafka's SASL_PLAINTEXT) and sasl_ssl://host:port (TLS as on ssl://, then SASL; Kafka's SASL_SSL); port 0 picks a free port.",
		set: func(b *Broker, v string) { b.Listeners = strings.Split(v, ",") }, get: func(b *Broker) string { return strings.Join(b.Listeners, ",") }},
	{name: "advertised.listeners", kind: advertised, doc: "The host:port given to clients in Metadata; empty: the first TCP listener's address.",
		set: func(b *Broker, v string) { b.Advertise = v }, get: func(b *Broker) string { return b.Advertise }},
	{name: "ssl.certificate.location", kind: filePath, doc: "The PEM file of the certificate the ssl:// listeners present, followed by its intermediate CAs; read again on SIGHUP. " +
		"librdkafka's name: Kafka's broker reads ssl.keystore.location instead, a JKS or PKCS #12 store, which mq does not read.",
		set: func(b *Broker, v string) { b.SSLCertificateLocation = v }, get: func(b *Broker) string { return b.SSLCertificateLocation }},
	{name: "ssl.key.location", kind: filePath, doc: "The PEM file of the private key of ssl.certificate.location (PKCS #8, PKCS #1 or SEC 1; not encrypted), readable by mqd alone; read again on SIGHUP (librdkafka's name).",
		set: func(b *Broker, v string) { b.SSLKeyLocation = v }, get: func(b *Broker) string { return b.SSLKeyLocation }},
	{name: "ssl.ca.location", kind: filePath, doc: "The PEM file of the CA certificates that client certificates must chain to, when ssl.client.auth is requested or required; read again on SIGHUP. " +
		"librdkafka's name: Kafka's broker reads ssl.truststore.location instead.",
		set: func(b *Broker, v string) { b.SSLCALocation = v }, get: func(b *Broker) string { return b.SSLCALocation }},
	{name: "ssl.client.auth", kind: oneOf("none", "requested", "required"), def: "none", doc: "Whether the ssl:// listeners ask clients for a certificate: none; requested (a client may connect without one, but one it sends must chain to ssl.ca.location); " +
		"required (a client without such a certificate is refused). A verified certificate's subject is the connection's principal, User:CN=...,O=... (Kafka's default mapping, the whole distinguished name).",
		set: func(b *Broker, v string) { b.SSLClientAuth = v }, get: func(b *Broker) string { return b.SSLClientAuth }},
	{name: "sasl.enabled.mechanisms", kind: saslMechanisms, def: "SCRAM-SHA-256,SCRAM-SHA-512", doc: "The SASL mechanisms the sasl_plaintext:// and sasl_ssl:// listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. " +
		"Users and their SCRAM credentials are created with AlterUserScramCredentials (mqctl user create); PLAIN checks a password against the same credentials, and is offered on sasl_ssl:// only unless sasl.plain.allow.plaintext.",
		set: func(b *Broker, v string) { b.SASLEnabledMechanisms = strings.Split(v, ",") }, get: func(b *Broker) string { return strings.Join(b.SASLEnabledMechanisms, ",") }},
	{name: "sasl.plain.allow.plaintext", kind: boolean, def: "false", doc: "Offer PLAIN on sasl_plaintext:// listeners too, where the password crosses the network unencrypted; false offers it on sasl_ssl:// only (mq).",
		set: func(b *Broker, v string) { b.SASLPlainAllowPlaintext = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.SASLPlainAllowPlaintext) }},
	{name: "sasl.server.max.receive.size", kind: intAtLeast(10), def: "524288", doc: "The largest request frame, in bytes, a connection on a SASL listener may send before it has authenticated; a larger one closes the connection before it is read.",
		set: func(b *Broker, v string) { b.SASLMaxReceiveSize = i32(v) }, get: func(b *Broker) string { return fmtInt(b.SASLMaxReceiveSize) }},
	{name: "connection.failed.authentication.delay.ms", kind: longAtLeast(0), def: "100", doc: "How long a refused SASL authentication waits before its answer and the close of the connection, so that a client guessing passwords gets only a few guesses a second per connection; 0: none. Other connections are not held up.",
		set: func(b *Broker, v string) { b.FailedAuthenticationDelay = ms(v) }, get: func(b *Broker) string { return fmtMS(b.FailedAuthenticationDelay) }},
	{name: "super.users", kind: principalList, doc: "Principals allowed every operation whatever the ACLs, separated by ';': User:alice;User:CN=ops,O=example. " +
		"Root (User:uid:0) and mqd's own user (User:uid:N) are super users on the Unix socket besides, so the first ACLs can be created from the machine.",
		set: func(b *Broker, v string) { b.SuperUsers = v }, get: func(b *Broker) string { return b.SuperUsers }},
	{name: "allow.everyone.if.no.acl.found", kind: oneOf("", "true", "false"), doc: "Whether an operation on a resource no ACL matches is allowed to every principal. " +
		"Empty (the default): true when every listener is tcp:// or unix:// (nothing authenticates, so nothing changes until ACLs are created), false once an ssl://, sasl_plaintext:// or sasl_ssl:// listener exists.",
		set: func(b *Broker, v string) { b.AllowEveryoneIfNoACLFound = v }, get: func(b *Broker) string { return b.AllowEveryoneIfNoACLFound }},
	{name: "controller.ssl.certificate.location", kind: filePath, doc: "The PEM file of this node's certificate among the nodes (extended key usages serverAuth and clientAuth), followed by its intermediate CAs. " +
		"With controller.ssl.key.location and controller.ssl.ca.location, the controller port (Raft and the controller RPCs) speaks mutual TLS: every node must present a certificate of that CA, " +
		"and each node's certificate speaks only for its node ID, bound at its first registration. Read again on SIGHUP (mq).",
		set: func(b *Broker, v string) { b.ControllerSSLCertificateLocation = v }, get: func(b *Broker) string { return b.ControllerSSLCertificateLocation }},
	{name: "controller.ssl.key.location", kind: filePath, doc: "The PEM file of the private key of controller.ssl.certificate.location (not encrypted), readable by mqd alone; read again on SIGHUP (mq).",
		set: func(b *Broker, v string) { b.ControllerSSLKeyLocation = v }, get: func(b *Broker) string { return b.ControllerSSLKeyLocation }},
	{name: "controller.ssl.ca.location", kind: filePath, doc: "The PEM file of the cluster CA: the certificates of the other nodes must chain to it. Keep it apart from ssl.ca.location, the Kafka clients' CA, " +
		"unless every client certificate it signs may act as a node. Read again on SIGHUP (mq).",
		set: func(b *Broker, v string) { b.ControllerSSLCALocation = v }, get: func(b *Broker) string { return b.ControllerSSLCALocation }},
	{name: "security.inter.broker.protocol", kind: oneOf("PLAINTEXT", "SSL"), def: "PLAINTEXT", doc: "How brokers fetch from each other. PLAINTEXT: over the leader's advertised (tcp://) listener, and a fetch with a replica id is served to any connection. " +
		"SSL: a follower fetches from its leader's ssl:// listener, presenting this node's certificate (controller.ssl.certificate.location; the leader's certificate must chain to controller.ssl.ca.location), " +
		"and a leader serves a fetch with a replica id, or a Refetch, only on a connection whose client certificate is the one bound to that replica's node ID (CLUSTER_AUTHORIZATION_FAILED otherwise). " +
		"SSL needs controller.ssl.*, an ssl:// listener and ssl.client.auth requested or required, with ssl.ca.location holding the cluster CA.",
		set: func(b *Broker, v string) { b.InterBrokerProtocol = v }, get: func(b *Broker) string { return b.InterBrokerProtocol }},
	{name: "controller.quorum.voters", kind: voterList, doc: "The Raft voters, id@host:port,…; empty: this node alone.",
		set: func(b *Broker, v string) { b.Voters = v }, get: func(b *Broker) string { return b.Voters }},
	{name: "log.level", kind: oneOf("debug", "info", "warn", "error"), def: "info", doc: "The least severe level of mqd's own log messages.",
		set: func(b *Broker, v string) { b.LogLevel = v }, get: func(b *Broker) string { return b.LogLevel }},
	{name: "log.format", kind: oneOf("text", "json"), def: "text", doc: "The format of mqd's own log messages on stderr.",
		set: func(b *Broker, v string) { b.LogFormat = v }, get: func(b *Broker) string { return b.LogFormat }},
	{name: "metrics.listen", kind: metricsListener, doc: "Serve Prometheus metrics over HTTP at /metrics on tcp://host:port (port 0 picks a free port); empty: no metrics (mq). docs/metrics.md lists them.",
		set: func(b *Broker, v string) { b.MetricsListen = v }, get: func(b *Broker) string { return b.MetricsListen }},
	{name: "metrics.partition.series", kind: boolean, def: "true", doc: "Include the series with a partition label (mq_partition_*, and the per-partition group lag, which becomes one series per group when false), so that a node with very many partitions keeps its metrics small (mq).",
		set: func(b *Broker, v string) { b.MetricsPartitionSeries = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.MetricsPartitionSeries) }},
	{name: "socket.request.max.bytes", kind: intAtLeast(1), def: "104857600", doc: "The largest request accepted, in bytes.",
		set: func(b *Broker, v string) { b.SocketRequestMaxBytes = i32(v) }, get: func(b *Broker) string { return fmtInt(b.SocketRequestMaxBytes) }},
	{name: "queued.max.request.bytes", kind: anyLong, def: "268435456", doc: "The request bytes held in memory at once, across all connections: when they are used up, " +
		"mqd reads no more requests until responses free some. At least socket.request.max.bytes; -1 (or any value up to 0): no bound, Kafka's default. " +
		"mq's default, 256 MiB, holds two requests of the largest default size and many ordinary ones.",
		set: func(b *Broker, v string) { b.QueuedMaxRequestBytes = i64(v) }, get: func(b *Broker) string { return fmtInt(b.QueuedMaxRequestBytes) }},
	{name: "connections.max.idle.ms", kind: longAtLeast(1), def: "600000", doc: "Close connections idle this long.",
		set: func(b *Broker, v string) { b.ConnectionsMaxIdle = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ConnectionsMaxIdle) }},
	{name: "max.connections", kind: intAtLeast(0), def: "0", doc: "The most connections open at once on all the Kafka listeners together, Unix socket included; a connection over it is closed as soon as it is accepted (Kafka instead stops accepting until one closes). " +
		"0, mq's default: three quarters of the open-files limit (RLIMIT_NOFILE) mqd starts with that log.max.open.files leaves, at least 16, so that a flood of connections cannot take the descriptors the logs, the controller and replication need. " +
		"Other brokers' replica fetchers connect to these listeners too and count.",
		set: func(b *Broker, v string) { b.MaxConnections = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MaxConnections) }},
	{name: "max.connections.per.ip", kind: intAtLeast(0), def: "2147483647", doc: "The most TCP connections open at once from one IP address; a connection over it is closed as soon as it is accepted. " +
		"Unix socket connections do not count. 0: none, except from the addresses of max.connections.per.ip.overrides, which must then be set.",
		set: func(b *Broker, v string) { b.MaxConnectionsPerIP = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MaxConnectionsPerIP) }},
	{name: "max.connections.per.ip.overrides", kind: connectionOverrides, def: "", doc: "Bounds that replace max.connections.per.ip for some addresses: a comma-separated list of ip:count (an IPv6 address in brackets), e.g. 127.0.0.1:200,[::1]:200. " +
		"IP addresses only: Kafka also takes host names, which mq refuses.",
		set: func(b *Broker, v string) { b.MaxConnectionsPerIPOverrides = v }, get: func(b *Broker) string { return b.MaxConnectionsPerIPOverrides }},
	{name: "max.partitions.per.request", kind: intAtLeast(1), def: "10000", doc: "The most partitions one CreateTopics or CreatePartitions request may add, all its topics together, a topic counting at least one (mq; Kafka 4 has the same bound, fixed); " +
		"a request over it is refused whole, every topic with POLICY_VIOLATION, before anything else is checked, validate_only or not.",
		set: func(b *Broker, v string) { b.MaxPartitionsPerRequest = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MaxPartitionsPerRequest) }},
	{name: "max.partitions", kind: intAtLeast(1), def: "200000", doc: "The most partitions the cluster may hold, all topics together, internal ones included (mq): a CreateTopics, CreatePartitions or automatic creation that would go over it is refused with POLICY_VIOLATION. " +
		"Checked by the broker that handles the request against its image, so concurrent requests through different brokers may pass it by one request's worth.",
		set: func(b *Broker, v string) { b.MaxPartitions = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MaxPartitions) }},
	{name: "auto.create.topics.max.per.request", kind: intAtLeast(0), def: "10", doc: "The most topics one Metadata request may create with auto.create.topics.enable (mq): the others it names are answered UNKNOWN_TOPIC_OR_PARTITION, " +
		"which clients retry, and are created by their next requests. 0 creates none.",
		set: func(b *Broker, v string) { b.AutoCreateTopicsPerRequest = i32(v) }, get: func(b *Broker) string { return fmtInt(b.AutoCreateTopicsPerRequest) }},
	{name: "remote.log.storage.url", kind: storeURL, def: "", doc: "The remote store of topics with remote.storage.enable (mq): file:///absolute/path, or s3://bucket?endpoint=URL&region=R (any S3-compatible store; " +
		"credentials only from the environment and the AWS credential files, as the AWS SDK finds them). Empty: file://DATA_DIR/remote-log, a directory on this machine.",
		set: func(b *Broker, v string) { b.RemoteLogStorageURL = v }, get: func(b *Broker) string { return b.RemoteLogStorageURL }},
	{name: "remote.log.reader.cache.bytes", kind: longAtLeast(0), def: "268435456", doc: "The bound of the cache of remote segment bytes that Fetch reads below the local log start go through (mq).",
		set: func(b *Broker, v string) { b.RemoteLogReaderCacheBytes = i64(v) }, get: func(b *Broker) string { return fmtInt(b.RemoteLogReaderCacheBytes) }},
	{name: "remote.log.reader.timeout.ms", kind: longAtLeast(1), def: "10000", doc: "How long one remote read (a Fetch's or a ListOffsets' below the local log start) waits for the remote store before the partition is answered KAFKA_STORAGE_ERROR, which clients retry (mq).",
		set: func(b *Broker, v string) { b.RemoteLogReaderTimeout = ms(v) }, get: func(b *Broker) string { return fmtMS(b.RemoteLogReaderTimeout) }},
	{name: "remote.log.manager.task.interval.ms", kind: longAtLeast(1), def: "30000", doc: "How often a leader copies the closed segments of its tiered partitions to the remote store and applies retention to their remote part; after a failure it tries again with a growing backoff.",
		set: func(b *Broker, v string) { b.RemoteLogManagerTaskInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.RemoteLogManagerTaskInterval) }},
	{name: "log.retention.check.interval.ms", kind: longAtLeast(1), def: "300000", doc: "How often retention deletes old segments.",
		set: func(b *Broker, v string) { b.LogRetentionCheckInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.LogRetentionCheckInterval) }},
	{name: "log.scrub.bytes.per.sec", kind: longAtLeast(0), def: "16777216", doc: "How fast (bytes per second) the scrubber reads the partition logs to check every batch's CRC, so that damage is found before a consumer meets it (mq); 0 turns it off. Reads check what mqd has not checked yet either way.",
		set: func(b *Broker, v string) { b.LogScrubBytesPerSec = i64(v) }, get: func(b *Broker) string { return fmtInt(b.LogScrubBytesPerSec) }},
	{name: "log.scrub.interval.ms", kind: longAtLeast(1), def: "604800000", doc: "How often the scrubber reads every byte again after its first pass since mqd started (mq).",
		set: func(b *Broker, v string) { b.LogScrubInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.LogScrubInterval) }},
	{name: "log.max.open.files", kind: intAtLeast(0), def: "0", doc: "Most segment data files kept open at once, over all partitions (mq); idle ones are closed, least recently used first, and opened again when next read or appended to. 0: half of the open-files limit (RLIMIT_NOFILE) mqd starts with, at least 16.",
		set: func(b *Broker, v string) { b.LogMaxOpenFiles = i32(v) }, get: func(b *Broker) string { return fmtInt(b.LogMaxOpenFiles) }},
	{name: "log.cleaner.threads", kind: intAtLeast(0), def: "1", doc: "Threads compacting the logs of topics with cleanup.policy compact; 0 turns compaction off.",
		set: func(b *Broker, v string) { b.LogCleanerThreads = i32(v) }, get: func(b *Broker) string { return fmtInt(b.LogCleanerThreads) }},
	{name: "log.cleaner.dedupe.buffer.size", kind: longAtLeast(1 << 20), def: "134217728", doc: "Memory for the cleaner threads' key maps (about 48 bytes a key), shared among them; a pass that fills its share cleans up to where it filled.",
		set: func(b *Broker, v string) { b.LogCleanerDedupeBufferSize = i64(v) }, get: func(b *Broker) string { return fmtInt(b.LogCleanerDedupeBufferSize) }},
	{name: "log.cleaner.backoff.ms", kind: longAtLeast(1), def: "15000", doc: "How long a cleaner thread waits when no log needs cleaning.",
		set: func(b *Broker, v string) { b.LogCleanerBackoff = ms(v) }, get: func(b *Broker) string { return fmtMS(b.LogCleanerBackoff) }},
	{name: "offsets.topic.num.partitions", kind: intAtLeast(1), def: "50", doc: "Partitions of the __consumer_offsets topic (fixed once it exists).",
		set: func(b *Broker, v string) { b.OffsetsTopicNumPartitions = i32(v) }, get: func(b *Broker) string { return fmtInt(b.OffsetsTopicNumPartitions) }},
	{name: "offsets.retention.minutes", kind: intAtLeast(1), def: "10080", doc: "How long committed offsets of an empty group are kept.",
		set: func(b *Broker, v string) { b.OffsetsRetention = time.Duration(i64(v)) * time.Minute },
		get: func(b *Broker) string { return strconv.FormatInt(int64(b.OffsetsRetention/time.Minute), 10) }},
	{name: "group.initial.rebalance.delay.ms", kind: intAtLeast(0), def: "3000", doc: "How long a new group waits for more members before its first rebalance.",
		set: func(b *Broker, v string) { b.GroupInitialRebalanceDelay = ms(v) }, get: func(b *Broker) string { return fmtMS(b.GroupInitialRebalanceDelay) }},
	{name: "group.initial.rebalance.alone.ms", kind: intAtLeast(0), def: "500", doc: "How long the first member of a new group waits alone before its first rebalance (mq): when no other member has come by then, it does not wait the rest of group.initial.rebalance.delay.ms; once another comes, the whole delay applies. 0 turns this off.",
		set: func(b *Broker, v string) { b.GroupInitialRebalanceAlone = ms(v) }, get: func(b *Broker) string { return fmtMS(b.GroupInitialRebalanceAlone) }},
	{name: "group.share.record.lock.duration.ms", kind: intBetween(100, 3600000), def: "30000", doc: "How long a share group member holds the records it acquired before they become available to others again; the default of the group config share.record.lock.duration.ms.",
		set: func(b *Broker, v string) { b.ShareRecordLockDuration = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ShareRecordLockDuration) }},
	{name: "group.share.delivery.attempt.limit", kind: intBetween(1, 100), def: "5", doc: "How many times a share group delivers a record before archiving it (and dead-lettering it, with errors.deadletterqueue.topic.name); the default of the group config share.delivery.count.limit.",
		set: func(b *Broker, v string) { b.ShareDeliveryAttemptLimit = i32(v) }, get: func(b *Broker) string { return fmtInt(b.ShareDeliveryAttemptLimit) }},
	{name: "group.share.partition.max.record.locks", kind: intBetween(1, 100000), def: "2000", doc: "The in-flight window of a share-partition: how far past its start offset records are acquired.",
		set: func(b *Broker, v string) { b.SharePartitionMaxLocks = i32(v) }, get: func(b *Broker) string { return fmtInt(b.SharePartitionMaxLocks) }},
	{name: "group.share.session.timeout.ms", kind: intBetween(1000, 3600000), def: "45000", doc: "A share group member that has not heartbeated for this long leaves the group; the default of share.session.timeout.ms.",
		set: func(b *Broker, v string) { b.ShareSessionTimeout = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ShareSessionTimeout) }},
	{name: "group.share.heartbeat.interval.ms", kind: intBetween(100, 3600000), def: "5000", doc: "How often share group members heartbeat; the default of share.heartbeat.interval.ms.",
		set: func(b *Broker, v string) { b.ShareHeartbeatInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ShareHeartbeatInterval) }},
	{name: "share.coordinator.state.topic.num.partitions", kind: intAtLeast(1), def: "50", doc: "Partitions of the __share_group_state topic (fixed once it exists).",
		set: func(b *Broker, v string) { b.ShareStateTopicPartitions = i32(v) }, get: func(b *Broker) string { return fmtInt(b.ShareStateTopicPartitions) }},
	{name: "transaction.state.log.num.partitions", kind: intAtLeast(1), def: "50", doc: "Partitions of the __transaction_state topic (fixed once it exists): the transaction coordinator of a transactional id is the leader of its partition.",
		set: func(b *Broker, v string) { b.TransactionStateTopicPartitions = i32(v) }, get: func(b *Broker) string { return fmtInt(b.TransactionStateTopicPartitions) }},
	{name: "transaction.state.log.replication.factor", kind: integer(TypeShort, 16, 1, math.MaxInt16), def: "3", doc: "Replication factor of __transaction_state when it is created; fewer when fewer brokers are alive then.",
		set: func(b *Broker, v string) { b.TransactionStateReplicationFactor = int16(i32(v)) }, get: func(b *Broker) string { return fmtInt(b.TransactionStateReplicationFactor) }},
	{name: "transaction.max.timeout.ms", kind: intAtLeast(1), def: "900000", doc: "The longest transaction timeout a producer may ask for (InitProducerId); a longer one is refused with INVALID_TRANSACTION_TIMEOUT.",
		set: func(b *Broker, v string) { b.TransactionMaxTimeout = ms(v) }, get: func(b *Broker) string { return fmtMS(b.TransactionMaxTimeout) }},
	{name: "transactional.id.expiration.ms", kind: intAtLeast(1), def: "604800000", doc: "A transactional id with no transaction and no use for this long is removed from __transaction_state.",
		set: func(b *Broker, v string) { b.TransactionalIDExpiration = ms(v) }, get: func(b *Broker) string { return fmtMS(b.TransactionalIDExpiration) }},
	{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", kind: intAtLeast(1), def: "10000", doc: "How often the transaction coordinator aborts the transactions open longer than their timeout (fencing their producer).",
		set: func(b *Broker, v string) { b.TransactionAbortCheckInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.TransactionAbortCheckInterval) }},
	{name: "transaction.version", kind: integer(TypeShort, 16, 1, 2), def: "2", doc: "The transaction protocol this broker offers clients, Kafka's transaction.version feature (KIP-1022), finalized in ApiVersions: 2 is KIP-890 part 2 (Produce v12, TxnOffsetCommit v5 and EndTxn v5: the partition leaders add a transaction's partitions, and every transaction ends with a new producer epoch); 1 keeps clients on the earlier protocol (AddPartitionsToTxn and AddOffsetsToTxn from the client, the epoch kept between transactions). Give every broker of a cluster the same value (mq).",
		set: func(b *Broker, v string) { b.TransactionVersion = int16(i32(v)) }, get: func(b *Broker) string { return fmtInt(b.TransactionVersion) }},
	{name: "controller.raft.address", kind: advertised, doc: "This node's Raft address (host:port) when it is not one of controller.quorum.voters: it joins the quorum as a non-voter there, so that it holds the cluster metadata too (mq). Voters use their entry in controller.quorum.voters.",
		set: func(b *Broker, v string) { b.RaftAddress = v }, get: func(b *Broker) string { return b.RaftAddress }},
	{name: "broker.rack", kind: rackName, doc: "The rack (or zone) of this broker: the replicas of a new partition go to different racks where there are enough.",
		set: func(b *Broker, v string) { b.Rack = v }, get: func(b *Broker) string { return b.Rack }},
	{name: "broker.session.timeout.ms", kind: longAtLeast(1), def: "9000", doc: "A broker that has not heartbeated to the controller for this long is fenced: its partitions get other leaders.",
		set: func(b *Broker, v string) { b.BrokerSessionTimeout = ms(v) }, get: func(b *Broker) string { return fmtMS(b.BrokerSessionTimeout) }},
	{name: "broker.heartbeat.interval.ms", kind: longAtLeast(1), def: "2000", doc: "How often this broker heartbeats to the controller.",
		set: func(b *Broker, v string) { b.BrokerHeartbeatInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.BrokerHeartbeatInterval) }},
	{name: "broker.process.probe.enable", kind: boolean, def: "true", doc: "When a broker's connection to the active controller ends, the controller dials the broker's Raft port, and fences it at once when the dial is refused or reset (its process is gone); false leaves fencing to broker.session.timeout.ms (mq).",
		set: func(b *Broker, v string) { b.ProcessProbe = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.ProcessProbe) }},
	{name: "controlled.shutdown.enable", kind: boolean, def: "true", doc: "On SIGTERM, move this broker's leaderships to other in-sync replicas before it stops serving.",
		set: func(b *Broker, v string) { b.ControlledShutdown = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.ControlledShutdown) }},
	{name: "controlled.shutdown.timeout.ms", kind: longAtLeast(1), def: "30000", doc: "How long a controlled shutdown waits for the leaderships to move before stopping anyway (mq).",
		set: func(b *Broker, v string) { b.ControlledShutdownTimeout = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ControlledShutdownTimeout) }},
	{name: "transaction.partition.verification.enable", kind: boolean, def: "true", doc: "A partition leader asks the transaction coordinator (AddPartitionsToTxn) whether a producer's transaction is ongoing and includes the partition before it appends the transaction's first batch there, and refuses it with INVALID_TXN_STATE otherwise (KIP-890): no transaction is left open on a partition that its coordinator does not know.",
		set: func(b *Broker, v string) { b.TxnPartitionVerification = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.TxnPartitionVerification) }},
	{name: "replica.lag.time.max.ms", kind: longAtLeast(1), def: "30000", doc: "A follower that has not caught up with the leader for this long leaves the in-sync replicas.",
		set: func(b *Broker, v string) { b.ReplicaLagTime = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ReplicaLagTime) }},
	{name: "num.replica.fetchers", kind: intAtLeast(1), def: "1", doc: "Connections a follower uses to fetch from each leader broker; partitions are spread over them.",
		set: func(b *Broker, v string) { b.NumReplicaFetchers = i32(v) }, get: func(b *Broker) string { return fmtInt(b.NumReplicaFetchers) }},
	{name: "replica.fetch.max.bytes", kind: intAtLeast(1), def: "1048576", doc: "Bytes a follower asks for per partition in one fetch (the first batch comes whole even when larger).",
		set: func(b *Broker, v string) { b.ReplicaFetchMaxBytes = i32(v) }, get: func(b *Broker) string { return fmtInt(b.ReplicaFetchMaxBytes) }},
	{name: "replica.fetch.response.max.bytes", kind: intAtLeast(1), def: "10485760", doc: "Bytes a follower asks for in one fetch, all partitions together.",
		set: func(b *Broker, v string) { b.ReplicaFetchResponseMaxBytes = i32(v) }, get: func(b *Broker) string { return fmtInt(b.ReplicaFetchResponseMaxBytes) }},
	{name: "replica.fetch.wait.max.ms", kind: intAtLeast(0), def: "500", doc: "How long the leader holds a follower's fetch when there is nothing new.",
		set: func(b *Broker, v string) { b.ReplicaFetchWait = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ReplicaFetchWait) }},
	{name: "replica.fetch.backoff.ms", kind: intAtLeast(0), def: "1000", doc: "How long a follower waits after a failed fetch before trying again.",
		set: func(b *Broker, v string) { b.ReplicaFetchBackoff = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ReplicaFetchBackoff) }},
	{name: "replica.high.watermark.checkpoint.interval.ms", kind: longAtLeast(1), def: "5000", doc: "How often each partition's high-water mark is written to disk, so a restarted replica knows it.",
		set: func(b *Broker, v string) { b.ReplicaHighWatermarkCheckpointInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ReplicaHighWatermarkCheckpointInterval) }},
	{name: "auto.leader.rebalance.enable", kind: boolean, def: "true", doc: "Move leadership back to each partition's preferred replica once it is in sync again.",
		set: func(b *Broker, v string) { b.AutoLeaderRebalance = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.AutoLeaderRebalance) }},
	{name: "leader.imbalance.check.interval.seconds", kind: longAtLeast(1), def: "300", doc: "How often the controller looks for partitions not led by their preferred replica.",
		set: func(b *Broker, v string) { b.LeaderImbalanceCheckInterval = time.Duration(i64(v)) * time.Second },
		get: func(b *Broker) string {
			return strconv.FormatInt(int64(b.LeaderImbalanceCheckInterval/time.Second), 10)
		}},
	{name: "offsets.topic.replication.factor", kind: integer(TypeShort, 16, 1, math.MaxInt16), def: "3", doc: "Replication factor of __consumer_offsets when it is created; fewer when fewer brokers are alive then.",
		set: func(b *Broker, v string) { b.OffsetsTopicReplicationFactor = int16(i32(v)) }, get: func(b *Broker) string { return fmtInt(b.OffsetsTopicReplicationFactor) }},
	{name: "default.replication.factor", kind: integer(TypeInt, 32, 1, math.MaxInt16), def: "1", doc: "Replication factor of automatically created topics.",
		set: func(b *Broker, v string) { b.DefaultReplicationFactor = int16(i32(v)) }, get: func(b *Broker) string { return fmtInt(b.DefaultReplicationFactor) }},

	// Cluster-wide behaviour that may be altered at runtime.
	{name: "num.partitions", kind: intAtLeast(1), def: "1", dynamic: true, doc: "Partitions of automatically created topics.",
		set: func(b *Broker, v string) { b.NumPartitions = i32(v) }, get: func(b *Broker) string { return fmtInt(b.NumPartitions) }},
	{name: "auto.create.topics.enable", kind: boolean, def: "true", dynamic: true, doc: "Create a topic on first produce or metadata request for it.",
		set: func(b *Broker, v string) { b.AutoCreateTopics = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.AutoCreateTopics) }},
	{name: "min.insync.replicas", kind: intAtLeast(1), def: "1", dynamic: true, doc: "Default for topics: in-sync replicas needed to accept an acks=all write.",
		set: func(b *Broker, v string) { b.MinInsyncReplicas = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MinInsyncReplicas) }},
	{name: "unclean.leader.election.enable", kind: boolean, def: "false", dynamic: true, doc: "Default for topics: allow a replica outside the ISR to become leader, losing data.",
		set: func(b *Broker, v string) { b.UncleanLeaderElection = v == "true" }, get: func(b *Broker) string { return strconv.FormatBool(b.UncleanLeaderElection) }},
	{name: "message.max.bytes", kind: intAtLeast(0), def: "1048588", dynamic: true, doc: "Default for topics: the largest record batch accepted, in bytes.",
		set: func(b *Broker, v string) { b.MessageMaxBytes = i32(v) }, get: func(b *Broker) string { return fmtInt(b.MessageMaxBytes) }},
	{name: "log.segment.bytes", kind: integer(TypeInt, 32, 14, maxInt32), def: "1073741824", dynamic: true, doc: "Default for topics: roll a new segment at this size.",
		set: func(b *Broker, v string) { b.LogSegmentBytes = i64(v) }, get: func(b *Broker) string { return fmtInt(b.LogSegmentBytes) }},
	{name: "log.roll.hours", kind: intAtLeast(1), def: "168", dynamic: true, doc: "Default for topics: roll a new segment after this many hours (log.roll.ms wins).",
		set: setRoll},
	{name: "log.roll.ms", kind: longAtLeast(1), noDefault: true, dynamic: true, doc: "Default for topics: roll a new segment after this many milliseconds.",
		set: setRoll, get: func(b *Broker) string { return fmtInt(b.LogRollMS) }},
	{name: "log.retention.hours", kind: intAtLeast(-1), def: "168", dynamic: true, doc: "Default for topics: delete segments older than this; -1 keeps them (log.retention.minutes and .ms win).",
		set: setRetention},
	{name: "log.retention.minutes", kind: intAtLeast(-1), noDefault: true, dynamic: true, doc: "Default for topics: delete segments older than this many minutes (log.retention.ms wins).",
		set: setRetention},
	{name: "log.retention.ms", kind: longAtLeast(-1), noDefault: true, dynamic: true, doc: "Default for topics: delete segments older than this many milliseconds; -1 keeps them.",
		set: setRetention, get: func(b *Broker) string { return fmtInt(b.LogRetentionMS) }},
	{name: "log.retention.bytes", kind: anyLong, def: "-1", dynamic: true, doc: "Default for topics: delete old segments while a partition is larger than this; -1: no limit.",
		set: func(b *Broker, v string) { b.LogRetentionBytes = i64(v) }, get: func(b *Broker) string { return fmtInt(b.LogRetentionBytes) }},
	{name: "log.flush.policy", kind: oneOf("os", "interval", "always"), def: "os", dynamic: true, doc: "Default for topics (mq): when to fsync: os (leave it to the OS), interval (every log.flush.interval.ms), always (before acknowledging).",
		set: func(b *Broker, v string) { b.LogFlushPolicy = v }, get: func(b *Broker) string { return b.LogFlushPolicy }},
	{name: "log.flush.interval.ms", kind: longAtLeast(0), def: "1000", dynamic: true, doc: "Default for topics: fsync interval under the interval flush policy.",
		set: func(b *Broker, v string) { b.LogFlushInterval = ms(v) }, get: func(b *Broker) string { return fmtMS(b.LogFlushInterval) }},
	{name: "log.index.interval.bytes", kind: intAtLeast(0), def: "4096", dynamic: true, doc: "Default for topics: bytes between offset index entries.",
		set: func(b *Broker, v string) { b.LogIndexIntervalBytes = i32(v) }, get: func(b *Broker) string { return fmtInt(b.LogIndexIntervalBytes) }},
	{name: "leader.replication.throttled.rate", kind: longAtLeast(0), def: maxLong, dynamic: true, doc: "Bytes per second this broker sends, as leader, to the followers of the replicas named in their topic's leader.replication.throttled.replicas " +
		"while those followers are out of the ISR, all such followers together; the others are never held back. Applies within a second when altered.",
		set: func(b *Broker, v string) { b.LeaderReplicationThrottledRate = i64(v) }, get: func(b *Broker) string { return fmtInt(b.LeaderReplicationThrottledRate) }},
	{name: "follower.replication.throttled.rate", kind: longAtLeast(0), def: maxLong, dynamic: true, doc: "Bytes per second this broker fetches, as follower, for its replicas named in their topic's follower.replication.throttled.replicas " +
		"while they are out of the ISR, all such replicas together; the others are never held back. Applies within a second when altered.",
		set: func(b *Broker, v string) { b.FollowerReplicationThrottledRate = i64(v) }, get: func(b *Broker) string { return fmtInt(b.FollowerReplicationThrottledRate) }},
	{name: "replication.throttle.auto.target.ms", kind: longAtLeast(0), def: "0", dynamic: true, doc: "When above 0, this broker sets the rates of its throttled replicas itself (mq), " +
		"both sides, every 100 ms: down to 1 MiB/s as soon as the 99th percentile of the time the acks=all produces it leads wait for the high-water mark is above this many milliseconds (or none is answered any more), " +
		"up while it is under three quarters of it (doubling back to half the rate that was too much, then by an eighth a step), " +
		"never under 1 MiB/s nor above leader.replication.throttled.rate and follower.replication.throttled.rate (no bound when unset). " +
		"The bound it keeps: what a catch-up adds to that p99 beyond this target is at most 12.5 ms (the queue an eighth too much builds in one 100 ms step), for one step at a time. 0, the default, leaves the rates as configured.",
		set: func(b *Broker, v string) { b.ReplicationThrottleAutoTarget = ms(v) }, get: func(b *Broker) string { return fmtMS(b.ReplicationThrottleAutoTarget) }},
	{name: "log.message.timestamp.type", kind: oneOf("CreateTime", "LogAppendTime"), def: "CreateTime", dynamic: true, doc: "Default for topics: keep the producer's timestamps or stamp the append time.",
		set: func(b *Broker, v string) { b.LogMessageTimestampType = v }, get: func(b *Broker) string { return b.LogMessageTimestampType }},

	// Kept in Extra: topic defaults mq accepts and reports.
	{name: "log.cleanup.policy", kind: cleanupPolicy, def: "delete", dynamic: true, doc: "Default for topics: delete old segments, compact by key (keep the latest value of every key), or both; compact alone keeps every key's latest record forever."},
	{name: "compression.type", kind: compressionType, def: "producer", dynamic: true, doc: "Default for topics: the codec batches are stored with; producer keeps the producer's."},
	{name: "log.cleaner.delete.retention.ms", kind: longAtLeast(0), def: "86400000", dynamic: true, doc: "Default for topics: how long compaction keeps tombstones."},
	{name: "log.cleaner.min.compaction.lag.ms", kind: longAtLeast(0), def: "0", dynamic: true, doc: "Default for topics: the least age of a record before compaction."},
	{name: "log.cleaner.max.compaction.lag.ms", kind: longAtLeast(1), def: maxLong, dynamic: true, doc: "Default for topics: the greatest age of a record before compaction."},
	{name: "log.cleaner.min.cleanable.ratio", kind: ratio, def: "0.5", dynamic: true, doc: "Default for topics: the dirty ratio that triggers compaction."},
	{name: "log.roll.jitter.ms", kind: longAtLeast(0), def: "0", dynamic: true, doc: "Default for topics: random jitter subtracted from the roll time (accepted, ignored)."},
	{name: "log.segment.delete.delay.ms", kind: longAtLeast(0), def: "60000", dynamic: true, doc: "Default for topics: delay before a deleted segment's file is removed (accepted, ignored)."},
	{name: "log.message.timestamp.difference.max.ms", kind: longAtLeast(0), def: maxLong, dynamic: true, doc: "Default for topics: the largest difference between a CreateTime timestamp and the broker's clock (accepted, ignored)."},
	{name: "log.preallocate", kind: boolean, def: "false", dynamic: true, doc: "Default for topics: preallocate segment files (accepted, ignored)."},
})

var compressionType = oneOf("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")

func sortedProperties(ps []brokerProperty) []brokerProperty {
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// lookupBroker finds a broker property, resolving aliases.
func lookupBroker(name string) *brokerProperty {
	i := sort.Search(len(brokerProperties), func(i int) bool { return brokerProperties[i].name >= name })
	if i == len(brokerProperties) || brokerProperties[i].name != name {
		return nil
	}
	if a := brokerProperties[i].alias; a != "" {
		return lookupBroker(a)
	}
	return &brokerProperties[i]
}

// Defaults returns the settings of an mqd started with no config file, no
// MQ_* environment and no flags, in this process's environment ($MQ_DATA_DIR,
// $XDG_STATE_HOME, $HOME, $MQ_SOCKET, $XDG_RUNTIME_DIR, the user ID).
func Defaults() Broker { return defaultsFor(os.Getenv, os.Getuid()) }

func defaultsFor(env func(string) string, uid int) Broker {
	var b Broker
	for i := range brokerProperties {
		p := &brokerProperties[i]
		if p.set != nil && p.alias == "" && !p.noDefault && !p.envDefault {
			p.set(&b, p.def)
		}
	}
	b.DataDir = DefaultDataDir(env)
	b.Listeners = DefaultListeners(env, uid)
	return b
}

// builtin is the defaults in an empty environment, to tell a changed field
// from a default one.
var builtin = defaultsFor(func(string) string { return "" }, 1000)

// DefaultDataDir is the data directory when none is configured:
// $MQ_DATA_DIR, else $XDG_STATE_HOME/mq, else $HOME/.local/state/mq, else
// /var/lib/mq. Relative XDG_STATE_HOME values are ignored, as the XDG base
// directory spec asks.
func DefaultDataDir(env func(string) string) string {
	if d := env("MQ_DATA_DIR"); d != "" {
		return d
	}
	if d := env("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "mq")
	}
	if h := env("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "mq")
	}
	return "/var/lib/mq"
}

// DefaultSocket is the Unix socket path the daemon listens on and the tools
// try first: $MQ_SOCKET, else $XDG_RUNTIME_DIR/mq/mqd.sock (when absolute),
// else /run/mq/mqd.sock for root (uid 0), else /tmp/mq-$UID/mqd.sock.
func DefaultSocket(env func(string) string, uid int) string {
	if s := env("MQ_SOCKET"); s != "" {
		return s
	}
	if d := env("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "mq", "mqd.sock")
	}
	if uid == 0 {
		return "/run/mq/mqd.sock"
	}
	return filepath.Join("/tmp", "mq-"+strconv.Itoa(uid), "mqd.sock")
}

// DefaultTCPListener is Kafka's default address, so every client's default
// works.
const DefaultTCPListener = "tcp://127.0.0.1:9092"

// DefaultListeners is unix://DefaultSocket and DefaultTCPListener.
func DefaultListeners(env func(string) string, uid int) []string {
	return []string{"unix://" + DefaultSocket(env, uid), DefaultTCPListener}
}

// Set validates one property given by its Kafka name and stores it. An
// unknown name is an error matching ErrUnknownConfig; a bad value one
// matching ErrInvalidValue that says what is allowed. The property is
// reported as STATIC_BROKER_CONFIG from now on.
func (b *Broker) Set(name, value string) error {
	return b.set(name, value, SourceStaticBroker)
}

func (b *Broker) set(name, value string, src Source) error {
	p := lookupBroker(name)
	if p == nil {
		return unknownBroker(name)
	}
	v, err := p.kind.check(name, value)
	if err != nil {
		return err
	}
	b.explicit = maps.Clone(b.explicit)
	if b.explicit == nil {
		b.explicit = map[string]setting{}
	}
	b.explicit[p.name] = setting{value: v, source: src}
	if p.set != nil {
		p.set(b, v)
		return nil
	}
	b.Extra = maps.Clone(b.Extra)
	if b.Extra == nil {
		b.Extra = map[string]string{}
	}
	b.Extra[p.name] = v
	return nil
}

// ValidateBrokerConfig checks a broker property's name and value without
// setting it (for a command line that wants to name its own flag in the
// error).
func ValidateBrokerConfig(name, value string) error {
	p := lookupBroker(name)
	if p == nil {
		return unknownBroker(name)
	}
	_, err := p.kind.check(name, value)
	return err
}

// ValidateBrokerDynamicConfig checks a broker config being altered at
// runtime (IncrementalAlterConfigs / AlterConfigs on a BROKER resource):
// the name must be known (ErrUnknownConfig), the property one that may
// change while mqd runs (ErrNotDynamic, which also matches
// ErrInvalidValue), and the value valid (ErrInvalidValue). The dynamic
// properties are the topic defaults (log.*, message.max.bytes,
// min.insync.replicas, unclean.leader.election.enable, compression.type),
// num.partitions, auto.create.topics.enable, and the replication
// throttle's leader.replication.throttled.rate and
// follower.replication.throttled.rate.
func ValidateBrokerDynamicConfig(name, value string) error {
	p := lookupBroker(name)
	if p == nil {
		return unknownBroker(name)
	}
	if !p.dynamic {
		return &Error{Name: name, Value: value, Err: ErrNotDynamic}
	}
	_, err := p.kind.check(name, value)
	return err
}

// WithDynamic returns b with the dynamic broker configs applied: first the
// cluster-wide defaults (the image's broker -1), then this broker's own.
// Invalid or non-dynamic entries are skipped and returned, joined, in err;
// the Broker returned is usable either way. Like Kafka, the most specific
// unit of a duration wins whatever its source (a static log.retention.ms
// beats a dynamic log.retention.hours).
func (b Broker) WithDynamic(clusterDefaults, perBroker map[string]string) (Broker, error) {
	var errs []error
	for _, layer := range []struct {
		m   map[string]string
		src Source
	}{{clusterDefaults, SourceDynamicDefaultBroker}, {perBroker, SourceDynamicBroker}} {
		for _, name := range sortedKeys(layer.m) {
			value := layer.m[name]
			if err := ValidateBrokerDynamicConfig(name, value); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := b.set(name, value, layer.src); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return b, errors.Join(errs...)
}

// value is a broker property's value as DescribeConfigs shows it.
func (b *Broker) value(p *brokerProperty) *string {
	if s, ok := b.explicit[p.name]; ok {
		return &s.value
	}
	if p.noDefault {
		return nil
	}
	if p.get != nil {
		v := p.get(b)
		return &v
	}
	if v, ok := b.Extra[p.name]; ok {
		return &v
	}
	v := p.def
	return &v
}

// effective is the value a property has in effect, for topic defaults:
// like value, but a duration group's lead gives the group's result.
func (b *Broker) effective(name string) string {
	p := lookupBroker(name)
	if p.get != nil {
		return p.get(b)
	}
	if v := b.value(p); v != nil {
		return *v
	}
	return p.def
}

// source is where a broker property's value came from. For the lead of a
// duration group (log.retention.ms, log.roll.ms) with inGroup, it is the
// source of the member that decided the value, as a topic default reports
// it.
func (b *Broker) source(name string, inGroup bool) Source {
	members := []string{name}
	if inGroup && groups[name] != nil {
		members = groups[name]
	}
	for _, m := range members {
		if s, ok := b.explicit[m]; ok {
			return s.source
		}
	}
	p := lookupBroker(name)
	if p.envDefault || (p.noDefault && !inGroup) {
		return SourceDefault
	}
	if b.effective(name) != builtin.effective(name) {
		return SourceStaticBroker
	}
	return SourceDefault
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// AllowEveryone is allow.everyone.if.no.acl.found as mqd applies it: the
// setting when given; otherwise true when no listener authenticates
// (every one tcp:// or unix://), false once one does (ssl://, and the
// sasl_ listeners).
func (b *Broker) AllowEveryone() bool {
	switch b.AllowEveryoneIfNoACLFound {
	case "true":
		return true
	case "false":
		return false
	}
	for _, l := range b.Listeners {
		if !strings.HasPrefix(l, "tcp://") && !strings.HasPrefix(l, "unix://") && strings.Contains(l, "://") {
			return false
		}
	}
	return true
}

// RemoteStorageURL is remote.log.storage.url, or its default: the
// directory remote-log in the data directory.
func (b Broker) RemoteStorageURL() string {
	if b.RemoteLogStorageURL != "" {
		return b.RemoteLogStorageURL
	}
	return "file://" + filepath.Join(b.DataDir, "remote-log")
}
