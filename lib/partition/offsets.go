package partition

import (
	"errors"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/replica"
)

// Offsets by time (ListOffsets): what a partition answers a client asking
// for the latest offset, the record with the largest timestamp, or the
// first record at or after a timestamp. A client is answered below the
// high-water mark, a read_committed consumer below the last stable offset
// (as its fetches read); a follower's latest is the log end offset.

// ListEnd is the offset below which ListOffsets answers: the last stable
// offset for a read_committed consumer (committed, replicaID < 0), else
// the high-water mark.
func ListEnd(info replica.ReadInfo, replicaID int32, committed bool) int64 {
	if committed && replicaID < 0 {
		return info.LastStableOffset
	}
	return info.HighWatermark
}

// LatestOffset is ListOffsets' latest: the log end offset for a follower
// (replicaID >= 0), else ListEnd; replica.ErrHighWatermarkBehind while a
// new leader's high-water mark has not reached its epoch's start.
func LatestOffset(info replica.ReadInfo, replicaID int32, committed bool) (int64, error) {
	if replicaID >= 0 {
		return info.LogEndOffset, nil
	}
	if info.HighWatermarkBehind {
		return 0, replica.ErrHighWatermarkBehind // Kafka: OFFSET_NOT_AVAILABLE
	}
	return ListEnd(info, replicaID, committed), nil
}

// OffsetForTimestampBelow returns the first offset whose timestamp is at
// or after timestamp, with that record's timestamp, or -1, -1 when no
// record below end is.
func (h *Hosted) OffsetForTimestampBelow(timestamp, end int64) (offset, found int64, err error) {
	o, foundTS, err := h.Log().OffsetForTimestamp(timestamp)
	if errors.Is(err, log.ErrNotFound) || err == nil && o >= end {
		return -1, -1, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return o, foundTS, nil
}
