package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/server"
)

// GroupTxnCompleted tells the group coordinator that a transaction
// marker was written to partition of __consumer_offsets (and reached the
// high-water mark): the producer's pending transactional offset commits
// there become committed, or are dropped.
type GroupTxnCompleted func(partition int32, producerID int64, producerEpoch int16, commit bool)

// markerWait is one partition of a WriteTxnMarkers request waiting for
// its marker to reach the high-water mark.
type markerWait struct {
	w       replica.MarkerWrite
	index   int32
	code    *int16
	offsets bool // a __consumer_offsets partition: tell the group coordinator
	marker  record.Marker
}

// handleWriteTxnMarkers appends the transaction coordinator's markers on
// the partitions this node leads (the request needs CLUSTER_ACTION,
// authorize.go) and answers once each marker is on every in-sync replica
// (as an acks=all produce), or failed. A marker from a producer epoch
// older than the partition's is INVALID_PRODUCER_EPOCH, from an older
// coordinator epoch TRANSACTION_COORDINATOR_FENCED; the partition keeps
// its state. After a marker reached the high-water mark of a
// __consumer_offsets partition, GroupTxnCompleted is called.
func (b *Broker) handleWriteTxnMarkers(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	img := b.ctrl.Image()
	var waits []markerWait
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(r.Markers))
	for i := range r.Markers {
		rm := &r.Markers[i]
		sm := &resp.Markers[i]
		sm.Default()
		sm.ProducerID = rm.ProducerID
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(rm.Topics))
		m := record.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch}
		for j := range rm.Topics {
			rt := &rm.Topics[j]
			st := &sm.Topics[j]
			st.Default()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			t := img.Topics[rt.Topic]
			for k, index := range rt.Partitions {
				sp := &st.Partitions[k]
				sp.Default()
				sp.Partition = index
				if t == nil {
					sp.ErrorCode = produceError(errUnknownTopic, 8)
					continue
				}
				p, err := b.parts.Leader(t, index)
				var w replica.MarkerWrite
				if err == nil {
					w, err = p.WriteMarker(m, b.clock.Now().UnixMilli())
				}
				if err != nil {
					sp.ErrorCode = produceError(err, 8)
					b.log.Debug("transaction marker refused", "topic", rt.Topic, "partition", index, "producer_id", m.ProducerID, "err", err)
					continue
				}
				waits = append(waits, markerWait{w: w, index: index, code: &sp.ErrorCode, offsets: rt.Topic == offsetsTopic, marker: m})
			}
		}
	}
	completed := b.groupTxnCompleted
	return func() server.Response {
		for _, w := range waits {
			if err := w.w.Wait(ctx); err != nil {
				*w.code = produceError(err, 8)
				continue
			}
			if w.offsets && completed != nil {
				completed(w.index, w.marker.ProducerID, w.marker.ProducerEpoch, w.marker.Commit)
			}
		}
		return server.Response{Msg: resp}
	}
}

// handleDescribeProducers (KIP-664) lists the producers each partition's
// leader knows: epoch, last sequence and timestamp, the coordinator epoch
// of their last marker and where their open transaction began.
func (b *Broker) handleDescribeProducers(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := b.ctrl.Image()
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		st := &resp.Topics[i]
		st.Default()
		st.Topic = rt.Topic
		t := img.Topics[rt.Topic]
		allowed := b.allowed(c, img, topicResource, opRead, rt.Topic)
		for _, index := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			var p *partition.Hosted
			err := errTopicAuthorization
			if allowed {
				p, err = b.parts.Leader(t, index)
			}
			if err != nil {
				sp.ErrorCode = produceError(err, 8)
				msg := err.Error()
				sp.ErrorMessage = &msg
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Log().Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
	}
	return reply(resp)
}

// errTxnVerification: the transaction coordinator could not be asked
// whether a transactional batch belongs to an ongoing transaction.
var errTxnVerification = errors.New("broker: the transaction coordinator did not verify the transaction")
