package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/txn"
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

// txnVerifyTimeout bounds one verification: at most one round trip to
// another broker.
const txnVerifyTimeout = 5 * time.Second

// coordinatorVerifier is the TxnVerifier of a broker with
// Config.VerifyTransactions: it asks the transactional id's coordinator,
// this node's own when it leads the id's partition of
// __transaction_state, else another broker's with AddPartitionsToTxn v4
// (askTxnCoordinator; VerifyOnly unless add).
type coordinatorVerifier struct{ b *Broker }

func (v coordinatorVerifier) VerifyTxn(ctx context.Context, txnID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error {
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	tp := txn.TopicPartition{Topic: topic, Partition: partition}
	codes, err := v.b.askTxnCoordinator(ctx, txnID, producerID, producerEpoch, []txn.TopicPartition{tp}, add)
	if err != nil {
		return fmt.Errorf("%w: %w", errTxnVerification, err)
	}
	return kerr.ErrorForCode(codes[tp])
}
