// Package config holds mqd's settings and topic and group configurations: their
// names (Kafka's property names wherever Kafka has one), defaults (Kafka's,
// with mq's additions noted), validation, and how DescribeConfigs reports
// them.
//
// Broker settings come from four layers, each overriding the one before:
// the defaults, a config file of "key = value" lines, MQ_* environment
// variables, and flags (see Load). Load reports every property it refuses
// at once (Errors), accepts from a config file the Kafka properties that
// mean nothing to mq (Broker.Ignored says which), and an unknown name's
// error suggests the known name it is probably a typo of;
// UnknownEnvironment finds the MQ_* variables no layer reads. Change a loaded Broker with Set, which
// validates. Runtime alterations (IncrementalAlterConfigs on a BROKER
// resource) are checked with ValidateBrokerDynamicConfig and folded in with
// Broker.WithDynamic.
//
// A topic's configuration is its overrides (the map stored in the cluster
// metadata) over the broker's topic defaults: retention.ms defaults to
// log.retention.ms, segment.bytes to log.segment.bytes, and so on.
// ValidateTopicConfig checks an override before it is stored; ResolveTopic
// turns overrides into the Topic the log uses; DescribeTopic reports every
// config with its source.
//
// The dynamic layers (cluster defaults and per-broker configs, kept in the
// cluster metadata) and a node's settings make a Layers, which describes
// topic, broker and group resources with their synonyms (the values of
// every layer, as DescribeConfigs lists them) and computes alterations:
// an Alteration (Replace for AlterConfigs, Incremental for
// IncrementalAlterConfigs' SET, DELETE, APPEND and SUBTRACT, CheckOps
// first) gives the configs to set and delete, validated (AlterTopic,
// AlterBroker, AlterGroup). TopicOverrides checks a new topic's configs;
// Broker.CheckRequestPartitions and CheckClusterPartitions apply
// max.partitions.per.request and max.partitions (ErrPartitionLimit).
//
// A share group's configuration (Kafka's GROUP resource) works the same
// way over the broker's group.share.* settings: ValidateGroupConfig,
// ResolveGroup (the Group a share group runs with) and DescribeGroup.
// CheckTopicName holds Kafka's rules for topic names, which the
// dead-letter topic config and the broker's topic APIs apply.
//
// The TLS of ssl:// listeners is set with PEM files under librdkafka's
// names (ssl.certificate.location, ssl.key.location, ssl.ca.location) and
// Kafka's ssl.client.auth; Load refuses settings that leave an ssl://
// listener without a certificate and key, or client certificates without
// CAs. sasl_plaintext:// and sasl_ssl:// listeners (a sasl_ssl:// one uses
// the same ssl.* files) authenticate with sasl.enabled.mechanisms;
// sasl.plain.allow.plaintext (mq's) lets PLAIN onto sasl_plaintext://,
// and sasl.server.max.receive.size caps frames before authentication.
// The controller port's mutual TLS (controller.ssl.certificate.location,
// controller.ssl.key.location, controller.ssl.ca.location, mq's names)
// takes all three files or none.
//
// The same tables document every setting for people: BrokerSettings and
// TopicSettings give each one's meaning, default, valid values and whether
// it may change at runtime, which mqd --help-config and the mqd(8) man
// page print and DescribeConfigs sends as documentation (Entry.Doc).
//
// The replication throttle's replica lists (Topic.LeaderThrottledReplicas,
// FollowerThrottledReplicas) are read with ThrottledReplica, which names
// a replica by partition and broker as Kafka does; its rates are the
// dynamic broker configs leader.replication.throttled.rate and
// follower.replication.throttled.rate, which are the ceilings of mq's
// auto throttle when replication.throttle.auto.target.ms
// (Broker.ReplicationThrottleAutoTarget) turns it on: lib/partition then
// sets the rates from the latency of acks=all produces.
//
// Errors are *Error values matching ErrUnknownConfig or ErrInvalidValue
// (and ErrNotDynamic), and say what is allowed; a malformed alteration
// matches ErrInvalidRequest. Nothing in this package
// keeps global mutable state; a Broker is a value whose copies are
// independent.
package config
