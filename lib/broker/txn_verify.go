package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/txn"
)

// askTxnCoordinator asks the coordinator of transactional id whether each of tps
// is in the ongoing transaction of producerID at epoch (KIP-890 part 1:
// a write to a partition not added to the transaction would be left
// open, hanging, by a transaction that ends without it), or with add
// adds them to it (part 2: transaction.version 2 clients add no
// partitions themselves). It asks the coordinator here when this node is
// it, else another broker's (txn.Peers: AddPartitionsToTxn v4). It
// returns each partition's code; the error is a coordinator that could
// not be asked (the caller answers a retriable code).
func (b *Broker) askTxnCoordinator(ctx context.Context, id string, producerID int64, epoch int16, tps []txn.TopicPartition, add bool) (map[txn.TopicPartition]int16, error) {
	t, err := b.txns.state.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	p := txn.PartitionFor(id, int32(len(t.Partitions)))
	leader := t.Partitions[p].Leader
	codes := make(map[txn.TopicPartition]int16, len(tps))
	switch {
	case leader == b.cfg.Settings.NodeID && add:
		code := txnError(b.txns.c.AddPartitions(ctx, id, producerID, epoch, tps))
		for _, tp := range tps {
			codes[tp] = code
		}
		return codes, nil
	case leader == b.cfg.Settings.NodeID:
		errs, err := b.txns.c.Verify(id, producerID, epoch, tps)
		for i, tp := range tps {
			if err != nil {
				codes[tp] = txnError(err)
			} else {
				codes[tp] = txnError(errs[i])
			}
		}
		return codes, nil
	case leader < 0:
		return nil, fmt.Errorf("%s-%d has no leader", transactionStateTopic, p)
	}
	return b.txnPeers.AddPartitionsToTxn(ctx, leader, id, producerID, epoch, tps, !add)
}

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
// Config.VerifyTransactions: askTxnCoordinator for one partition.
type coordinatorVerifier struct{ b *Broker }

func (v coordinatorVerifier) VerifyTxn(ctx context.Context, txnID string, producerID int64, producerEpoch int16, topic string, partition int32, add bool) error {
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	// The strings are the pooled Produce request's (doc.go, Pooled
	// state), and an add keeps the partition in the transaction for as
	// long as it lasts: the coordinator gets copies. Once per
	// transaction and partition.
	txnID, topic = strings.Clone(txnID), strings.Clone(topic)
	tp := txn.TopicPartition{Topic: topic, Partition: partition}
	backoff := concurrentBackoff
	deadline := v.b.clock.Now().Add(concurrentWait)
	for {
		codes, err := v.b.askTxnCoordinator(ctx, txnID, producerID, producerEpoch, []txn.TopicPartition{tp}, add)
		if err != nil {
			return fmt.Errorf("%w: %w", errTxnVerification, err)
		}
		// A version 2 producer's first batch of a transaction often comes
		// while the markers of its last one are being written: the
		// coordinator answers CONCURRENT_TRANSACTIONS for the few
		// milliseconds that takes. Asking again here is much quicker than
		// the producer's retry (kgo's waits for a metadata refresh).
		if !add || codes[tp] != kerr.ConcurrentTransactions.Code || !v.b.clock.Now().Add(backoff).Before(deadline) {
			return kerr.ErrorForCode(codes[tp])
		}
		t := v.b.clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return kerr.ErrorForCode(codes[tp])
		}
		backoff = min(2*backoff, concurrentMaxBackoff)
	}
}

// A transaction.version 2 add answered CONCURRENT_TRANSACTIONS is asked
// again for up to concurrentWait, backing off from concurrentBackoff to
// concurrentMaxBackoff, before the produce is refused.
const (
	concurrentWait       = time.Second
	concurrentBackoff    = 2 * time.Millisecond
	concurrentMaxBackoff = 50 * time.Millisecond
)
