package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// handleElectLeaders answers ElectLeaders (key 43): preferred elections
// (v0's only kind) move leadership to each partition's first replica when
// it is in sync and alive; unclean elections give a leaderless partition
// a live replica outside the ISR. A null topic list means every partition.
// The controller decides (forwarded to the active one), in the Reply.
func (b *Broker) handleElectLeaders(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ElectLeadersRequest)
	kind := controller.ElectPreferred
	if r.Version >= 1 && r.ElectionType == 1 {
		kind = controller.ElectUnclean
	} else if r.Version >= 1 && r.ElectionType != 0 {
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	var parts []controller.TopicPartition
	if r.Topics != nil {
		parts = []controller.TopicPartition{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	return func() server.Response {
		wctx, cancel := waitContext(ctx, r.TimeoutMillis)
		defer cancel()
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		results, err := b.ctrl.ElectLeaders(wctx, kind, parts)
		if err != nil {
			code, _ := kafkaError(err)
			resp.ErrorCode = code
			if r.Version == 0 { // no top-level error before v1: say it per partition
				results = map[controller.TopicPartition]error{}
				for _, tp := range parts {
					results[tp] = err
				}
			} else {
				return server.Response{Msg: resp}
			}
		}
		b.syncData()
		byTopic := map[string][]int32{}
		for tp := range results {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for _, name := range slices.Sorted(maps.Keys(byTopic)) {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = name
			ps := byTopic[name]
			slices.Sort(ps)
			for _, p := range ps {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition = p
				if perr := results[controller.TopicPartition{Topic: name, Partition: p}]; perr != nil {
					rp.ErrorCode, rp.ErrorMessage = kafkaError(perr)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return server.Response{Msg: resp}
	}
}

// metadataTopicName is the name Kafka gives the controller quorum's log
// in DescribeQuorum. mq's quorum is a Raft log too, outside the topics.
const metadataTopicName = "__cluster_metadata"

// handleDescribeQuorum answers DescribeQuorum (key 55) about the
// controller quorum: the Raft leader, its term as the leader epoch, and
// every member with how far it has applied the log (voters as
// CurrentVoters, non-voters as Observers).
func (b *Broker) handleDescribeQuorum(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeQuorumRequest)
	return func() server.Response {
		resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		q, qerr := b.ctrl.Quorum(ctx)
		for _, rt := range r.Topics {
			st := kmsg.NewDescribeQuorumResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDescribeQuorumResponseTopicPartition()
				sp.Partition = rp.Partition
				switch {
				case rt.Topic != metadataTopicName || rp.Partition != 0:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case qerr != nil:
					sp.ErrorCode, sp.ErrorMessage = kafkaError(qerr)
				default:
					sp.LeaderID = q.LeaderID
					sp.LeaderEpoch = int32(min(q.Term, 1<<31-1))
					sp.HighWatermark = int64(q.LastIndex)
					for _, m := range q.Members {
						rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
						rs.ReplicaID = m.ID
						rs.LogEndOffset = int64(m.AppliedVersion)
						rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = -1, -1
						if !m.LastHeartbeat.IsZero() {
							rs.LastFetchTimestamp = m.LastHeartbeat.UnixMilli()
							if m.AppliedVersion >= q.LastIndex {
								rs.LastCaughtUpTimestamp = rs.LastFetchTimestamp
							}
						}
						if m.Voter {
							sp.CurrentVoters = append(sp.CurrentVoters, rs)
						} else {
							sp.Observers = append(sp.Observers, rs)
						}
					}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return server.Response{Msg: resp}
	}
}
