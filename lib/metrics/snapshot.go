package metrics

// Snapshot is the state of a node that the scrape-time metrics show, as a
// Source reads it. Counters in it only grow while the node runs.
type Snapshot struct {
	// Topics is the client traffic per topic (not replication).
	Topics []TopicTraffic
	// Partitions are the partitions this node hosts (leads or follows).
	// A Source may leave it empty when the scrape asks for no partition
	// series.
	Partitions []Partition
	// UnderReplicated counts the partitions this node leads whose ISR is
	// smaller than their replica set, not counting the replicas a
	// reassignment adds (KIP-352); Reassigning those being reassigned.
	UnderReplicated, Reassigning int
	// Offline counts the partitions of the cluster image without a live
	// leader. Only the node whose controller is the Raft leader counts
	// them (others report 0), so a sum over the cluster counts each once.
	Offline int
	// ISRShrinks and ISRExpands count the ISR changes this node made, as
	// a leader, since it started; ISRUnconfirmed the ISR changes it
	// proposed that the controller refused or did not answer.
	ISRShrinks, ISRExpands, ISRUnconfirmed uint64
	// LeaderThrottle and FollowerThrottle are what the two sides of the
	// replication throttle (KIP-73) counted since the node started, and
	// their rates.
	LeaderThrottle, FollowerThrottle Throttle

	// ControllerLeaderID is the node id of the Raft leader, -1 when none is known.
	ControllerLeaderID int32
	// RaftState is this node's Raft state: one of RaftStates.
	RaftState string
	// BrokerFencings counts the brokers this node fenced as the active
	// controller since it started, by reason (session_timeout,
	// process_gone: lib/controller's FencingReasons).
	BrokerFencings map[string]uint64

	// Groups are the consumer groups this node coordinates.
	Groups []Group
	// ShareGroups are the share groups this node coordinates, and
	// ShareGroupPartitions the share-partitions of the topic partitions
	// it leads.
	ShareGroups          []ShareGroup
	ShareGroupPartitions []SharePartition

	// Connections is the number of open client connections, and
	// ConnectionsAccepted the connections accepted since the node started.
	Connections         int
	ConnectionsAccepted uint64
	// AuthenticationFailures counts the SASL authentications refused
	// since the node started.
	AuthenticationFailures uint64
	// ConnectionsRefused counts the connections closed as soon as they
	// were accepted, by the limit they were over: max_connections,
	// max_connections_per_ip.
	ConnectionsRefused map[string]uint64
	// RequestBytesReserved is the request bytes held from
	// queued.max.request.bytes now, RequestBytesWaiting those of frames
	// whose size was read and that wait for room.
	RequestBytesReserved, RequestBytesWaiting int64

	// SegmentFilesOpen is the number of segment data files open now;
	// SegmentFilesOpened counts their opens and SegmentFilesEvicted the
	// idle ones closed for log.max.open.files, since the node started.
	SegmentFilesOpen                        int
	SegmentFilesOpened, SegmentFilesEvicted uint64

	// Tier is what tiered storage counted since the node started, and
	// its upload lag now (zeros when no tiered topic needed it).
	Tier Tier
}

// Tier is tiered storage's counters (lib/tier).
type Tier struct {
	// UploadLagBytes is the bytes of closed segments below the
	// high-water mark, of the tiered partitions led here, not in the
	// remote store yet; UploadFailing is whether an upload failed last.
	UploadLagBytes                                                   int64
	UploadFailing                                                    bool
	SegmentsUploaded, BytesUploaded, UploadFailures, SegmentsDeleted uint64
	RemoteReadBytes, RemoteReadErrors, StoreGETs                     uint64
}

// Throttle is what one side of the replication throttle counted: the
// bytes its throttled replicas moved while it had a rate, and the times
// it held one back for want of quota; and its rate now, in bytes per
// second (configured, or set by the auto throttle), +Inf when unlimited.
type Throttle struct {
	Bytes, Holds uint64
	Rate         float64
}

// RaftStates are the values of RaftState, the label values of
// mq_raft_state.
var RaftStates = []string{"leader", "follower", "candidate", "shutdown"}

// TopicTraffic is one topic's client traffic since the node started:
// bytes and records produced to it, and bytes and records fetched from it
// by consumers (follower fetches are not counted).
type TopicTraffic struct {
	Topic                 string
	BytesIn, MessagesIn   uint64
	BytesOut, MessagesOut uint64
}

// Partition is one hosted partition.
type Partition struct {
	Topic          string
	Partition      int32
	HighWatermark  int64
	LogEndOffset   int64
	LogStartOffset int64
	SizeBytes      int64
	Leader         bool // this node leads it
}

// Group is one consumer group and the partitions it has committed
// offsets for.
type Group struct {
	Group string
	State string // Kafka's name: Empty, Stable, PreparingRebalance, CompletingRebalance, Dead
	// Lag holds one entry per partition the group committed an offset for
	// and whose lag the node could compute (it hosts the partition).
	Lag []GroupLag
}

// GroupLag is how far a group is behind on one partition, defined as mqctl
// group describe defines it (lib/admin): Messages is the high-water mark
// minus the committed offset, at least 0; Seconds is now minus the
// timestamp of the first record at or after the committed offset (or the
// log start, when the committed offset is below it), in whole
// milliseconds, when Messages > 0, else 0.
type GroupLag struct {
	Topic     string
	Partition int32
	Messages  int64
	Seconds   float64
}

// ShareGroup is one share group (a queue) and its state: Empty or Stable.
type ShareGroup struct {
	Group, State string
}

// SharePartition is one share group's share-partition of a topic
// partition this node leads, as mqctl queue describe shows it: InFlight
// is the window from the start offset to the first offset never
// acquired, Available its available records plus those never acquired
// up to the high-water mark, Acquired and Archived its records in those
// states; OldestUnackedSeconds the age of the record at the start offset
// when one is there (0 otherwise), in whole milliseconds; DeadLetters
// the records given up (rejected, or out of delivery attempts) since the
// node started.
type SharePartition struct {
	Group                string
	Topic                string
	Partition            int32
	InFlight, Available  int64
	Acquired, Archived   int64
	OldestUnackedSeconds float64
	DeadLetters          uint64
}
