package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Topic is a topic's effective configuration: its overrides on top of the
// broker's defaults. Field comments name the topic property; each one's
// default is the broker property named in parentheses.
type Topic struct {
	CleanupPolicy         string // cleanup.policy (log.cleanup.policy): delete|compact|compact,delete
	SegmentBytes          int64  // segment.bytes (log.segment.bytes), at least 14
	SegmentMS             int64  // segment.ms (log.roll.ms / log.roll.hours)
	RetentionMS           int64  // retention.ms (log.retention.ms/minutes/hours); -1 forever
	RetentionBytes        int64  // retention.bytes (log.retention.bytes); -1 no limit
	MaxMessageBytes       int32  // max.message.bytes (message.max.bytes)
	MinInsyncReplicas     int32  // min.insync.replicas (min.insync.replicas)
	FlushPolicy           string // flush.policy (log.flush.policy): os|interval|always
	FlushMS               int64  // flush.ms (log.flush.interval.ms)
	IndexIntervalBytes    int32  // index.interval.bytes (log.index.interval.bytes)
	MessageTimestampType  string // message.timestamp.type (log.message.timestamp.type): CreateTime|LogAppendTime
	UncleanLeaderElection bool   // unclean.leader.election.enable (unclean.leader.election.enable)
	// Compaction (cleanup.policy with compact).
	DeleteRetentionMS      int64   // delete.retention.ms (log.cleaner.delete.retention.ms)
	MinCompactionLagMS     int64   // min.compaction.lag.ms (log.cleaner.min.compaction.lag.ms)
	MaxCompactionLagMS     int64   // max.compaction.lag.ms (log.cleaner.max.compaction.lag.ms)
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio (log.cleaner.min.cleanable.ratio)
	// CompressionType is compression.type (compression.type):
	// producer|uncompressed|none|gzip|snappy|lz4|zstd; "uncompressed" and
	// "none" mean the same. Only "producer" stores batches as produced.
	CompressionType string
	// The replication throttle (KIP-73): leader.replication.throttled.replicas
	// and follower.replication.throttled.replicas, "" (none), "*" (every
	// replica) or partition:broker pairs; ThrottledReplica reads them.
	LeaderThrottledReplicas, FollowerThrottledReplicas string
	// Tiered storage (lib/tier). RemoteStorageEnable is
	// remote.storage.enable: closed segments are copied to the broker's
	// remote.log.storage.url and local.retention.ms and
	// local.retention.bytes bound the local part (-2: as retention.ms and
	// retention.bytes; LocalRetention resolves it). Refused together with
	// a compacting cleanup.policy.
	RemoteStorageEnable                   bool
	LocalRetentionMS, LocalRetentionBytes int64
}

// LocalRetention returns local.retention.ms and local.retention.bytes
// with -2 ("as retention") resolved, and never more than retention.ms
// and retention.bytes: the local part of the log is bounded by what the
// whole log keeps.
func (t Topic) LocalRetention() (ms, bytes int64) {
	return localBound(t.LocalRetentionMS, t.RetentionMS), localBound(t.LocalRetentionBytes, t.RetentionBytes)
}

// localBound is a local retention (-2: as retention, -1: unlimited)
// bounded by the whole log's (-1: unlimited).
func localBound(local, whole int64) int64 {
	switch {
	case local == -2:
		return whole
	case whole < 0:
		return local
	case local < 0 || local > whole:
		return whole
	}
	return local
}

// topicProperty describes one topic config.
type topicProperty struct {
	name   string
	kind   kind
	broker string // the broker property giving the default; "" for none
	def    string // the default when broker is ""
	doc    string
	set    func(t *Topic, v string) // nil: accepted and validated, not used by mq
}

// topicProperties is every topic config mq knows, sorted by name.
var topicProperties = func() []topicProperty {
	ps := []topicProperty{
		{name: "cleanup.policy", kind: cleanupPolicy, broker: "log.cleanup.policy", doc: "Delete old segments, compact by key (keep the latest value of every key), or both; compact alone keeps every key's latest record forever. A compacted topic refuses records without a key (INVALID_RECORD).",
			set: func(t *Topic, v string) { t.CleanupPolicy = v }},
		{name: "segment.bytes", kind: integer(TypeInt, 32, 14, maxInt32), broker: "log.segment.bytes", doc: "Roll a new segment at this size.",
			set: func(t *Topic, v string) { t.SegmentBytes = i64(v) }},
		{name: "segment.ms", kind: longAtLeast(1), broker: "log.roll.ms", doc: "Roll a new segment after this many milliseconds.",
			set: func(t *Topic, v string) { t.SegmentMS = i64(v) }},
		{name: "retention.ms", kind: longAtLeast(-1), broker: "log.retention.ms", doc: "Delete segments older than this; -1 keeps them.",
			set: func(t *Topic, v string) { t.RetentionMS = i64(v) }},
		{name: "retention.bytes", kind: anyLong, broker: "log.retention.bytes", doc: "Delete old segments while the partition is larger than this; -1: no limit.",
			set: func(t *Topic, v string) { t.RetentionBytes = i64(v) }},
		{name: "max.message.bytes", kind: intAtLeast(0), broker: "message.max.bytes", doc: "The largest record batch accepted, in bytes.",
			set: func(t *Topic, v string) { t.MaxMessageBytes = i32(v) }},
		{name: "min.insync.replicas", kind: intAtLeast(1), broker: "min.insync.replicas", doc: "In-sync replicas needed to accept an acks=all write.",
			set: func(t *Topic, v string) { t.MinInsyncReplicas = i32(v) }},
		{name: "flush.policy", kind: oneOf("os", "interval", "always"), broker: "log.flush.policy", doc: "When to fsync: os, interval (every flush.ms) or always (before acknowledging).",
			set: func(t *Topic, v string) { t.FlushPolicy = v }},
		{name: "flush.ms", kind: longAtLeast(0), broker: "log.flush.interval.ms", doc: "Fsync interval under the interval flush policy.",
			set: func(t *Topic, v string) { t.FlushMS = i64(v) }},
		{name: "index.interval.bytes", kind: intAtLeast(0), broker: "log.index.interval.bytes", doc: "Bytes between offset index entries.",
			set: func(t *Topic, v string) { t.IndexIntervalBytes = i32(v) }},
		{name: "message.timestamp.type", kind: oneOf("CreateTime", "LogAppendTime"), broker: "log.message.timestamp.type", doc: "Keep the producer's timestamps or stamp the append time.",
			set: func(t *Topic, v string) { t.MessageTimestampType = v }},
		{name: "unclean.leader.election.enable", kind: boolean, broker: "unclean.leader.election.enable", doc: "Allow a replica outside the ISR to become leader, losing data.",
			set: func(t *Topic, v string) { t.UncleanLeaderElection = v == "true" }},
		{name: "remote.storage.enable", kind: boolean, def: "false", doc: "Copy closed segments to the remote store (the broker's remote.log.storage.url) and keep only local.retention.ms / local.retention.bytes of them on local disk; " +
			"Fetch and ListOffsets read older offsets from the store. Refused (INVALID_CONFIG) for a topic whose cleanup.policy compacts.",
			set: func(t *Topic, v string) { t.RemoteStorageEnable = v == "true" }},
		{name: "local.retention.ms", kind: longAtLeast(-2), def: "-2", doc: "With remote.storage.enable: delete local segments older than this once they are in the remote store; -2: as retention.ms, -1: no bound but retention.ms (never more than it).",
			set: func(t *Topic, v string) { t.LocalRetentionMS = i64(v) }},
		{name: "local.retention.bytes", kind: longAtLeast(-2), def: "-2", doc: "With remote.storage.enable: delete the oldest local segments in the remote store while the local log is larger than this; -2: as retention.bytes, -1: no bound but retention.bytes (never more than it).",
			set: func(t *Topic, v string) { t.LocalRetentionBytes = i64(v) }},
		{name: "compression.type", kind: compressionType, broker: "compression.type", doc: "The codec batches are stored with; producer keeps the producer's.",
			set: func(t *Topic, v string) { t.CompressionType = v }},

		{name: "delete.retention.ms", kind: longAtLeast(0), broker: "log.cleaner.delete.retention.ms", doc: "How long compaction keeps tombstones after it first cleaned the range holding them.",
			set: func(t *Topic, v string) { t.DeleteRetentionMS = i64(v) }},
		{name: "min.compaction.lag.ms", kind: longAtLeast(0), broker: "log.cleaner.min.compaction.lag.ms", doc: "The least age of a record before compaction.",
			set: func(t *Topic, v string) { t.MinCompactionLagMS = i64(v) }},
		{name: "max.compaction.lag.ms", kind: longAtLeast(1), broker: "log.cleaner.max.compaction.lag.ms", doc: "The greatest age of a sealed segment's records before compaction, whatever the dirty ratio.",
			set: func(t *Topic, v string) { t.MaxCompactionLagMS = i64(v) }},
		{name: "min.cleanable.dirty.ratio", kind: ratio, broker: "log.cleaner.min.cleanable.ratio", doc: "The dirty ratio (bytes not yet compacted over all sealed bytes) that triggers compaction.",
			set: func(t *Topic, v string) { t.MinCleanableDirtyRatio, _ = strconv.ParseFloat(v, 64) }},

		// Accepted and validated so that clients setting them work; mq does
		// not act on them (yet).
		{name: "segment.jitter.ms", kind: longAtLeast(0), broker: "log.roll.jitter.ms", doc: "Random jitter subtracted from segment.ms (ignored)."},
		{name: "file.delete.delay.ms", kind: longAtLeast(0), broker: "log.segment.delete.delay.ms", doc: "Delay before a deleted segment's file is removed (ignored)."},
		{name: "message.timestamp.difference.max.ms", kind: longAtLeast(0), broker: "log.message.timestamp.difference.max.ms", doc: "The largest difference between a CreateTime timestamp and the broker's clock (ignored)."},
		{name: "preallocate", kind: boolean, broker: "log.preallocate", doc: "Preallocate segment files (ignored)."},
		{name: "follower.replication.throttled.replicas", kind: throttledReplicas, doc: "The replicas whose fetches from their leader are throttled while they are out of the ISR, to the follower.replication.throttled.rate of their broker: " +
			"partition:broker pairs (each naming the follower's broker), or * for every replica of the topic.",
			set: func(t *Topic, v string) { t.FollowerThrottledReplicas = v }},
		{name: "leader.replication.throttled.replicas", kind: throttledReplicas, doc: "The replicas that, while leading, throttle what they send to followers out of the ISR, to the leader.replication.throttled.rate of their broker: " +
			"partition:broker pairs (each naming the leader's broker, as Kafka's reassignment tool sets them: the replicas the data moves from), or * for every replica of the topic.",
			set: func(t *Topic, v string) { t.LeaderThrottledReplicas = v }},
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}()

// BrokerSynonym is the broker config that gives topic config name its
// default (log.retention.ms for retention.ms), "" when none does or name
// is no topic config.
func BrokerSynonym(name string) string {
	if p := lookupTopic(name); p != nil {
		return p.broker
	}
	return ""
}

// ThrottledReplica reports whether a throttled-replicas list (a topic's
// leader.replication.throttled.replicas or
// follower.replication.throttled.replicas, canonical) names the replica
// of partition on broker: "*" names every replica, "" none.
func ThrottledReplica(list string, partition, broker int32) bool {
	if list == "*" {
		return true
	}
	for list != "" {
		var pair string
		pair, list, _ = strings.Cut(list, ",")
		ps, bs, _ := strings.Cut(pair, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		b, err2 := strconv.ParseInt(bs, 10, 32)
		if err1 == nil && err2 == nil && int32(p) == partition && int32(b) == broker {
			return true
		}
	}
	return false
}

func lookupTopic(name string) *topicProperty {
	i := sort.Search(len(topicProperties), func(i int) bool { return topicProperties[i].name >= name })
	if i == len(topicProperties) || topicProperties[i].name != name {
		return nil
	}
	return &topicProperties[i]
}

// topicDefault is a topic config's value when the topic does not override
// it, and where that value came from.
func (b *Broker) topicDefault(p *topicProperty) (string, Source) {
	if p.broker == "" {
		return p.def, SourceDefault
	}
	return b.effective(p.broker), b.source(p.broker, true)
}

// TopicDefaults is the configuration of a topic without overrides.
func (b Broker) TopicDefaults() Topic {
	var t Topic
	for i := range topicProperties {
		p := &topicProperties[i]
		if p.set != nil {
			v, _ := b.topicDefault(p)
			p.set(&t, v)
		}
	}
	return t
}

// ValidateTopicConfig checks one topic config: an unknown name is an error
// matching ErrUnknownConfig, a bad value one matching ErrInvalidValue that
// says what is allowed (Kafka's rules: segment.bytes ≥ 14,
// min.insync.replicas ≥ 1, retention.ms ≥ -1, enumerations, …).
func ValidateTopicConfig(name, value string) error {
	p := lookupTopic(name)
	if p == nil {
		return unknownTopic(name)
	}
	_, err := p.kind.check(name, value)
	return err
}

// ResolveTopic is a topic's effective configuration: b's topic defaults
// with the topic's overrides applied. The first invalid override (by
// name) is returned as an error, with the defaults in its place.
func ResolveTopic(b Broker, overrides map[string]string) (Topic, error) {
	t := b.TopicDefaults()
	var firstErr error
	for _, name := range sortedKeys(overrides) {
		p := lookupTopic(name)
		if p == nil {
			if firstErr == nil {
				firstErr = unknownTopic(name)
			}
			continue
		}
		v, err := p.kind.check(name, overrides[name])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if p.set != nil {
			p.set(&t, v)
		}
	}
	if t.RemoteStorageEnable && t.CleanupPolicy != "delete" {
		// Compacted logs are not tiered: the cleaner rewrites segments
		// the remote store would keep stale copies of.
		t.RemoteStorageEnable = false
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: remote.storage.enable=true needs cleanup.policy=delete (compacted topics are not tiered), not %q", ErrInvalidValue, t.CleanupPolicy)
		}
	}
	return t, firstErr
}

// DescribeTopic lists every topic config, sorted by name, as
// DescribeConfigs shows it for a topic with these overrides: an override
// is DYNAMIC_TOPIC_CONFIG; otherwise the value and source of the broker
// property that gives the default (STATIC_BROKER_CONFIG when it was set in
// the file, environment or flags, DYNAMIC_* when altered at runtime — see
// WithDynamic —, DEFAULT_CONFIG otherwise). Overrides with unknown names
// are left out.
func DescribeTopic(b Broker, overrides map[string]string) []Entry {
	entries := make([]Entry, 0, len(topicProperties))
	for i := range topicProperties {
		p := &topicProperties[i]
		e := Entry{Name: p.name, Type: p.kind.typ, Doc: p.doc}
		if v, ok := overrides[p.name]; ok {
			if n, err := p.kind.check(p.name, v); err == nil {
				v = n
			}
			e.Value, e.Source = &v, SourceDynamicTopic
		} else {
			v, src := b.topicDefault(p)
			e.Value, e.Source = &v, src
		}
		entries = append(entries, e)
	}
	return entries
}

// DescribeBroker lists every broker property, sorted by name, as
// DescribeConfigs shows it for a BROKER resource: values in dynamic (this
// broker's runtime alterations) are DYNAMIC_BROKER_CONFIG, properties set
// in the file, environment or flags STATIC_BROKER_CONFIG, the rest
// DEFAULT_CONFIG. Properties that cannot change at runtime are read-only.
func DescribeBroker(b Broker, dynamic map[string]string) []Entry {
	return DescribeBrokerConfigs(b, nil, dynamic)
}

// DescribeBrokerConfigs is DescribeBroker with the cluster-wide dynamic
// defaults too (DYNAMIC_DEFAULT_BROKER_CONFIG). Invalid dynamic values are
// left out.
func DescribeBrokerConfigs(b Broker, clusterDefaults, perBroker map[string]string) []Entry {
	b, _ = b.WithDynamic(clusterDefaults, perBroker)
	entries := make([]Entry, 0, len(brokerProperties))
	for i := range brokerProperties {
		p := &brokerProperties[i]
		if p.alias != "" {
			continue
		}
		entries = append(entries, Entry{
			Name:     p.name,
			Value:    b.value(p),
			Source:   b.source(p.name, false),
			ReadOnly: !p.dynamic,
			Type:     p.kind.typ,
			Doc:      p.doc,
		})
	}
	return entries
}
