package metrics

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector turns a Source's Snapshot into const metrics at every
// scrape.
type stateCollector struct {
	source          Source
	partitionSeries bool

	topicBytesIn, topicBytesOut, topicMessagesIn, topicMessagesOut *prometheus.Desc

	highWatermark, logEndOffset, logStartOffset, sizeBytes, leader *prometheus.Desc

	underReplicated, reassigning, offline, isrShrinks, isrExpands, isrUnconfirmed *prometheus.Desc

	throttledBytes, throttleHolds, throttleRate *prometheus.Desc

	controllerLeaderID, raftState, controllerIsLeader, brokerFencings *prometheus.Desc

	groups, lagMessages, lagSeconds *prometheus.Desc

	shareGroups, shareInFlight, shareAvailable, shareAcquired, shareArchived, shareOldest, shareDeadLetters *prometheus.Desc

	connections, connectionsAccepted, connectionsRefused *prometheus.Desc
	requestBytesReserved, requestBytesWaiting            *prometheus.Desc
	authenticationFailures                               *prometheus.Desc

	segmentFilesOpen, segmentFilesOpened, segmentFilesEvicted *prometheus.Desc

	tierLag, tierFailing, tierUploaded, tierUploadBytes, tierFailures *prometheus.Desc
	tierDeleted, tierReadBytes, tierReadErrors, tierGETs              *prometheus.Desc
}

func newStateCollector(source Source, partitionSeries bool) *stateCollector {
	d := prometheus.NewDesc
	tp := []string{"topic", "partition"}
	lag := []string{"group", "topic", "partition"}
	if !partitionSeries {
		lag = []string{"group"}
	}
	return &stateCollector{
		source:          source,
		partitionSeries: partitionSeries,

		topicBytesIn:     d("mq_topic_bytes_in_total", "Bytes of record batches produced to the topic on this node.", []string{"topic"}, nil),
		topicBytesOut:    d("mq_topic_bytes_out_total", "Bytes of record batches fetched from the topic by consumers on this node (follower fetches excluded).", []string{"topic"}, nil),
		topicMessagesIn:  d("mq_topic_messages_in_total", "Records produced to the topic on this node.", []string{"topic"}, nil),
		topicMessagesOut: d("mq_topic_messages_out_total", "Offsets fetched from the topic by consumers on this node (follower fetches excluded).", []string{"topic"}, nil),

		highWatermark:  d("mq_partition_high_watermark", "The partition's high-water mark on this node.", tp, nil),
		logEndOffset:   d("mq_partition_log_end_offset", "The offset after the last record of the partition's log on this node.", tp, nil),
		logStartOffset: d("mq_partition_log_start_offset", "The first offset of the partition's log on this node.", tp, nil),
		sizeBytes:      d("mq_partition_size_bytes", "Bytes of the partition's segment files on this node.", tp, nil),
		leader:         d("mq_partition_leader", "1 when this node leads the partition, 0 when it follows.", tp, nil),

		underReplicated: d("mq_partitions_under_replicated", "Partitions this node leads whose ISR is smaller than their replica set (replicas a reassignment adds not counted).", nil, nil),
		reassigning:     d("mq_partitions_reassigning", "Partitions this node leads that a reassignment is moving.", nil, nil),
		offline:         d("mq_partitions_offline", "Partitions without a live leader; counted by the controller's Raft leader only, 0 elsewhere.", nil, nil),
		isrShrinks:      d("mq_isr_shrinks_total", "ISR changes this node made as leader that removed replicas.", nil, nil),
		isrExpands:      d("mq_isr_expands_total", "ISR changes this node made as leader that added replicas.", nil, nil),
		isrUnconfirmed:  d("mq_isr_proposals_unconfirmed_total", "ISR changes this node proposed as leader that the controller refused or did not answer.", nil, nil),

		throttledBytes: d("mq_replication_throttled_bytes_total", "Bytes of replicas held to the replication throttle (leader.replication.throttled.rate or follower.replication.throttled.rate) that this node sent as leader or fetched as follower, by side.", []string{"side"}, nil),
		throttleRate:   d("mq_replication_throttle_rate_bytes", "Bytes per second the replication throttle lets this node's throttled replicas move now, by side: the configured leader.replication.throttled.rate or follower.replication.throttled.rate, or the rate the auto throttle set (replication.throttle.auto.target.ms); +Inf when unlimited.", []string{"side"}, nil),
		throttleHolds:  d("mq_replication_throttle_holds_total", "Times the replication throttle held a throttled replica back on this node for want of quota: a partition answered (leader side) or left out of a fetch (follower side) without records, by side.", []string{"side"}, nil),

		controllerLeaderID: d("mq_controller_leader_id", "Node id of the controller quorum's Raft leader, -1 when none is known.", nil, nil),
		raftState:          d("mq_raft_state", "1 for this node's current Raft state, 0 for the others.", []string{"state"}, nil),
		controllerIsLeader: d("mq_controller_is_leader", "1 when this node is the controller quorum's Raft leader.", nil, nil),
		brokerFencings:     d("mq_controller_broker_fencings_total", "Brokers this node fenced as the active controller, by reason: session_timeout (no heartbeat within broker.session.timeout.ms) or process_gone (its connection ended and its raft port refuses or resets a probe).", []string{"reason"}, nil),

		groups:      d("mq_groups", "Consumer groups this node coordinates, by state.", []string{"state"}, nil),
		lagMessages: d("mq_group_lag_messages", "Records between the group's committed offset and the high-water mark.", lag, nil),
		lagSeconds:  d("mq_group_lag_seconds", "Age of the first record the group has not consumed; 0 when it has consumed everything.", lag, nil),

		shareGroups:      d("mq_share_groups", "Share groups (queues) this node coordinates, by state.", []string{"state"}, nil),
		shareInFlight:    d("mq_share_group_in_flight_records", "Records in the share-partition's in-flight window, from its start offset to the first offset never acquired.", lag, nil),
		shareAvailable:   d("mq_share_group_available_records", "Records waiting for a consumer: available in the window, or never acquired up to the high-water mark.", lag, nil),
		shareAcquired:    d("mq_share_group_acquired_records", "Records acquired by a consumer and not yet acknowledged.", lag, nil),
		shareArchived:    d("mq_share_group_archived_records", "Records in the in-flight window archived (rejected or out of delivery attempts).", lag, nil),
		shareOldest:      d("mq_share_group_oldest_unacked_seconds", "Age of the oldest record the share group has not acknowledged; 0 when there is none.", lag, nil),
		shareDeadLetters: d("mq_share_group_dead_letters_total", "Records the share group gave up (rejected, or out of delivery attempts) on this node: dead-lettered, or archived without a dead-letter topic.", lag, nil),

		connections:            d("mq_connections", "Open client connections.", nil, nil),
		connectionsAccepted:    d("mq_connections_accepted_total", "Client connections accepted since the node started.", nil, nil),
		requestBytesReserved:   d("mq_request_bytes_reserved", "Request bytes held in memory now, of queued.max.request.bytes.", nil, nil),
		requestBytesWaiting:    d("mq_request_bytes_waiting", "Bytes of the request frames whose size was read and that wait for room in queued.max.request.bytes.", nil, nil),
		connectionsRefused:     d("mq_connections_refused_total", "Client connections closed as soon as they were accepted, by the limit they were over: max_connections or max_connections_per_ip.", []string{"limit"}, nil),
		authenticationFailures: d("mq_authentication_failures_total", "SASL authentications refused (wrong password, unknown user, malformed exchange) since the node started.", nil, nil),

		segmentFilesOpen:    d("mq_log_segment_files_open", "Segment data files open now (bounded by log.max.open.files).", nil, nil),
		segmentFilesOpened:  d("mq_log_segment_files_opened_total", "Opens of segment data files since the node started, first and again.", nil, nil),
		segmentFilesEvicted: d("mq_log_segment_files_evicted_total", "Idle segment data files closed to stay within log.max.open.files.", nil, nil),

		tierLag:         d("mq_tier_upload_lag_bytes", "Bytes of closed segments of the tiered partitions led here, below the high-water mark, not in the remote store yet.", nil, nil),
		tierFailing:     d("mq_tier_upload_failing", "1 while the last upload of some tiered partition led here failed (the store is down or refuses), else 0.", nil, nil),
		tierUploaded:    d("mq_tier_segments_uploaded_total", "Segments copied to the remote store and recorded.", nil, nil),
		tierUploadBytes: d("mq_tier_uploaded_bytes_total", "Bytes of the segments copied to the remote store and recorded.", nil, nil),
		tierFailures:    d("mq_tier_upload_failures_total", "Failed rounds of uploads to the remote store (each retried with backoff).", nil, nil),
		tierDeleted:     d("mq_tier_segments_deleted_total", "Remote segments deleted by retention.", nil, nil),
		tierReadBytes:   d("mq_tier_remote_read_bytes_total", "Bytes of batches read from the remote store for Fetch.", nil, nil),
		tierReadErrors:  d("mq_tier_remote_read_errors_total", "Reads from the remote store that failed or timed out.", nil, nil),
		tierGETs:        d("mq_tier_store_gets_total", "Ranged GETs of remote segment data the read cache issued (read-ahead included).", nil, nil),
	}
}

// groupStates are the states mq_groups always shows, so that a state
// with no groups reads 0 rather than disappearing.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead"}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.topicBytesIn, c.topicBytesOut, c.topicMessagesIn, c.topicMessagesOut,
		c.highWatermark, c.logEndOffset, c.logStartOffset, c.sizeBytes, c.leader,
		c.underReplicated, c.reassigning, c.offline, c.isrShrinks, c.isrExpands, c.isrUnconfirmed,
		c.throttledBytes, c.throttleHolds, c.throttleRate,
		c.controllerLeaderID, c.raftState, c.controllerIsLeader, c.brokerFencings,
		c.groups, c.lagMessages, c.lagSeconds,
		c.shareGroups, c.shareInFlight, c.shareAvailable, c.shareAcquired, c.shareArchived, c.shareOldest, c.shareDeadLetters,
		c.connections, c.connectionsAccepted, c.connectionsRefused, c.requestBytesReserved, c.requestBytesWaiting, c.authenticationFailures,
		c.segmentFilesOpen, c.segmentFilesOpened, c.segmentFilesEvicted,
		c.tierLag, c.tierFailing, c.tierUploaded, c.tierUploadBytes, c.tierFailures,
		c.tierDeleted, c.tierReadBytes, c.tierReadErrors, c.tierGETs,
	} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.source == nil {
		return
	}
	s := c.source.MetricsSnapshot(c.partitionSeries)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, t := range s.Topics {
		counter(c.topicBytesIn, t.BytesIn, t.Topic)
		counter(c.topicBytesOut, t.BytesOut, t.Topic)
		counter(c.topicMessagesIn, t.MessagesIn, t.Topic)
		counter(c.topicMessagesOut, t.MessagesOut, t.Topic)
	}
	if c.partitionSeries {
		for _, p := range s.Partitions {
			id := strconv.Itoa(int(p.Partition))
			gauge(c.highWatermark, float64(p.HighWatermark), p.Topic, id)
			gauge(c.logEndOffset, float64(p.LogEndOffset), p.Topic, id)
			gauge(c.logStartOffset, float64(p.LogStartOffset), p.Topic, id)
			gauge(c.sizeBytes, float64(p.SizeBytes), p.Topic, id)
			gauge(c.leader, bool01(p.Leader), p.Topic, id)
		}
	}
	gauge(c.underReplicated, float64(s.UnderReplicated))
	gauge(c.reassigning, float64(s.Reassigning))
	gauge(c.offline, float64(s.Offline))
	counter(c.isrShrinks, s.ISRShrinks)
	counter(c.isrExpands, s.ISRExpands)
	counter(c.isrUnconfirmed, s.ISRUnconfirmed)
	for _, side := range []struct {
		name string
		t    Throttle
	}{{"leader", s.LeaderThrottle}, {"follower", s.FollowerThrottle}} {
		counter(c.throttledBytes, side.t.Bytes, side.name)
		counter(c.throttleHolds, side.t.Holds, side.name)
		gauge(c.throttleRate, side.t.Rate, side.name)
	}

	gauge(c.controllerLeaderID, float64(s.ControllerLeaderID))
	for _, st := range RaftStates {
		gauge(c.raftState, bool01(st == s.RaftState), st)
	}
	gauge(c.controllerIsLeader, bool01(s.RaftState == "leader"))
	for _, reason := range slices.Sorted(maps.Keys(s.BrokerFencings)) {
		counter(c.brokerFencings, s.BrokerFencings[reason], reason)
	}

	byState := map[string]int{}
	for _, st := range groupStates {
		byState[st] = 0
	}
	for _, g := range s.Groups {
		byState[g.State]++
	}
	for st, n := range byState {
		gauge(c.groups, float64(n), st)
	}
	for _, g := range s.Groups {
		if c.partitionSeries {
			for _, l := range g.Lag {
				id := strconv.Itoa(int(l.Partition))
				gauge(c.lagMessages, float64(l.Messages), g.Group, l.Topic, id)
				gauge(c.lagSeconds, l.Seconds, g.Group, l.Topic, id)
			}
			continue
		}
		if len(g.Lag) == 0 {
			continue
		}
		var messages int64
		var seconds float64
		for _, l := range g.Lag {
			messages += l.Messages
			seconds = max(seconds, l.Seconds)
		}
		gauge(c.lagMessages, float64(messages), g.Group)
		gauge(c.lagSeconds, seconds, g.Group)
	}

	c.collectShareGroups(s, gauge, counter)

	gauge(c.connections, float64(s.Connections))
	counter(c.connectionsAccepted, s.ConnectionsAccepted)
	counter(c.authenticationFailures, s.AuthenticationFailures)
	gauge(c.requestBytesReserved, float64(s.RequestBytesReserved))
	gauge(c.requestBytesWaiting, float64(s.RequestBytesWaiting))
	for _, limit := range slices.Sorted(maps.Keys(s.ConnectionsRefused)) {
		counter(c.connectionsRefused, s.ConnectionsRefused[limit], limit)
	}

	gauge(c.segmentFilesOpen, float64(s.SegmentFilesOpen))
	counter(c.segmentFilesOpened, s.SegmentFilesOpened)
	counter(c.segmentFilesEvicted, s.SegmentFilesEvicted)

	gauge(c.tierLag, float64(s.Tier.UploadLagBytes))
	gauge(c.tierFailing, bool01(s.Tier.UploadFailing))
	counter(c.tierUploaded, s.Tier.SegmentsUploaded)
	counter(c.tierUploadBytes, s.Tier.BytesUploaded)
	counter(c.tierFailures, s.Tier.UploadFailures)
	counter(c.tierDeleted, s.Tier.SegmentsDeleted)
	counter(c.tierReadBytes, s.Tier.RemoteReadBytes)
	counter(c.tierReadErrors, s.Tier.RemoteReadErrors)
	counter(c.tierGETs, s.Tier.StoreGETs)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectShareGroups adds the share-group series: per share-partition,
// or with no partition series per group (counts summed, the oldest age
// the largest).
func (c *stateCollector) collectShareGroups(s Snapshot, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	byState := map[string]int{"Empty": 0, "Stable": 0}
	for _, g := range s.ShareGroups {
		byState[g.State]++
	}
	for st, n := range byState {
		gauge(c.shareGroups, float64(n), st)
	}
	emit := func(p SharePartition, labels ...string) {
		gauge(c.shareInFlight, float64(p.InFlight), labels...)
		gauge(c.shareAvailable, float64(p.Available), labels...)
		gauge(c.shareAcquired, float64(p.Acquired), labels...)
		gauge(c.shareArchived, float64(p.Archived), labels...)
		gauge(c.shareOldest, p.OldestUnackedSeconds, labels...)
		counter(c.shareDeadLetters, p.DeadLetters, labels...)
	}
	if c.partitionSeries {
		for _, p := range s.ShareGroupPartitions {
			emit(p, p.Group, p.Topic, strconv.Itoa(int(p.Partition)))
		}
		return
	}
	var groups []string
	sums := map[string]*SharePartition{}
	for _, p := range s.ShareGroupPartitions {
		sum := sums[p.Group]
		if sum == nil {
			sum = &SharePartition{Group: p.Group}
			sums[p.Group] = sum
			groups = append(groups, p.Group)
		}
		sum.InFlight += p.InFlight
		sum.Available += p.Available
		sum.Acquired += p.Acquired
		sum.Archived += p.Archived
		sum.OldestUnackedSeconds = max(sum.OldestUnackedSeconds, p.OldestUnackedSeconds)
		sum.DeadLetters += p.DeadLetters
	}
	for _, g := range groups {
		emit(*sums[g], g)
	}
}
