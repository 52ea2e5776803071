package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
)

// Share groups (KIP-932). Two roles meet here:
//
//   - the share group coordinator (this file): the node coordinating the
//     group's partition of __consumer_offsets, as for classic groups,
//     keeps the membership (lib/queue's Group) in memory and answers
//     ShareGroupHeartbeat and ShareGroupDescribe. Members that lose it
//     (a failover, a restart) are told UNKNOWN_MEMBER_ID and rejoin.
//   - the share-partition leader (share_fetch.go): the leader of a topic
//     partition keeps each group's share-partition (lib/queue's
//     Partition) and answers ShareFetch and ShareAcknowledge; the state
//     is made durable in __share_group_state (share_store.go) before an
//     answer goes out.

// shareAPIs lists the share group APIs, in the versions franz-go's share
// consumer uses.
func (b *Broker) shareAPIs() map[int16]api {
	return map[int16]api{
		kmsg.ShareGroupHeartbeat.Int16():       {1, 1, b.handleShareGroupHeartbeat},
		kmsg.ShareGroupDescribe.Int16():        {1, 1, b.handleShareGroupDescribe},
		kmsg.ShareFetch.Int16():                {1, 2, b.handleShareFetch},
		kmsg.ShareAcknowledge.Int16():          {1, 2, b.handleShareAcknowledge},
		kmsg.DescribeShareGroupOffsets.Int16(): {0, 1, b.handleDescribeShareGroupOffsets},
		kmsg.AlterShareGroupOffsets.Int16():    {0, 0, b.handleAlterShareGroupOffsets},
		kmsg.DeleteShareGroupOffsets.Int16():   {0, 0, b.handleDeleteShareGroupOffsets},
	}
}

// groupTypeShare is the type ListGroups (v5+) gives share groups.
const groupTypeShare = "share"

// topicCounts counts the partitions of the topics share groups may read
// (internal topics are not among them).
func topicCounts(img *controller.Image) queue.PartitionCounts {
	return func(name string) int32 {
		t := img.Topics[name]
		if t == nil || t.Internal {
			return 0
		}
		return int32(len(t.Partitions))
	}
}

// handleShareGroupHeartbeat joins, keeps or leaves a member, and sends it
// its assignment when that changed.
func (b *Broker) handleShareGroupHeartbeat(_ context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareGroupHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, err error) server.Reply {
		resp.ErrorCode = code
		if err != nil {
			resp.ErrorMessage = groupErrorMessage(err)
		}
		return reply(resp)
	}
	if r.GroupID == "" {
		return fail(kerr.InvalidGroupID.Code, errors.New("empty group id"))
	}
	img := b.ctrl.Image()
	g, _ := b.shareSettings(img, r.GroupID)
	res, err := b.coords.ShareHeartbeat(r.GroupID, queue.Heartbeat{
		MemberID: r.MemberID, MemberEpoch: r.MemberEpoch, Topics: r.SubscribedTopicNames,
		Rack: r.RackID, ClientID: clientID(req), ClientHost: clientHost(c),
	}, b.clock.Now(), g.SessionTimeout, topicCounts(img))
	if err != nil {
		return fail(groupError(err), err)
	}
	resp.MemberID = &r.MemberID
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(g.HeartbeatInterval.Milliseconds())
	if res.Assignment != nil {
		a := &kmsg.ShareGroupHeartbeatResponseAssignment{}
		for _, name := range slices.Sorted(maps.Keys(res.Assignment)) {
			t := img.Topics[name]
			if t == nil {
				continue
			}
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{
				TopicID: t.ID, Partitions: res.Assignment[name],
			})
		}
		resp.Assignment = a
	}
	return reply(resp)
}

// handleShareGroupDescribe describes share groups: their members and
// assignments.
func (b *Broker) handleShareGroupDescribe(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareGroupDescribeRequest)
	resp := r.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	img := b.ctrl.Image()
	for _, id := range r.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		if err := b.groups.c.Check(id); err != nil {
			g.ErrorCode, g.ErrorMessage = groupError(err), groupErrorMessage(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		members, epoch, ok := b.describeShareGroup(id, img)
		if !ok {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = "Empty", epoch, epoch, "simple"
		if len(members) > 0 {
			g.GroupState = "Stable"
		}
		if r.IncludeAuthorizedOperations {
			g.AuthorizedOperations = groupOperations
		}
		for _, m := range members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch = m.ID, m.Rack, m.Epoch
			rm.ClientID, rm.ClientHost, rm.SubscribedTopicNames = m.ClientID, m.ClientHost, m.Topics
			for _, name := range slices.Sorted(maps.Keys(m.Assignment)) {
				t := img.Topics[name]
				if t == nil {
					continue
				}
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions,
					kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{TopicID: t.ID, Topic: name, Partitions: m.Assignment[name]})
			}
			g.Members = append(g.Members, rm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return reply(resp)
}

// describeShareGroup returns a share group's members (after expiring the
// silent ones) and epoch; false when there is no such share group.
func (b *Broker) describeShareGroup(id string, img *controller.Image) ([]queue.Member, int32, bool) {
	g, _ := b.shareSettings(img, id)
	return b.shareGroups.Describe(id, b.clock.Now(), g.SessionTimeout, topicCounts(img))
}

// handleDescribeShareGroupOffsets answers each share-partition's start
// offset and lag (records after the start not yet acknowledged or
// archived, up to the high-water mark), from __share_group_state, with
// mq's counts of its in-flight window (kafkaext.SharePartition). Topics
// not named: every topic the group has state for (the index in
// __share_group_state). A partition the group has no state for has start
// offset -1.
func (b *Broker) handleDescribeShareGroupOffsets(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	return func() server.Response {
		resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		img := b.ctrl.Image()
		for _, rg := range r.Groups {
			g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			g.GroupID = rg.GroupID
			if err := b.groups.c.Check(rg.GroupID); err != nil {
				g.ErrorCode, g.ErrorMessage = groupError(err), groupErrorMessage(err)
				resp.Groups = append(resp.Groups, g)
				continue
			}
			topics := rg.Topics
			if topics == nil {
				// Every topic the group has state for.
				ids, err := b.shares.Indexed(ctx, rg.GroupID)
				if err != nil {
					g.ErrorCode, g.ErrorMessage = shareError(err), kmsg.StringPtr(err.Error())
					resp.Groups = append(resp.Groups, g)
					continue
				}
				for _, id := range ids {
					if t := img.TopicsByID[controller.TopicID(id)]; t != nil {
						topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: t.Name})
					}
				}
				sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
			}
			for _, rt := range topics {
				t := img.Topics[rt.Topic]
				gt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				gt.Topic = rt.Topic
				parts := rt.Partitions
				if t != nil {
					gt.TopicID = t.ID
					if parts == nil {
						for i := range t.Partitions {
							parts = append(parts, int32(i))
						}
					}
				}
				for _, p := range parts {
					gt.Partitions = append(gt.Partitions, b.shareOffsets(ctx, rg.GroupID, t, p))
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return server.Response{Msg: resp}
	}
}

func (b *Broker) shareOffsets(ctx context.Context, group string, t *controller.Topic, p int32) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
	rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return rp
	}
	rp.LeaderEpoch = t.Partitions[p].LeaderEpoch
	snap, found, err := b.shares.Load(ctx, queue.Key{Group: group, TopicID: t.ID, Partition: p})
	if err != nil {
		rp.ErrorCode, rp.ErrorMessage = shareError(err), kmsg.StringPtr(err.Error())
		return rp
	}
	if !found {
		return rp
	}
	o, err := queue.DescribeState(snap)
	if err != nil {
		rp.ErrorCode, rp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		return rp
	}
	st := kafkaext.SharePartitionState{EndOffset: o.End,
		Available: o.Available, Acquired: o.Acquired, Acknowledged: o.Acknowledged, Archived: o.Archived}
	rp.StartOffset = o.Start
	if hw, ok := b.parts.HighWatermark(t, p); ok {
		rp.Lag = o.Lag(hw)
	}
	if err := kafkaext.Set(&rp.UnknownTags, kafkaext.SharePartition, st); err != nil {
		b.log.Warn("share partition state tag", "err", err)
	}
	return rp
}
