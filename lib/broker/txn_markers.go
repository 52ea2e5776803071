package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/txn"
)

// markerWriter writes transactions' markers (txn.Markers): one
// WriteTxnMarkers to the leader of each partition's, over lib/peer (this
// node's own partitions too, through its listener), until every
// partition has its marker. A partition whose topic is gone counts as
// written, as in Kafka.
type markerWriter struct{ b *Broker }

// Marker retries back off from markerBackoff to markerMaxBackoff.
const (
	markerBackoff    = 100 * time.Millisecond
	markerMaxBackoff = 2 * time.Second
)

// Write implements txn.Markers.
func (w *markerWriter) Write(ctx context.Context, m txn.Marker, written func([]txn.TopicPartition)) error {
	b := w.b
	remaining := slices.Clone(m.Partitions)
	backoff := markerBackoff
	for {
		img := b.ctrl.Image()
		byLeader := map[int32][]txn.TopicPartition{}
		var retry []txn.TopicPartition
		var gone []txn.TopicPartition
		for _, tp := range remaining {
			if !knownPartition(img, tp.Topic, tp.Partition) {
				gone = append(gone, tp)
				continue
			}
			leader := img.Topics[tp.Topic].Partitions[tp.Partition].Leader
			if leader < 0 {
				retry = append(retry, tp)
				continue
			}
			byLeader[leader] = append(byLeader[leader], tp)
		}
		if len(gone) > 0 && written != nil {
			written(gone)
		}
		for leader, tps := range byLeader {
			failed, err := w.send(ctx, leader, m, tps)
			if err != nil && ctx.Err() == nil {
				b.log.Debug("write transaction markers", "transactional_id", m.TransactionalID, "node", leader, "err", err)
			}
			if done := slices.DeleteFunc(slices.Clone(tps), func(tp txn.TopicPartition) bool { return slices.Contains(failed, tp) }); len(done) > 0 && written != nil {
				written(done)
			}
			retry = append(retry, failed...)
		}
		if len(retry) == 0 {
			return nil
		}
		remaining = retry
		t := b.clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, markerMaxBackoff)
	}
}

// send sends m's marker for tps to their leader and returns those to send
// again.
func (w *markerWriter) send(ctx context.Context, leader int32, m txn.Marker, tps []txn.TopicPartition) ([]txn.TopicPartition, error) {
	b := w.b
	c, err := b.peer(ctx, leader)
	if err != nil {
		return tps, err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	if m.TransactionVersion >= 2 {
		req.Version, mk.TransactionVersion = 2, m.TransactionVersion
	}
	for _, tp := range tps {
		if n := len(mk.Topics); n > 0 && mk.Topics[n-1].Topic == tp.Topic {
			mk.Topics[n-1].Partitions = append(mk.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		mk.Topics = append(mk.Topics, t)
	}
	req.Markers = append(req.Markers, mk)
	kresp, err := c.Do(ctx, req, 30*time.Second)
	b.peers.Put(c, err)
	if err != nil {
		return tps, err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 {
		return tps, fmt.Errorf("%w: WriteTxnMarkers answer with %d markers", peer.ErrProtocol, len(resp.Markers))
	}
	codes := map[txn.TopicPartition]int16{}
	for _, t := range resp.Markers[0].Topics {
		for _, p := range t.Partitions {
			codes[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	var failed []txn.TopicPartition
	var first error
	for _, tp := range tps {
		code, ok := codes[tp]
		if ok && code == 0 {
			continue
		}
		if first == nil && ok {
			first = fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, kerr.ErrorForCode(code))
		} else if first == nil {
			first = fmt.Errorf("%w: %s-%d missing from the WriteTxnMarkers answer", peer.ErrProtocol, tp.Topic, tp.Partition)
		}
		failed = append(failed, tp)
	}
	return failed, first
}
