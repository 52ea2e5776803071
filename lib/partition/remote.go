package partition

import (
	"context"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/tier"
)

// Reads of the remote part of a tiered partition (lib/tier), for the
// Fetch, ListOffsets and DescribeLogDirs handlers: whether the remote log
// holds an offset the local log does not, the log start a consumer is
// told, remote reads and lookups by timestamp, and the extents and health
// DescribeLogDirs reports. A consumer is served remotely; a follower is
// not (lib/broker answers it OFFSET_MOVED_TO_TIERED_STORAGE and it
// restarts its log at the leader's local start). The checks read the
// controller's image only and allocate nothing: they run on the fetch
// path. The reads wait for the store, up to the Tier's read timeout.

// remoteLog is h's remote log in the controller's current image, nil
// when it has none.
func (m *Manager) remoteLog(h *Hosted) *controller.RemoteLog {
	return m.ctrl.Image().RemoteLog(h.topicID, h.Partition.Partition())
}

// BelowLocalOfTiered reports whether offset, which h's local log does not
// hold, is below the local log start of a partition whose remote log
// holds data: a follower that asks for it is to restart its log at the
// local start.
func (m *Manager) BelowLocalOfTiered(h *Hosted, offset int64) bool {
	return m.remoteLog(h).StartOffset() >= 0 && offset < h.Log().StartOffset()
}

// RemoteCovers reports whether offset, which h's local log does not hold,
// is in the partition's remote log: a consumer's read of it is a remote
// read (ReadRemote).
func (m *Manager) RemoteCovers(h *Hosted, offset int64) bool {
	rl := m.remoteLog(h)
	return rl.StartOffset() >= 0 && offset >= rl.StartOffset() && offset < rl.EndOffset()
}

// LogStart is the log start offset a consumer is told of h, whose local
// log starts at local: the remote log's start when the partition has one
// below the local start.
func (m *Manager) LogStart(h *Hosted, local int64) int64 {
	if start := m.remoteLog(h).StartOffset(); start >= 0 && start < local {
		return start
	}
	return local
}

// HasRemoteLog reports whether partition index of the topic with id has
// a remote log in the controller's image.
func (m *Manager) HasRemoteLog(id controller.TopicID, index int32) bool {
	img := m.ctrl.Image()
	return len(img.RemoteLogs) > 0 && img.RemoteLog(id, index) != nil
}

// ReadRemote returns whole batches of h's remote log from the one holding
// offset on, up to maxBytes (the first whole even when larger), opening
// the node's Tier if need be. For a read_committed consumer (committed)
// it appends to aborted the aborted transactions the batches need, as a
// local read's log.AbortedTxns: from the remote segments'
// aborted-transaction indexes, then from the local log's for the markers
// past the remote end. It gives up after the Tier's read timeout.
func (m *Manager) ReadRemote(ctx context.Context, h *Hosted, offset int64, maxBytes int, committed bool, aborted []log.AbortedTxn) ([]byte, []log.AbortedTxn, error) {
	t, err := m.Tier()
	if err != nil {
		return nil, aborted, err
	}
	rl := m.remoteLog(h)
	b, err := t.Read(ctx, rl, offset, maxBytes)
	if err != nil || !committed {
		return b, aborted, err
	}
	upto := tier.LastOffset(b) + 1
	aborted, complete, err := t.AbortedTxns(ctx, rl, aborted, offset, upto)
	if err != nil {
		return nil, aborted, err
	}
	if !complete {
		// The markers from the remote end on are in the local log
		// (local retention deletes only what is remote).
		aborted = h.Log().AbortedTxns(aborted, max(offset, rl.EndOffset()), upto)
	}
	return b, aborted, nil
}

// RemoteOffsetForTimestamp answers ListOffsets by timestamp from h's
// remote log, when the partition has remote data below its local start
// (local): the earliest offset whose timestamp is at or after ts, and
// that timestamp (ok false: look locally).
func (m *Manager) RemoteOffsetForTimestamp(ctx context.Context, h *Hosted, local, ts int64) (offset, timestamp int64, ok bool, err error) {
	rl := m.remoteLog(h)
	if rl.StartOffset() < 0 || rl.StartOffset() >= local {
		return -1, -1, false, nil
	}
	t, err := m.Tier()
	if err != nil {
		return -1, -1, false, err
	}
	o, found, ok, err := t.OffsetForTimestamp(ctx, rl, ts)
	if err != nil || !ok || o >= local {
		return -1, -1, false, err
	}
	return o, found, true, nil
}

// RemoteMaxTimestamp answers ListOffsets MAX_TIMESTAMP from h's remote
// log: its largest record timestamp and the first offset holding it (ok
// false: the partition has no remote data with a timestamp).
func (m *Manager) RemoteMaxTimestamp(ctx context.Context, h *Hosted) (offset, timestamp int64, ok bool, err error) {
	rl := m.remoteLog(h)
	if rl == nil {
		return -1, -1, false, nil
	}
	t, err := m.Tier()
	if err != nil {
		return -1, -1, false, err
	}
	return t.MaxTimestamp(ctx, rl)
}

// MaxTimestampBelow answers ListOffsets MAX_TIMESTAMP for h: the offset
// of its record with the largest timestamp, the first of equals, and that
// timestamp, or -1, -1 when that record is not below end. A consumer
// (replicaID < 0) is answered from the remote log too, whose record wins
// unless the local log's is larger; a follower from the local log only.
func (m *Manager) MaxTimestampBelow(ctx context.Context, h *Hosted, replicaID int32, end int64) (offset, timestamp int64, err error) {
	timestamp, offset = h.Log().MaxTimestamp()
	if replicaID < 0 {
		o, rts, ok, err := m.RemoteMaxTimestamp(ctx, h)
		if err != nil {
			return -1, -1, err
		}
		if ok && (offset < 0 || rts >= timestamp) {
			offset, timestamp = o, rts
		}
	}
	if offset < 0 || offset >= end {
		return -1, -1, nil
	}
	return offset, timestamp, nil
}

// TieredExtent is the kafkaext.LogDirTiered field of a partition hosted
// here that is tiered or has remote data.
func (m *Manager) TieredExtent(topic string, partition int32) (kafkaext.TieredExtent, bool) {
	h := m.Lookup(topic, partition)
	if h == nil {
		return kafkaext.TieredExtent{}, false
	}
	rl := m.remoteLog(h)
	if cfg := h.Config(); rl == nil && (cfg == nil || !cfg.RemoteStorageEnable) {
		return kafkaext.TieredExtent{}, false
	}
	l := h.Log()
	e := kafkaext.TieredExtent{
		LocalStartOffset: l.StartOffset(), LocalEndOffset: l.EndOffset(), LocalBytes: l.Size(),
		RemoteStartOffset: rl.StartOffset(), RemoteEndOffset: rl.EndOffset(), RemoteBytes: rl.Size(),
	}
	if rl != nil {
		e.RemoteSegments = len(rl.Segments)
	}
	return e, true
}

// TierHealth is the kafkaext.LogDirTier field of the node's log
// directory, once it tiers anything.
func (m *Manager) TierHealth() (kafkaext.TierHealth, bool) {
	t := m.TierIfOpen()
	if t == nil {
		return kafkaext.TierHealth{}, false
	}
	s := t.Stats()
	th := kafkaext.TierHealth{UploadFailing: s.Failing.Load() != 0, UploadLagBytes: s.LagBytes.Load()}
	if th.UploadFailing {
		th.Error = m.TierError()
	}
	return th, true
}
