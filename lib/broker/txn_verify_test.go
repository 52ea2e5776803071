package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker's TxnVerifier asks the transactional id's coordinator, here
// this node's own: a producer whose transaction does not include the
// partition is refused, one whose does is not, a transaction.version 2
// add adds the partition, and an older epoch is fenced.
func TestCoordinatorVerifierAsksTheCoordinator(t *testing.T) {
	tb, _ := startTxnBroker(t)
	r := initTxn(t, tb, 4, "t1", 30_000)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %s", errName(r.ErrorCode))
	}
	pid, epoch := r.ProducerID, r.ProducerEpoch
	v := coordinatorVerifier{tb.Broker}
	ctx := t.Context()
	if err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 0, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("a producer in no transaction: %v", err)
	}
	if got := addPartitions(t, tb, 3, "t1", pid, epoch, "a", 0); got[0] != "NONE" {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	if err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 0, false); err != nil {
		t.Fatalf("a partition of the transaction: %v", err)
	}
	if err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 1, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("a partition not added: %v", err)
	}
	if err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 1, true); err != nil {
		t.Fatalf("transaction.version 2 add: %v", err)
	}
	if err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 1, false); err != nil {
		t.Fatalf("the partition the add added: %v", err)
	}
	if d := describeTxn(t, tb, "t1"); len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 2 {
		t.Fatalf("the coordinator's transaction: %+v", d.Topics)
	}
	// A new producer of the id fences this one: its open transaction is
	// aborted first (CONCURRENT_TRANSACTIONS meanwhile, which clients
	// retry).
	var again *kmsg.InitProducerIDResponse
	tb.waitFor(t, "a second InitProducerId", func() bool {
		again = initTxn(t, tb, 4, "t1", 30_000)
		return again.ErrorCode != kerr.ConcurrentTransactions.Code
	})
	if again.ErrorCode != 0 || again.ProducerEpoch <= epoch {
		t.Fatalf("second InitProducerId: %s %d", errName(again.ErrorCode), again.ProducerEpoch)
	}
	err := v.VerifyTxn(ctx, "t1", pid, epoch, "a", 0, false)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced epoch: %v", err)
	}
}
