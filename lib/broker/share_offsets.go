package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
)

// AlterShareGroupOffsets and DeleteShareGroupOffsets change the state of
// an empty share group's share-partitions: a new start offset (nothing in
// flight), or no state at all (the next read starts from
// share.auto.offset.reset). The group's coordinator checks the group is
// empty and passes each partition to its leader, which holds the
// share-partition: here, or on another node with the request forwarded
// (kafkaext.ShareForward) over a peer connection.

// forwarded says whether a request came from a coordinator.
func forwarded(tags *kmsg.Tags) bool {
	var f kafkaext.ShareForwarded
	ok, err := kafkaext.Get(tags, kafkaext.ShareForward, &f)
	return ok && err == nil
}

// checkShareGroupEmpty is the coordinator's check of a change request
// (coordinator.Set.CheckShareGroupEmpty).
func (b *Broker) checkShareGroupEmpty(group string) (int16, *string) {
	img := b.ctrl.Image()
	g, _ := b.shareSettings(img, group)
	if err := b.coords.CheckShareGroupEmpty(group, b.clock.Now(), g.SessionTimeout, topicCounts(img)); err != nil {
		return groupError(err), groupErrorMessage(err)
	}
	return 0, nil
}

// resetSharePartition replaces a share-partition led here: a new start
// offset (clamped to the log), or, with del, no state.
func (b *Broker) resetSharePartition(ctx context.Context, group string, t *controller.Topic, partition int32, start int64, del bool) error {
	_, s := b.shareSettings(b.ctrl.Image(), group)
	return b.shares.Reset(ctx, group, queue.TP{TopicID: t.ID, Partition: partition}, start, del, s)
}

// shareForwardTimeout bounds a request forwarded to another node.
const shareForwardTimeout = 10 * time.Second

// onLeader runs change for a partition led here, or forwards req (built
// by one) to the node that leads it and returns the partition's error code
// from its answer.
func (b *Broker) onShareLeader(ctx context.Context, t *controller.Topic, partition int32, fwd bool, local func() error, remote func(*peer.Conn) (int16, *string, error)) (int16, *string) {
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code, nil
	}
	leader := t.Partitions[partition].Leader
	if leader == b.cfg.Settings.NodeID || fwd || leader < 0 {
		if err := local(); err != nil {
			return shareError(err), kmsg.StringPtr(err.Error())
		}
		return 0, nil
	}
	addr, err := b.parts.PeerAddr(leader)
	var c *peer.Conn
	if err == nil {
		c, err = b.peers.Get(ctx, addr)
	}
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr(err.Error())
	}
	code, msg, err := remote(c)
	b.peers.Put(c, err)
	if err != nil {
		return kerr.RequestTimedOut.Code, kmsg.StringPtr(err.Error())
	}
	return code, msg
}

func (b *Broker) handleAlterShareGroupOffsets(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	return func() server.Response {
		resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		fwd := forwarded(&r.UnknownTags)
		if !fwd {
			if resp.ErrorCode, resp.ErrorMessage = b.checkShareGroupEmpty(r.GroupID); resp.ErrorCode != 0 {
				return server.Response{Msg: resp}
			}
		}
		img := b.ctrl.Image()
		for _, rt := range r.Topics {
			t := img.Topics[rt.Topic]
			st := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			st.Topic = rt.Topic
			if t != nil {
				st.TopicID = t.ID
			}
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode, sp.ErrorMessage = b.onShareLeader(ctx, t, rp.Partition, fwd,
					func() error {
						return b.resetSharePartition(ctx, r.GroupID, t, rp.Partition, rp.StartOffset, false)
					},
					func(c *peer.Conn) (int16, *string, error) {
						f := kmsg.NewPtrAlterShareGroupOffsetsRequest()
						f.GroupID = r.GroupID
						f.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: rt.Topic, Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{rp}}}
						if err := kafkaext.Set(&f.UnknownTags, kafkaext.ShareForward, kafkaext.ShareForwarded{From: b.cfg.Settings.NodeID}); err != nil {
							return 0, nil, err
						}
						kresp, err := c.Do(ctx, f, shareForwardTimeout)
						if err != nil {
							return 0, nil, err
						}
						fr := kresp.(*kmsg.AlterShareGroupOffsetsResponse)
						if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
							return fr.ErrorCode, fr.ErrorMessage, nil
						}
						p := fr.Topics[0].Partitions[0]
						return p.ErrorCode, p.ErrorMessage, nil
					})
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return server.Response{Msg: resp}
	}
}

func (b *Broker) handleDeleteShareGroupOffsets(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	return func() server.Response {
		resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		fwd := forwarded(&r.UnknownTags)
		if !fwd {
			if resp.ErrorCode, resp.ErrorMessage = b.checkShareGroupEmpty(r.GroupID); resp.ErrorCode != 0 {
				return server.Response{Msg: resp}
			}
		}
		img := b.ctrl.Image()
		for _, rt := range r.Topics {
			t := img.Topics[rt.Topic]
			st := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			st.Topic = rt.Topic
			if t == nil {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			st.TopicID = t.ID
			for p := range t.Partitions {
				if fwd && t.Partitions[p].Leader != b.cfg.Settings.NodeID {
					continue // its own leader gets the request too
				}
				code, msg := b.onShareLeader(ctx, t, int32(p), fwd,
					func() error { return b.resetSharePartition(ctx, r.GroupID, t, int32(p), 0, true) },
					func(c *peer.Conn) (int16, *string, error) {
						// The leader deletes every partition of the topic
						// it leads; those it does not lead are skipped
						// there and done by their own leaders.
						f := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
						f.GroupID = r.GroupID
						f.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: rt.Topic}}
						if err := kafkaext.Set(&f.UnknownTags, kafkaext.ShareForward, kafkaext.ShareForwarded{From: b.cfg.Settings.NodeID}); err != nil {
							return 0, nil, err
						}
						kresp, err := c.Do(ctx, f, shareForwardTimeout)
						if err != nil {
							return 0, nil, err
						}
						fr := kresp.(*kmsg.DeleteShareGroupOffsetsResponse)
						if fr.ErrorCode != 0 || len(fr.Topics) != 1 {
							return fr.ErrorCode, fr.ErrorMessage, nil
						}
						return fr.Topics[0].ErrorCode, fr.Topics[0].ErrorMessage, nil
					})
				if code != 0 && st.ErrorCode == 0 {
					st.ErrorCode, st.ErrorMessage = code, msg
				}
			}
			if !fwd && st.ErrorCode == 0 {
				if err := b.shares.Unindex(ctx, r.GroupID, t.ID); err != nil {
					st.ErrorCode, st.ErrorMessage = shareError(err), kmsg.StringPtr(err.Error())
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		return server.Response{Msg: resp}
	}
}
