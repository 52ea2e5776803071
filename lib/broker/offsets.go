package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/server"
)

// Special ListOffsets timestamps.
const (
	listLatest        = -1 // the high-water mark (log end for followers)
	listEarliest      = -2 // the log start offset
	listMaxTimestamp  = -3 // the record with the largest timestamp (v7+, KIP-734)
	listEarliestLocal = -4 // the first offset on local disk (v8+, KIP-405): the log start, without tiered storage
)

// handleListOffsets answers offsets by time: earliest, latest (the
// high-water mark; for read_committed too, as there are no transactions),
// max timestamp, or the first offset whose timestamp is at or after the one
// asked. The leader epoch returned is the partition's current one.
func (b *Broker) handleListOffsets(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	if b.listNeedsRemote(r) {
		// A lookup by timestamp in remote data waits for the store:
		// answered in the Reply, off the connection's reader.
		return func() server.Response { return server.Response{Msg: b.listOffsets(ctx, r, req.Version)} }
	}
	return reply(b.listOffsets(ctx, r, req.Version))
}

// listOffsets answers a ListOffsets request.
func (b *Broker) listOffsets(ctx context.Context, r *kmsg.ListOffsetsRequest, version int16) *kmsg.ListOffsetsResponse {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := b.ctrl.Image()
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		t := img.Topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			epoch := rp.CurrentLeaderEpoch
			if version < 4 {
				epoch = -1
			}
			t := b.parts.TopicAt(rt.Topic, t, rp.Partition, epoch)
			committed := version >= 2 && r.IsolationLevel == 1
			offset, ts, leaderEpoch, err := b.listOffset(ctx, t, rp.Partition, epoch, rp.Timestamp, r.ReplicaID, version, committed)
			sp.ErrorCode = offsetsError(err)
			if err != nil {
				sp.Offset, sp.Timestamp = -1, -1
				continue
			}
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch
		}
	}
	return resp
}

// listOffset answers one partition of ListOffsets. A read_committed
// consumer (committed) is answered below the last stable offset, as its
// fetches read, instead of the high-water mark.
func (b *Broker) listOffset(ctx context.Context, t *controller.Topic, index, currentEpoch int32, timestamp int64, replicaID int32, version int16, committed bool) (offset, ts int64, epoch int32, err error) {
	h, err := b.parts.Leader(t, index)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := h.CheckLeaderEpoch(currentEpoch); err != nil {
		return 0, 0, 0, err
	}
	info := h.Offsets()
	epoch = info.LeaderEpoch
	end := partition.ListEnd(info, replicaID, committed)
	switch {
	case timestamp == listLatest:
		o, err := partition.LatestOffset(info, replicaID, committed)
		if err != nil {
			return 0, 0, 0, err
		}
		return o, -1, epoch, nil
	case timestamp == listEarliest:
		return b.logStart(h, info.LogStartOffset, replicaID), -1, epoch, nil
	case timestamp == listEarliestLocal && version >= 8:
		return info.LogStartOffset, -1, epoch, nil
	case timestamp == listMaxTimestamp && version >= 7:
		o, ts, err := b.parts.MaxTimestampBelow(ctx, h, replicaID, end)
		if err != nil {
			return 0, 0, 0, err
		}
		return o, ts, epoch, nil
	case timestamp >= 0:
		if o, foundTS, ok, err := b.remoteOffsetForTimestamp(ctx, h, info.LogStartOffset, timestamp, replicaID); err != nil || ok {
			return o, foundTS, epoch, err
		}
		o, foundTS, err := h.OffsetForTimestampBelow(timestamp, end)
		if err != nil {
			return 0, 0, 0, err
		}
		return o, foundTS, epoch, nil
	}
	return 0, 0, 0, errInvalidTimestamp
}

// handleDeleteRecords raises log start offsets: every record below the
// offset asked becomes unreadable, and whole segments below it are removed.
// Offset -1 means the high-water mark; beyond it is OFFSET_OUT_OF_RANGE.
func (b *Broker) handleDeleteRecords(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img := b.ctrl.Image()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		t := img.Topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			var h *partition.Hosted
			var err error
			if t != nil && t.IsInternal() {
				err = errInternalTopic
			} else {
				h, err = b.parts.Leader(t, rp.Partition)
			}
			if err == nil && (img.RemoteLog(t.ID, rp.Partition) != nil || h.Config().RemoteStorageEnable) {
				// The remote part would keep serving what is deleted.
				err = errTieredDeleteRecords
			}
			if err == nil {
				offset := rp.Offset
				if offset == -1 {
					offset = h.HighWatermark()
				}
				sp.LowWatermark, err = h.DeleteRecordsBefore(offset)
			}
			if err != nil {
				sp.LowWatermark = -1
				sp.ErrorCode = offsetsError(err)
			}
		}
	}
	return reply(resp)
}
