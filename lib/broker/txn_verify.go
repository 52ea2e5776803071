package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/txn"
)

// askTxnCoordinator asks the coordinator of transactional id whether each of tps
// is in the ongoing transaction of producerID at epoch (KIP-890 part 1:
// a write to a partition not added to the transaction would be left
// open, hanging, by a transaction that ends without it), or with add
// adds them to it (part 2: transaction.version 2 clients add no
// partitions themselves). It asks the coordinator here when this node is
// it, else sends it AddPartitionsToTxn v4. It returns each partition's
// code; the error is a coordinator that could not be asked (the caller
// answers a retriable code).
func (b *Broker) askTxnCoordinator(ctx context.Context, id string, producerID int64, epoch int16, tps []txn.TopicPartition, add bool) (map[txn.TopicPartition]int16, error) {
	t, err := b.txns.state.Ensure(ctx)
	if err != nil {
		return nil, err
	}
	p := txn.PartitionFor(id, int32(len(t.Partitions)))
	leader := t.Partitions[p].Leader
	codes := make(map[txn.TopicPartition]int16, len(tps))
	if leader == b.cfg.Settings.NodeID && add {
		code := txnError(b.txns.c.AddPartitions(ctx, id, producerID, epoch, tps))
		for _, tp := range tps {
			codes[tp] = code
		}
		return codes, nil
	}
	if leader == b.cfg.Settings.NodeID {
		errs, err := b.txns.c.Verify(id, producerID, epoch, tps)
		for i, tp := range tps {
			if err != nil {
				codes[tp] = txnError(err)
			} else {
				codes[tp] = txnError(errs[i])
			}
		}
		return codes, nil
	}
	if leader < 0 {
		return nil, fmt.Errorf("%s-%d has no leader", transactionStateTopic, p)
	}
	c, err := b.peer(ctx, leader)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, producerID, epoch, !add
	for _, tp := range tps {
		if n := len(tr.Topics); n > 0 && tr.Topics[n-1].Topic == tp.Topic {
			tr.Topics[n-1].Partitions = append(tr.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		tr.Topics = append(tr.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	req.Transactions = append(req.Transactions, tr)
	kresp, err := c.Do(ctx, req, 10*time.Second)
	b.peers.Put(c, err)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Transactions) != 1 {
		return nil, fmt.Errorf("%w: AddPartitionsToTxn answer with %d transactions", peer.ErrProtocol, len(resp.Transactions))
	}
	for _, t := range resp.Transactions[0].Topics {
		for _, p := range t.Partitions {
			codes[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	for _, tp := range tps {
		if _, ok := codes[tp]; !ok {
			return nil, fmt.Errorf("%w: %s-%d missing from the AddPartitionsToTxn answer", peer.ErrProtocol, tp.Topic, tp.Partition)
		}
	}
	return codes, nil
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
