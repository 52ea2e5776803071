package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnVerifier asks a transaction coordinator whether producer (id,
// epoch) of transactionalID is in an ongoing transaction that includes
// topic's partition (KIP-890), before a partition leader appends the
// first transactional batch of a transaction. With add (a producer of
// transaction.version 2, which sends no AddPartitionsToTxn of its own)
// the coordinator adds the partition to the transaction instead of only
// checking. A nil error means yes; a *kerr.Error the coordinator's
// answer; any other error that it could not be asked. Called from the
// connections' reader goroutines, concurrently.
type TxnVerifier interface {
	VerifyTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error
}

// txnVerifyTimeout bounds one verification: FindCoordinator and
// AddPartitionsToTxn, each one round trip to another broker.
const txnVerifyTimeout = 5 * time.Second

// peerVerifier is the TxnVerifier of a broker with
// Config.VerifyTransactions: it finds the coordinator with FindCoordinator
// (key type 1) sent to this node, and asks it with AddPartitionsToTxn v4
// (VerifyOnly unless add), over the broker's peer connections.
type peerVerifier struct{ b *Broker }

func (v peerVerifier) VerifyTxn(ctx context.Context, txnID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error {
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 4
	find.CoordinatorType = 1
	find.CoordinatorKeys = []string{txnID}
	resp, err := v.do(ctx, v.b.cfg.Settings.NodeID, find)
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FindCoordinatorResponse)
	if len(fr.Coordinators) != 1 {
		return fmt.Errorf("%w: FindCoordinator answered %d coordinators", errTxnVerification, len(fr.Coordinators))
	}
	if err := kerr.ErrorForCode(fr.Coordinators[0].ErrorCode); err != nil {
		return fmt.Errorf("%w: FindCoordinator: %w", errTxnVerification, err)
	}
	add4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	add4.Version = 4
	txn := kmsg.NewAddPartitionsToTxnRequestTransaction()
	txn.TransactionalID, txn.ProducerID, txn.ProducerEpoch, txn.VerifyOnly = txnID, producerID, producerEpoch, !add
	t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	t.Topic, t.Partitions = topic, []int32{partition}
	txn.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{t}
	add4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{txn}
	resp, err = v.do(ctx, fr.Coordinators[0].NodeID, add4)
	if err != nil {
		return err
	}
	ar := resp.(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return err
	}
	for _, rt := range ar.Transactions {
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				if tt.Topic == topic && p.Partition == partition {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return err
					}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w: the coordinator did not answer for %s-%d", errTxnVerification, topic, partition)
}

func (v peerVerifier) do(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	conn, err := v.b.peer(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTxnVerification, err)
	}
	resp, err := conn.Do(ctx, req, txnVerifyTimeout)
	v.b.peers.Put(conn, err)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTxnVerification, err)
	}
	return resp, nil
}
