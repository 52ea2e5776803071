package partition

import "github.com/mqproject/mq/lib/controller"

// EndOffsetForEpoch answers OffsetForLeaderEpoch for partition index of
// t from the hosted replica (replica.Partition.EndOffsetForEpoch):
// ErrUnknownPartition, or ErrNotHosted when this node holds no replica.
func (m *Manager) EndOffsetForEpoch(t *controller.Topic, index, currentEpoch, leaderEpoch int32) (int64, int32, error) {
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return -1, -1, ErrUnknownPartition
	}
	h := m.Replica(t, index)
	if h == nil {
		return -1, -1, ErrNotHosted
	}
	return h.EndOffsetForEpoch(currentEpoch, leaderEpoch)
}

// HighWatermark returns the high-water mark of partition index of t when
// this node hosts a replica of it (a follower's lags the leader's by a
// fetch).
func (m *Manager) HighWatermark(t *controller.Topic, index int32) (int64, bool) {
	h := m.Replica(t, index)
	if h == nil {
		return 0, false
	}
	return h.HighWatermark(), true
}
