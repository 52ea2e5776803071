package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/server"
)

// Tiered storage on the fetch path (lib/tier): a consumer's offset below
// the local log start that the partition's remote log holds is read from
// the remote store, in the Reply (the writer goroutine), never on the
// reader, so a slow or down store delays only that fetch; the read gives
// up after the Tier's read timeout and the partition is answered
// KAFKA_STORAGE_ERROR, which clients retry. Followers are not served
// remotely: below the leader's local log start they get
// OFFSET_OUT_OF_RANGE, and restart their log at the leader's local log
// start (ListOffsets answers a replica with the local start).

// errMovedToTieredStorage answers a follower's fetch below the leader's
// local log start of a partition with remote data:
// OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405).
var errMovedToTieredStorage = errors.New("broker: offset moved to tiered storage")

// errTieredDeleteRecords refuses DeleteRecords on a tiered partition
// (POLICY_VIOLATION): it would move the local log start only, and the
// remote part would keep serving what was deleted.
var errTieredDeleteRecords = errors.New("broker: DeleteRecords is not supported on topics with remote.storage.enable")

// movedToTiered reports whether err, a follower's read of fp, is an
// offset below the local log start of a partition whose remote log
// holds data.
func (f *fetch) movedToTiered(fp *fetchPartition, err error) bool {
	return errors.Is(err, log.ErrOffsetOutOfRange) && f.tiers.BelowLocalOfTiered(fp.p, fp.fetchOffset)
}

// remoteCovers reports whether err, a consumer's read of fp, is an offset
// below the local log that the remote log holds.
func (f *fetch) remoteCovers(fp *fetchPartition, err error) bool {
	return f.replicaID < 0 && errors.Is(err, log.ErrOffsetOutOfRange) && f.tiers.RemoteCovers(fp.p, fp.fetchOffset)
}

// logStart is the log start offset a fetch is told: for a consumer, the
// remote log's start when the partition has one below the local start.
func (f *fetch) logStart(fp *fetchPartition, local int64) int64 {
	if f.replicaID >= 0 {
		return local
	}
	return f.tiers.LogStart(fp.p, local)
}

// readRemote does the remote reads read left (remoteWant), each bounded
// by the Tier's read timeout and the connection's context.
func (f *fetch) readRemote() {
	if !f.remotePending {
		return
	}
	f.remotePending = false
	for _, fp := range f.flat {
		want := fp.remoteWant
		if want == 0 {
			continue
		}
		fp.remoteWant = 0
		b, aborted, err := f.tiers.ReadRemote(f.ctx, fp.p, fp.fetchOffset, want, f.committed, fp.aborted[:0])
		fp.aborted = aborted
		if err != nil {
			fp.highWatermark, fp.logStartOffset, fp.err = -1, -1, err
			continue
		}
		fp.remote = b
	}
}

// readRemoteAndRespond is the Reply of a fetch whose read left remote
// reads to do.
func (f *fetch) readRemoteAndRespond() server.Response {
	f.readRemote()
	return f.response()
}

// logStart is the log start offset ListOffsets EARLIEST answers: for a
// consumer, the remote log's start when the partition has one below the
// local start; for a replica, the local start, which a follower that
// fell below the leader's local log restarts at.
func (b *Broker) logStart(h *partition.Hosted, local int64, replicaID int32) int64 {
	if replicaID >= 0 {
		return local
	}
	return b.parts.LogStart(h, local)
}

// remoteOffsetForTimestamp answers ListOffsets by timestamp from the
// remote log for a consumer (ok false: look locally).
func (b *Broker) remoteOffsetForTimestamp(ctx context.Context, h *partition.Hosted, local, ts int64, replicaID int32) (offset, timestamp int64, ok bool, err error) {
	if replicaID >= 0 {
		return -1, -1, false, nil
	}
	return b.parts.RemoteOffsetForTimestamp(ctx, h, local, ts)
}

// listNeedsRemote reports whether a ListOffsets request looks a
// timestamp (or the max timestamp) up in a partition with remote data (a
// consumer's only), which may wait for the store.
func (b *Broker) listNeedsRemote(r *kmsg.ListOffsetsRequest) bool {
	if r.ReplicaID >= 0 {
		return false
	}
	img := b.ctrl.Image()
	if len(img.RemoteLogs) == 0 {
		return false
	}
	for i := range r.Topics {
		t := img.Topics[r.Topics[i].Topic]
		if t == nil {
			continue
		}
		for _, p := range r.Topics[i].Partitions {
			if (p.Timestamp >= 0 || p.Timestamp == listMaxTimestamp) && b.parts.HasRemoteLog(t.ID, p.Partition) {
				return true
			}
		}
	}
	return false
}
