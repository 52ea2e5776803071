package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
)

// ShareFetch and ShareAcknowledge (KIP-932) onto the share-partition
// leader (lib/queue's Leader): the share-partitions of the topic
// partitions this node leads, with their state in __share_group_state.

// ackBatches collects a request's acknowledgement batches of one
// partition as queue.Acks.
func ackBatches[B any](batches []B, fields func(*B) (first, last int64, types []int8)) *queue.Acks {
	var first, last []int64
	var types [][]int8
	for i := range batches {
		f, l, ts := fields(&batches[i])
		first, last, types = append(first, f), append(last, l), append(types, ts)
	}
	acks, err := queue.AcksFrom(first, last, types)
	return &queue.Acks{Acks: acks, Err: err}
}

// shareLeaderOf is the current leader and epoch of a partition, for a
// response's CurrentLeader (-1, -1 when unknown).
func shareLeaderOf(img *controller.Image, tp queue.TP) (leader, epoch int32) {
	return img.TopicsByID[controller.TopicID(tp.TopicID)].CurrentLeader(tp.Partition)
}

func (b *Broker) handleShareFetch(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareFetchRequest)
	return func() server.Response { return server.Response{Msg: b.shareFetch(ctx, c, r)} }
}

func (b *Broker) shareFetch(ctx context.Context, c *server.ConnInfo, r *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := optString(r.GroupID), optString(r.MemberID)
	if group == "" || member == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("share fetch without a group or member id")
		return resp
	}
	_, s := b.shareSettings(b.ctrl.Image(), group)
	resp.AcquisitionLockTimeoutMillis = int32(s.Queue.LockDuration.Milliseconds())
	fr := queue.FetchRequest{
		Group: group, Member: member, SessionEpoch: r.ShareSessionEpoch, Acks: map[queue.TP]*queue.Acks{},
		MaxRecords: int(r.MaxRecords), MaxBytes: int(r.MaxBytes),
		MaxWait: time.Duration(r.MaxWaitMillis) * time.Millisecond, Settings: s,
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := queue.TP{TopicID: t.TopicID, Partition: p.Partition}
			fr.Partitions = append(fr.Partitions, tp)
			if len(p.AcknowledgementBatches) > 0 {
				fr.Acks[tp] = ackBatches(p.AcknowledgementBatches, func(a *kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
					return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
				})
			}
		}
	}
	for _, t := range r.ForgottenTopicsData {
		for _, p := range t.Partitions {
			fr.Forget = append(fr.Forget, queue.TP{TopicID: t.TopicID, Partition: p})
		}
	}
	results, err := b.shares.Fetch(ctx, fr)
	if err != nil {
		resp.ErrorCode = shareError(err)
		return resp
	}
	return b.shareFetchResponse(resp, c, b.ctrl.Image(), results)
}

// shareFetchResponse encodes the results: every partition with records,
// an error, or acknowledgements of this request.
func (b *Broker) shareFetchResponse(resp *kmsg.ShareFetchResponse, c *server.ConnInfo, img *controller.Image, results []queue.Result) *kmsg.ShareFetchResponse {
	topicIdx := map[[16]byte]int{}
	leaders := map[int32]bool{}
	for _, r := range results {
		if len(r.Leases) == 0 && r.Err == nil && !r.Acked {
			continue
		}
		i, ok := topicIdx[r.TP.TopicID]
		if !ok {
			i = len(resp.Topics)
			topicIdx[r.TP.TopicID] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: r.TP.TopicID})
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = r.TP.Partition
		rp.ErrorCode = shareError(r.Err)
		if r.Err != nil {
			rp.ErrorMessage = kmsg.StringPtr(r.Err.Error())
		}
		rp.AcknowledgeErrorCode = shareError(r.AckErr)
		if r.AckErr != nil {
			rp.AcknowledgeErrorMessage = kmsg.StringPtr(r.AckErr.Error())
		}
		leader, epoch := shareLeaderOf(img, r.TP)
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, epoch
		if rp.ErrorCode == kerr.NotLeaderForPartition.Code && leader >= 0 {
			leaders[leader] = true
		}
		rp.Records = r.Records
		for _, l := range r.Leases {
			rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: l.First, LastOffset: l.Last, DeliveryCount: l.Deliveries,
			})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	for id := range leaders {
		if br, ok := img.Brokers[id]; ok {
			br = forListener(c, br)
			resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: br.ID, Host: br.Host, Port: br.Port, Rack: br.Rack})
		}
	}
	return resp
}

// handleShareAcknowledge applies acknowledgements outside a fetch; epoch
// -1 also closes the member's share session, releasing what it still
// holds.
func (b *Broker) handleShareAcknowledge(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ShareAcknowledgeRequest)
	return func() server.Response { return server.Response{Msg: b.shareAcknowledge(ctx, r)} }
}

func (b *Broker) shareAcknowledge(ctx context.Context, r *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := optString(r.GroupID), optString(r.MemberID)
	if group == "" || member == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("share acknowledge without a group or member id")
		return resp
	}
	_, s := b.shareSettings(b.ctrl.Image(), group)
	resp.AcquisitionLockTimeoutMillis = int32(s.Queue.LockDuration.Milliseconds())
	ar := queue.AckRequest{Group: group, Member: member, SessionEpoch: r.ShareSessionEpoch, Settings: s}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			ar.Partitions = append(ar.Partitions, queue.TP{TopicID: t.TopicID, Partition: p.Partition})
			ar.Acks = append(ar.Acks, *ackBatches(p.AcknowledgementBatches, func(a *kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
			}))
		}
	}
	results, err := b.shares.Acknowledge(ctx, ar)
	if err != nil {
		resp.ErrorCode = shareError(err)
		return resp
	}
	img := b.ctrl.Image()
	topicIdx := map[[16]byte]int{}
	for _, res := range results {
		i, ok := topicIdx[res.TP.TopicID]
		if !ok {
			i = len(resp.Topics)
			topicIdx[res.TP.TopicID] = i
			resp.Topics = append(resp.Topics, kmsg.ShareAcknowledgeResponseTopic{TopicID: res.TP.TopicID})
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition = res.TP.Partition
		rp.ErrorCode = shareError(res.AckErr)
		if res.AckErr != nil {
			rp.ErrorMessage = kmsg.StringPtr(res.AckErr.Error())
		}
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = shareLeaderOf(img, res.TP)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
