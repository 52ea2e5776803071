package broker

import (
	"errors"
	"strings"
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

// A transaction.version 2 producer's first batch of its next transaction
// may reach a leader while the markers of the last are being written:
// the leader's add waits for them instead of refusing the batch, and
// the transaction's markers are all written before the add is answered.
func TestVersion2AddWaitsForTheLastTransactionsMarkers(t *testing.T) {
	tb, ml := startTxnBroker(t)
	r := initTxn(t, tb, 4, "t1", 30_000)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %s", errName(r.ErrorCode))
	}
	if got := addPartitions(t, tb, 3, "t1", r.ProducerID, r.ProducerEpoch, "a", 0); got[0] != "NONE" {
		t.Fatalf("AddPartitionsToTxn: %v", got)
	}
	ml.mu.Lock()
	ml.fail["a-0"] = 2 // the marker is written after two retries, some 300 ms
	ml.mu.Unlock()
	end := endTxn(t, tb, 5, "t1", r.ProducerID, r.ProducerEpoch, true)
	if end.ErrorCode != 0 || end.ProducerEpoch != r.ProducerEpoch+1 {
		t.Fatalf("EndTxn v5: %s, epoch %d", errName(end.ErrorCode), end.ProducerEpoch)
	}
	v := coordinatorVerifier{tb.Broker}
	if err := v.VerifyTxn(t.Context(), "t1", end.ProducerID, end.ProducerEpoch, "a", 1, false); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("a verification while the markers are on their way: %v, want CONCURRENT_TRANSACTIONS at once", err)
	}
	if err := v.VerifyTxn(t.Context(), "t1", end.ProducerID, end.ProducerEpoch, "a", 1, true); err != nil {
		t.Fatalf("the next transaction's add: %v", err)
	}
	if got := ml.markers(); len(got) != 1 || !strings.Contains(got[0], "a-0") {
		t.Fatalf("markers written before the add was answered: %v", got)
	}
}
