package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/server"
)

// handleOffsetForLeaderEpoch answers OffsetForLeaderEpoch (key 23, KIP-101,
// KIP-279, KIP-320): for each partition, the end offset of the leader epoch
// asked (the start offset of the next larger epoch in the leader's
// leader-epoch history, or its log end offset for the latest epoch) and the
// largest epoch at or below the one asked. Followers use it to find where
// their log diverged from the leader's before fetching; consumers (kgo,
// librdkafka) use it to detect truncation after a leader change.
//
// Only the leader answers, for consumers and followers alike (a follower's
// history may itself be behind). The request's current leader epoch (v2+)
// is checked first, as Kafka does: FENCED_LEADER_EPOCH when the client's is
// older, UNKNOWN_LEADER_EPOCH when newer, then NOT_LEADER_OR_FOLLOWER. An
// epoch the history does not hold (newer than its latest, or an empty
// history) is answered with epoch -1 and end offset -1 (KIP-320's
// UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), without an error.
func (b *Broker) handleOffsetForLeaderEpoch(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := b.ctrl.Image()
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		t := img.Topics[rt.Topic]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			current := rp.CurrentLeaderEpoch
			if req.Version < 2 {
				current = -1
			}
			t := b.parts.TopicAt(rt.Topic, t, rp.Partition, current)
			endOffset, epoch, err := b.parts.EndOffsetForEpoch(t, rp.Partition, current, rp.LeaderEpoch)
			sp.ErrorCode = epochsError(err)
			if err != nil {
				continue // LeaderEpoch and EndOffset stay -1
			}
			sp.LeaderEpoch, sp.EndOffset = epoch, endOffset
		}
	}
	return reply(resp)
}
