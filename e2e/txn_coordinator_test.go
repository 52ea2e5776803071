package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// txnRequest sends req (kgo routes the transaction APIs to the
// transactional id's coordinator, found with FindCoordinator key type 1)
// and returns its answer.
func txnRequest[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(ctxFor(t, 15*time.Second), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

func txnInit(t *testing.T, cl *kgo.Client, id string) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60_000
	return txnRequest[*kmsg.InitProducerIDResponse](t, cl, req)
}

func txnAdd(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, topic string, parts ...int32) error {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	resp := txnRequest[*kmsg.AddPartitionsToTxnResponse](t, cl, req)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestTransactionCoordinator drives one node's transaction coordinator
// with the transaction APIs through kgo and reads its state with kadm's
// DescribeTransactions and ListTransactions: a transaction begins
// (partitions and a group's offsets added, offsets committed in it) and
// commits; a second producer with the same transactional id fences the
// first. The markers go to the partitions' leaders; where this mqd
// answers WriteTxnMarkers, the transaction completes.
func TestTransactionCoordinator(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"}})
	adm := b.admin()
	ctx := ctxFor(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	cl := b.client()

	r := txnInit(t, cl, "e2e-a")
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %v epoch %d", err, r.ProducerEpoch)
	}
	pid := r.ProducerID
	if err := txnAdd(t, cl, "e2e-a", pid, 0, "tx", 0, 1); err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "e2e-a", pid, 0, "g"
	if resp := txnRequest[*kmsg.AddOffsetsToTxnResponse](t, cl, ao); resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "e2e-a", "g", pid, 0, -1
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "tx", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3, LeaderEpoch: -1}}}}
	if resp := txnRequest[*kmsg.TxnOffsetCommitResponse](t, cl, tc); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}

	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || listed["e2e-a"].State != "Ongoing" || listed["e2e-a"].ProducerID != pid {
		t.Fatalf("ListTransactions: %v %+v", err, listed)
	}
	described, err := adm.DescribeTransactions(ctx, "e2e-a")
	if err != nil {
		t.Fatal(err)
	}
	d := described["e2e-a"]
	if d.Err != nil || d.State != "Ongoing" || len(d.Topics["tx"]) != 2 || len(d.Topics["__consumer_offsets"]) != 1 || d.TimeoutMillis != 60_000 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "e2e-a", pid, 0, true
	if resp := txnRequest[*kmsg.EndTxnResponse](t, cl, end); resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	markersServed := false
	versions.Each(func(v kadm.BrokerApiVersions) {
		_, _, markersServed = v.KeyVersions(kmsg.WriteTxnMarkers.Int16())
	})
	want := "PrepareCommit" // the markers wait for a partition leader that writes them
	if markersServed {
		want = "CompleteCommit"
	}
	mqtest.WaitFor(t, "the transaction's state after EndTxn", func() (bool, string) {
		described, err := adm.DescribeTransactions(ctx, "e2e-a")
		if err != nil {
			return false, err.Error()
		}
		return described["e2e-a"].State == want, fmt.Sprintf("%+v, want %s", described["e2e-a"], want)
	})

	// Fencing: a second producer of the same id gets the next epoch, and
	// the first one's requests are refused.
	r1 := txnInit(t, cl, "e2e-b")
	other := b.client()
	r2 := txnInit(t, other, "e2e-b")
	if r2.ErrorCode != 0 || r2.ProducerID != r1.ProducerID || r2.ProducerEpoch != r1.ProducerEpoch+1 {
		t.Fatalf("second InitProducerId: %v %d/%d after %d/%d", kerr.ErrorForCode(r2.ErrorCode), r2.ProducerID, r2.ProducerEpoch, r1.ProducerID, r1.ProducerEpoch)
	}
	if err := txnAdd(t, cl, "e2e-b", r1.ProducerID, r1.ProducerEpoch, "tx", 0); err != kerr.ProducerFenced {
		t.Fatalf("the fenced producer's AddPartitionsToTxn: %v", err)
	}
	// The new producer's transaction is open when a third one comes: it
	// is aborted with a bumped epoch, and the second is fenced at once.
	if err := txnAdd(t, cl, "e2e-b", r2.ProducerID, r2.ProducerEpoch, "tx", 1); err != nil {
		t.Fatal(err)
	}
	third := b.client(kgo.RequestRetries(0))
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("e2e-b"), 60_000
	resp, err := req.RequestWith(ctx, third)
	if err == nil {
		if code := resp.ErrorCode; code != 0 && code != kerr.ConcurrentTransactions.Code {
			t.Fatalf("third InitProducerId: %v", kerr.ErrorForCode(code))
		}
	}
	if err := txnAdd(t, cl, "e2e-b", r2.ProducerID, r2.ProducerEpoch, "tx", 1); err != kerr.ProducerFenced {
		t.Fatalf("the second producer after the third's InitProducerId: %v", err)
	}
	described, err = adm.DescribeTransactions(ctx, "e2e-b")
	if err != nil || described["e2e-b"].ProducerEpoch <= r2.ProducerEpoch {
		t.Fatalf("e2e-b after the fence: %v %+v", err, described["e2e-b"])
	}

	// All of it is in __transaction_state: mqd killed and started again
	// replays it, and still fences the old producers.
	before, err := adm.DescribeTransactions(ctx, "e2e-a")
	if err != nil {
		t.Fatal(err)
	}
	b.restart(true)
	adm = b.admin()
	mqtest.WaitFor(t, "the transactions after a crash", func() (bool, string) {
		after, err := adm.DescribeTransactions(ctx, "e2e-a", "e2e-b")
		if err != nil {
			return false, err.Error()
		}
		a, was := after["e2e-a"], before["e2e-a"]
		if a.Err != nil || a.State != was.State || a.ProducerID != was.ProducerID || a.ProducerEpoch != was.ProducerEpoch {
			return false, fmt.Sprintf("e2e-a %+v, before the crash %+v", a, was)
		}
		if e := after["e2e-b"]; e.Err != nil || e.ProducerEpoch <= r2.ProducerEpoch {
			return false, fmt.Sprintf("e2e-b %+v", e)
		}
		return true, ""
	})
	if err := txnAdd(t, b.client(), "e2e-b", r1.ProducerID, r1.ProducerEpoch, "tx", 0); err != kerr.ProducerFenced {
		t.Fatalf("the first producer after the crash: %v", err)
	}
}
