package kafkaext

import (
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tag numbers of mq's fields, and the message structure each one is in.
const (
	// LogDir is a DirHealth in a DescribeLogDirsResponseDir (v2+).
	LogDir uint32 = 10000
	// LogDirPartition is a PartitionHealth in a
	// DescribeLogDirsResponseTopicPartition (v2+).
	LogDirPartition uint32 = 10001
	// ApiVersions is a Software in an ApiVersionsResponse (v3+): the
	// broker's own name and release, which Kafka's ApiVersions does not
	// carry (the request names the client's software, the response
	// nothing). The server encodes ApiVersions responses once, so the
	// field costs nothing per connection.
	ApiVersions uint32 = 10002
	// DescribeClusterBroker is a ClusterBroker in a
	// DescribeClusterResponseBroker: what DescribeCluster's IsFenced (v2)
	// does not say of a broker's state.
	DescribeClusterBroker uint32 = 10003
	// SharePartition is a SharePartitionState in a
	// DescribeShareGroupOffsetsResponseGroupTopicPartition: the
	// share-partition's in-flight window, which Kafka's answer (start
	// offset, lag) does not show.
	SharePartition uint32 = 10004
	// ShareForward is a ShareForwarded in an AlterShareGroupOffsetsRequest
	// or DeleteShareGroupOffsetsRequest: a group coordinator passing the
	// change of one share-partition to the node that leads its partition,
	// which applies it without being the coordinator.
	ShareForward uint32 = 10005
	// CoordinatorWrite is a CoordinatorWriter in a ProduceRequest (v9+):
	// a coordinator appending to its internal topic on the node that
	// leads the partition. A Produce to an internal topic without it is
	// refused, so clients never write those topics.
	CoordinatorWrite uint32 = 10006
	// LogDirTiered is a TieredExtent in a
	// DescribeLogDirsResponseTopicPartition (v2+): a tiered partition's
	// local and remote extents.
	LogDirTiered uint32 = 10010
	// LogDirTier is a TierHealth in a DescribeLogDirsResponseDir (v2+),
	// from a node that tiers partitions.
	LogDirTier uint32 = 10011
)

// TieredExtent is where a tiered partition's log is (remote.storage.enable):
// the replica's local segments and the remote store's, by the replicated
// remote-log metadata. Offsets are -1 and bytes 0 where a part is empty.
type TieredExtent struct {
	LocalStartOffset  int64 `json:"local_start_offset"`
	LocalEndOffset    int64 `json:"local_end_offset"`
	LocalBytes        int64 `json:"local_bytes"`
	RemoteStartOffset int64 `json:"remote_start_offset"`
	RemoteEndOffset   int64 `json:"remote_end_offset"` // the offset after the last one held remotely
	RemoteBytes       int64 `json:"remote_bytes"`
	RemoteSegments    int   `json:"remote_segments"`
}

// TierHealth is how a node's uploads to the remote store go.
type TierHealth struct {
	// UploadFailing is set while the last upload of some tiered
	// partition led by the node failed; Error is its error.
	UploadFailing bool   `json:"upload_failing"`
	Error         string `json:"error,omitempty"`
	// UploadLagBytes is the bytes of closed segments not uploaded yet.
	UploadLagBytes int64 `json:"upload_lag_bytes"`
}

// CoordinatorWriter marks a coordinator's write to an internal topic.
type CoordinatorWriter struct {
	// From is the writing node's ID.
	From int32 `json:"from"`
}

// ShareForwarded marks a forwarded share-group offsets request.
type ShareForwarded struct {
	// From is the coordinator's node ID.
	From int32 `json:"from"`
}

// SharePartitionState counts a share-partition's in-flight records by
// state (docs/queues.md).
type SharePartitionState struct {
	// EndOffset is the first offset never acquired.
	EndOffset    int64 `json:"end_offset"`
	Available    int   `json:"available"`
	Acquired     int   `json:"acquired"`
	Acknowledged int   `json:"acknowledged"`
	Archived     int   `json:"archived"`
}

// ClusterBroker is mq's view of a registered broker's state.
type ClusterBroker struct {
	// InControlledShutdown is set from a broker's request to shut down
	// (SIGTERM) until it registers again: the controller is moving its
	// leaderships to other in-sync replicas.
	InControlledShutdown bool `json:"in_controlled_shutdown,omitempty"`
}

// Software names the program that answers, and its release.
type Software struct {
	// Name is "mq" for mqd.
	Name string `json:"name"`
	// Version is the release (lib/version): a tag such as v0.4.0, a
	// pseudo-version, or "dev".
	Version string `json:"version"`
}

// DirHealth is the storage health of one log directory.
type DirHealth struct {
	// Failing is set while writes to the directory fail (a full disk, an
	// I/O error): from the first failed write until a write succeeds again.
	Failing bool `json:"failing"`
	// Error is the last write error, while Failing.
	Error string `json:"error,omitempty"`
	// FailingSinceMillis is when the directory began failing (Unix
	// milliseconds), 0 when it is not.
	FailingSinceMillis int64 `json:"failing_since_ms,omitempty"`
	// StorageErrors counts the failed writes since mqd started.
	StorageErrors uint64 `json:"storage_errors"`
	// CorruptRanges counts the damaged ranges found since mqd started
	// (log.StorageCounters.DamagedRanges).
	CorruptRanges uint64 `json:"corrupt_ranges"`
}

// PartitionHealth is the storage health of one partition's log.
type PartitionHealth struct {
	// StorageError is the error of the partition's last write, while its
	// writes fail; empty otherwise.
	StorageError string `json:"storage_error,omitempty"`
	// FailingSinceMillis is when its writes began failing (Unix ms).
	FailingSinceMillis int64 `json:"failing_since_ms,omitempty"`
	// Damaged are the ranges of the log that failed their checks and are
	// not served, oldest first.
	Damaged []DamagedRange `json:"damaged,omitempty"`
	// Cleaner is the compaction state of a compacted topic's log.
	Cleaner *CleanerState `json:"cleaner,omitempty"`
}

// CleanerState is what the log cleaner has done to one compacted log.
type CleanerState struct {
	// DirtyRatio is the share of the sealed segments' bytes not compacted
	// yet; FirstDirtyOffset is where they begin.
	DirtyRatio       float64 `json:"dirty_ratio"`
	FirstDirtyOffset int64   `json:"first_dirty_offset"`
	// LastCleanedMillis is when a pass last cleaned the log (Unix ms), 0
	// when none has.
	LastCleanedMillis int64 `json:"last_cleaned_ms"`
	// Passes and BytesReclaimed count the passes since mqd started and the
	// bytes they freed.
	Passes         int64 `json:"passes"`
	BytesReclaimed int64 `json:"bytes_reclaimed"`
}

// DamagedRange is a range of a partition's log whose bytes failed their
// checks (CRC, structure): the offsets it covers and where it is on disk.
type DamagedRange struct {
	// FromOffset and ToOffset delimit the offsets lost to the damage:
	// [FromOffset, ToOffset).
	FromOffset int64 `json:"from_offset"`
	ToOffset   int64 `json:"to_offset"`
	// Segment is the segment file's name, Position and Length the bytes
	// of it that are damaged.
	Segment  string `json:"segment"`
	Position int64  `json:"position"`
	Length   int64  `json:"length"`
	// Reason says what check failed.
	Reason string `json:"reason"`
	// DetectedMillis is when the damage was found (Unix milliseconds).
	DetectedMillis int64 `json:"detected_ms"`
	// Skipped is set once an operator gave the range up (SkipDamaged):
	// consumers step over it.
	Skipped bool `json:"skipped,omitempty"`
}

// Set stores v as the field tag of t.
func Set(t *kmsg.Tags, tag uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("tags: encode %d: %w", tag, err)
	}
	t.Set(tag, b)
	return nil
}

// Get decodes the field tag of t into v. It reports false when t does not
// hold the field (an older mqd, or a Kafka broker).
func Get(t *kmsg.Tags, tag uint32, v any) (bool, error) {
	var val []byte
	found := false
	t.Each(func(k uint32, b []byte) {
		if k == tag {
			val, found = b, true
		}
	})
	if !found {
		return false, nil
	}
	if err := json.Unmarshal(val, v); err != nil {
		return true, fmt.Errorf("tags: decode %d: %w", tag, err)
	}
	return true, nil
}
