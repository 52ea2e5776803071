package metrics

import (
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

	underReplicated, offline, isrShrinks, isrExpands, isrUnconfirmed *prometheus.Desc

	controllerLeaderID, raftState, controllerIsLeader *prometheus.Desc

	groups, lagMessages, lagSeconds *prometheus.Desc

	connections, connectionsAccepted *prometheus.Desc

	segmentFilesOpen, segmentFilesOpened, segmentFilesEvicted *prometheus.Desc
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

		underReplicated: d("mq_partitions_under_replicated", "Partitions this node leads whose ISR is smaller than their replica set.", nil, nil),
		offline:         d("mq_partitions_offline", "Partitions without a live leader; counted by the controller's Raft leader only, 0 elsewhere.", nil, nil),
		isrShrinks:      d("mq_isr_shrinks_total", "ISR changes this node made as leader that removed replicas.", nil, nil),
		isrExpands:      d("mq_isr_expands_total", "ISR changes this node made as leader that added replicas.", nil, nil),
		isrUnconfirmed:  d("mq_isr_proposals_unconfirmed_total", "ISR changes this node proposed as leader that the controller refused or did not answer.", nil, nil),

		controllerLeaderID: d("mq_controller_leader_id", "Node id of the controller quorum's Raft leader, -1 when none is known.", nil, nil),
		raftState:          d("mq_raft_state", "1 for this node's current Raft state, 0 for the others.", []string{"state"}, nil),
		controllerIsLeader: d("mq_controller_is_leader", "1 when this node is the controller quorum's Raft leader.", nil, nil),

		groups:      d("mq_groups", "Consumer groups this node coordinates, by state.", []string{"state"}, nil),
		lagMessages: d("mq_group_lag_messages", "Records between the group's committed offset and the high-water mark.", lag, nil),
		lagSeconds:  d("mq_group_lag_seconds", "Age of the first record the group has not consumed; 0 when it has consumed everything.", lag, nil),

		connections:         d("mq_connections", "Open client connections.", nil, nil),
		connectionsAccepted: d("mq_connections_accepted_total", "Client connections accepted since the node started.", nil, nil),

		segmentFilesOpen:    d("mq_log_segment_files_open", "Segment data files open now (bounded by log.max.open.files).", nil, nil),
		segmentFilesOpened:  d("mq_log_segment_files_opened_total", "Opens of segment data files since the node started, first and again.", nil, nil),
		segmentFilesEvicted: d("mq_log_segment_files_evicted_total", "Idle segment data files closed to stay within log.max.open.files.", nil, nil),
	}
}

// groupStates are the states mq_groups always shows, so that a state
// with no groups reads 0 rather than disappearing.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead"}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.topicBytesIn, c.topicBytesOut, c.topicMessagesIn, c.topicMessagesOut,
		c.highWatermark, c.logEndOffset, c.logStartOffset, c.sizeBytes, c.leader,
		c.underReplicated, c.offline, c.isrShrinks, c.isrExpands,
		c.controllerLeaderID, c.raftState, c.controllerIsLeader,
		c.groups, c.lagMessages, c.lagSeconds,
		c.connections, c.connectionsAccepted,
		c.segmentFilesOpen, c.segmentFilesOpened, c.segmentFilesEvicted,
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
	gauge(c.offline, float64(s.Offline))
	counter(c.isrShrinks, s.ISRShrinks)
	counter(c.isrExpands, s.ISRExpands)
	counter(c.isrUnconfirmed, s.ISRUnconfirmed)

	gauge(c.controllerLeaderID, float64(s.ControllerLeaderID))
	for _, st := range RaftStates {
		gauge(c.raftState, bool01(st == s.RaftState), st)
	}
	gauge(c.controllerIsLeader, bool01(s.RaftState == "leader"))

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

	gauge(c.connections, float64(s.Connections))
	counter(c.connectionsAccepted, s.ConnectionsAccepted)

	gauge(c.segmentFilesOpen, float64(s.SegmentFilesOpen))
	counter(c.segmentFilesOpened, s.SegmentFilesOpened)
	counter(c.segmentFilesEvicted, s.SegmentFilesEvicted)
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
