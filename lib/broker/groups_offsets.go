package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/server"
)

// knownPartition reports whether the image has the partition.
func knownPartition(img *controller.Image, topic string, partition int32) bool {
	return img.Partition(topic, partition) != nil
}

// handleOffsetCommit stores offsets, checking the member's generation
// (or, for generation -1 and no member id, accepting simple commits to a
// group without members). It runs on the reader goroutine: the commit is
// appended to __consumer_offsets and waited for before the next request
// of the connection, so a pipelined OffsetFetch sees it. Partitions of
// unknown topics get UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) handleOffsetCommit(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	img := b.ctrl.Image()
	cr := group.CommitRequest{Group: r.Group, MemberID: r.MemberID, InstanceID: optString(r.InstanceID), Generation: r.Generation}
	if req.Version == 0 {
		cr.Generation = -1
	}
	var slots [][]int
	cr.Offsets, slots = commitOffsets(img, r.Topics,
		func(t *kmsg.OffsetCommitRequestTopic) (string, []kmsg.OffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p *kmsg.OffsetCommitRequestTopicPartition) (int32, int64, int32, *string) {
			return p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
		}, req.Version >= 6)
	var errs []error
	var err error
	switch {
	case b.shareGroups.Has(r.Group):
		// A share group's progress is its share-partitions' state, not
		// committed offsets.
		err = errShareGroupID
	case len(cr.Offsets) > 0:
		errs, err = b.groups.c.CommitOffsets(ctx, cr)
	}
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(r.Topics))
	for i, t := range r.Topics {
		resp.Topics[i] = kmsg.NewOffsetCommitResponseTopic()
		resp.Topics[i].Topic = t.Topic
		resp.Topics[i].Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			resp.Topics[i].Partitions[j] = kmsg.NewOffsetCommitResponseTopicPartition()
			resp.Topics[i].Partitions[j].Partition = p.Partition
		}
	}
	for i, t := range slots {
		for j, index := range t {
			resp.Topics[i].Partitions[j].ErrorCode = commitCode(index, errs, err)
		}
	}
	return reply(resp)
}

// commitOffsets reads the partitions of an offset commit, OffsetCommit's
// or TxnOffsetCommit's (only their kmsg types differ: topic and partition
// give their fields), into the coordinator's offsets. slots[i][j] is the
// place of topic i's partition j in offsets, -1 for a partition the image
// does not have. Without withEpoch (older versions) leader epochs are -1.
func commitOffsets[T, P any](img *controller.Image, topics []T, topic func(*T) (string, []P),
	partition func(*P) (id int32, offset int64, leaderEpoch int32, metadata *string), withEpoch bool,
) (offsets []group.CommitOffset, slots [][]int) {
	slots = make([][]int, len(topics))
	for i := range topics {
		name, ps := topic(&topics[i])
		slots[i] = make([]int, len(ps))
		for j := range ps {
			id, offset, epoch, metadata := partition(&ps[j])
			if !knownPartition(img, name, id) {
				slots[i][j] = -1
				continue
			}
			if !withEpoch {
				epoch = -1
			}
			slots[i][j] = len(offsets)
			offsets = append(offsets, group.CommitOffset{
				TopicPartition: group.TopicPartition{Topic: name, Partition: id},
				Offset:         group.Offset{Offset: offset, LeaderEpoch: epoch, Metadata: optString(metadata)},
			})
		}
	}
	return offsets, slots
}

// commitCode is the error code of a partition of an offset commit at
// index of commitOffsets' offsets: UNKNOWN_TOPIC_OR_PARTITION for -1, else
// the commit's error, or the partition's own (errs).
func commitCode(index int, errs []error, err error) int16 {
	switch {
	case index < 0:
		return groupError(partition.ErrUnknownPartition)
	case err != nil:
		return groupError(err)
	}
	return groupError(errs[index])
}

// handleOffsetFetch returns committed offsets: of one group (v0-v7) or
// several (v8+); of the partitions asked, or all (no topics, v2+).
// Uncommitted partitions have offset -1. With RequireStable (v7+,
// KIP-447), a partition with offsets committed in a transaction not ended
// yet answers UNSTABLE_OFFSET_COMMIT (the client asks again).
func (b *Broker) handleOffsetFetch(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range r.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			var tps []group.TopicPartition
			if rg.Topics != nil {
				tps = []group.TopicPartition{}
				for _, t := range rg.Topics {
					for _, p := range t.Partitions {
						tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			offs, err := b.groups.c.FetchOffsets(rg.Group, tps)
			g.ErrorCode = groupError(err)
			for _, o := range offs {
				if n := len(g.Topics); n == 0 || g.Topics[n-1].Topic != o.Topic {
					t := kmsg.NewOffsetFetchResponseGroupTopic()
					t.Topic = o.Topic
					g.Topics = append(g.Topics, t)
				}
				p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset.Offset, o.LeaderEpoch
				md := o.Metadata
				p.Metadata = &md
				if r.RequireStable && b.groups.c.HasPendingOffsets(rg.Group, o.TopicPartition) {
					p.Offset, p.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
				}
				t := &g.Topics[len(g.Topics)-1]
				t.Partitions = append(t.Partitions, p)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return reply(resp)
	}
	var tps []group.TopicPartition
	if r.Topics != nil || req.Version < 2 {
		tps = []group.TopicPartition{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	offs, err := b.groups.c.FetchOffsets(r.Group, tps)
	code := groupError(err)
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	if err != nil && req.Version < 2 {
		// No top-level error before v2: every partition carries it.
		for _, tp := range tps {
			offs = append(offs, group.FetchedOffset{TopicPartition: tp, Offset: group.Offset{Offset: -1, LeaderEpoch: -1}})
		}
	}
	for _, o := range offs {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.Topic {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = o.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset.Offset, o.LeaderEpoch
		md := o.Metadata
		p.Metadata = &md
		if req.Version < 2 {
			p.ErrorCode = code
		}
		if req.Version >= 7 && r.RequireStable && b.groups.c.HasPendingOffsets(r.Group, o.TopicPartition) {
			p.Offset, p.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return reply(resp)
}

// handleOffsetDelete deletes a group's offsets of partitions its members
// do not consume.
func (b *Broker) handleOffsetDelete(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	img := b.ctrl.Image()
	var tps []group.TopicPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	errs, err := b.groups.c.DeleteOffsets(ctx, r.Group, tps)
	if err != nil {
		resp.ErrorCode = groupError(err)
		return reply(resp)
	}
	i := 0
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = groupError(errs[i])
			if rp.ErrorCode == 0 && !knownPartition(img, t.Topic, p.Partition) {
				rp.ErrorCode = groupError(partition.ErrUnknownPartition)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply(resp)
}
