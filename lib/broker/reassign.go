package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// handleAlterPartitionReassignments answers AlterPartitionReassignments
// (key 45, KIP-455): each partition's new replica set, or null to cancel
// its move, decided by the controller (controller.AlterReassignments).
// With AllowReplicationFactorChange false (v1), a target of another size
// than the partition's replica set is refused with
// INVALID_REPLICATION_FACTOR.
func (b *Broker) handleAlterPartitionReassignments(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	img := b.ctrl.Image()
	var asks []controller.Reassignment
	var answers []*kmsg.AlterPartitionAssignmentsResponseTopicPartition
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rt.Partitions[i].Partition = p.Partition
			if r.Version >= 1 && !r.AllowReplicationFactorChange && p.Replicas != nil {
				if cur := img.Partition(t.Topic, p.Partition); cur != nil && len(cur.Original()) != len(p.Replicas) {
					rt.Partitions[i].ErrorCode = kerr.InvalidReplicationFactor.Code
					rt.Partitions[i].ErrorMessage = kmsg.StringPtr(fmt.Sprintf("the replication factor would change from %d to %d, which the request does not allow", len(cur.Original()), len(p.Replicas)))
					continue
				}
			}
			asks = append(asks, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
			answers = append(answers, &rt.Partitions[i])
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return func() server.Response {
		if len(asks) == 0 {
			return server.Response{Msg: resp}
		}
		wctx, cancel := withTimeout(ctx, r.TimeoutMillis)
		defer cancel()
		errs, err := b.ctrl.AlterReassignments(wctx, asks)
		if err != nil {
			// Said on every partition too, as Kafka does: a client that
			// reads only the partitions must not take it for a success.
			resp.ErrorCode, resp.ErrorMessage = kafkaError(err)
			for _, a := range answers {
				a.ErrorCode, a.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
			}
			return server.Response{Msg: resp}
		}
		b.syncData()
		for i, perr := range errs {
			if perr != nil {
				answers[i].ErrorCode, answers[i].ErrorMessage = kafkaError(perr)
			}
		}
		return server.Response{Msg: resp}
	}
}

// handleListPartitionReassignments answers ListPartitionReassignments
// (key 46) from this node's image: the partitions being moved, among
// those asked (null: all), with their replicas, the ones being added
// and the ones leaving.
func (b *Broker) handleListPartitionReassignments(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	img := b.ctrl.Image()
	asked := map[string][]int32{}
	if r.Topics == nil {
		for name, t := range img.Topics {
			for _, p := range t.Partitions {
				asked[name] = append(asked[name], p.ID)
			}
		}
	}
	for _, t := range r.Topics {
		asked[t.Topic] = append(asked[t.Topic], t.Partitions...)
	}
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = name
		ids := slices.Compact(slices.Sorted(slices.Values(asked[name])))
		for _, id := range ids {
			p := img.Partition(name, id)
			if p == nil || !p.Reassigning() {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = id
			rp.Replicas = slices.Clone(p.Replicas)
			rp.AddingReplicas = slices.Clone(p.Adding())
			rp.RemovingReplicas = slices.Clone(p.RemovingReplicas)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return reply(resp)
}
