package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/txn"
)

// The transaction requests between brokers: Nodes implements txn.Peers.

// Timeouts of one transaction request to another broker: a marker waits
// there for the in-sync replicas, a verification does not.
const (
	writeTxnMarkersTimeout    = 30 * time.Second
	addPartitionsToTxnTimeout = 10 * time.Second
)

// WriteTxnMarkers implements txn.Peers: WriteTxnMarkers v1, v2 for a
// transaction.version 2 marker.
func (n *Nodes) WriteTxnMarkers(ctx context.Context, node int32, m txn.Marker, tps []txn.TopicPartition) ([]txn.TopicPartition, error) {
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
	kresp, err := n.Do(ctx, node, req, writeTxnMarkersTimeout)
	if err != nil {
		return tps, err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 {
		return tps, fmt.Errorf("%w: WriteTxnMarkers answer with %d markers", ErrProtocol, len(resp.Markers))
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
			first = fmt.Errorf("%w: %s-%d missing from the WriteTxnMarkers answer", ErrProtocol, tp.Topic, tp.Partition)
		}
		failed = append(failed, tp)
	}
	return failed, first
}

// AddPartitionsToTxn implements txn.Peers: AddPartitionsToTxn v4, a
// broker's request (KIP-890).
func (n *Nodes) AddPartitionsToTxn(ctx context.Context, node int32, id string, producerID int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool) (map[txn.TopicPartition]int16, error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, producerID, epoch, verifyOnly
	for _, tp := range tps {
		if n := len(tr.Topics); n > 0 && tr.Topics[n-1].Topic == tp.Topic {
			tr.Topics[n-1].Partitions = append(tr.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		tr.Topics = append(tr.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	req.Transactions = append(req.Transactions, tr)
	kresp, err := n.Do(ctx, node, req, addPartitionsToTxnTimeout)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Transactions) != 1 {
		return nil, fmt.Errorf("%w: AddPartitionsToTxn answer with %d transactions", ErrProtocol, len(resp.Transactions))
	}
	codes := make(map[txn.TopicPartition]int16, len(tps))
	for _, t := range resp.Transactions[0].Topics {
		for _, p := range t.Partitions {
			codes[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	for _, tp := range tps {
		if _, ok := codes[tp]; !ok {
			return nil, fmt.Errorf("%w: %s-%d missing from the AddPartitionsToTxn answer", ErrProtocol, tp.Topic, tp.Partition)
		}
	}
	return codes, nil
}
