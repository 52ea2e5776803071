package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// txnCoordinator asks the cluster which node coordinates transactional
// id (FindCoordinator key type 1).
func txnCoordinator(t *testing.T, cl *kgo.Client, id string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = id, 1
	var node int32
	clusterWait.For(t, "the coordinator of transactional id "+id, func() (bool, string) {
		resp := txnRequest[*kmsg.FindCoordinatorResponse](t, cl, req)
		node = resp.NodeID
		err := kerr.ErrorForCode(resp.ErrorCode)
		return err == nil, fmt.Sprint(err)
	})
	return node
}

// TestClusterTransactionCoordinatorFailover: on three nodes, a group
// coordinator asks a transaction coordinator on another node whether
// the group's partition is in the transaction before it takes a
// TxnOffsetCommit (KIP-890); when the transaction coordinator's node is
// killed, the new leader of its partition of __transaction_state replays
// it and holds the open transaction as it was, and still fences.
func TestClusterTransactionCoordinatorFailover(t *testing.T) {
	// Not parallel: beside other clusters, twice in nine runs, the second
	// TxnOffsetCommit was answered INVALID_TXN_STATE although the
	// coordinator then described the group's partition in the
	// transaction; alone it has not failed. Under investigation.
	// Default liveness settings: a killed node is fenced at once anyway
	// (its process is gone), and a busy machine fences no live one.
	c := startCluster(t, 3, clusterOpts{props: []string{
		"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"}})
	c.createRF3("tx", 2)
	cl := c.client()
	ctx := ctxFor(t, 2*time.Minute)

	r := txnInit(t, cl, "cf")
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	coord := txnCoordinator(t, cl, "cf")
	group := ""
	for i := 0; group == ""; i++ {
		if i == 100 {
			t.Fatalf("no group coordinated elsewhere than node %d", coord)
		}
		g := fmt.Sprintf("g%d", i)
		var n int32
		clusterWait.For(t, "the coordinator of group "+g, func() (bool, string) {
			var err error
			n, err = findCoordinator(ctx, cl, g) // the first creates __consumer_offsets
			return err == nil, fmt.Sprint(err)
		})
		if n != coord {
			group = g
		}
	}
	// TxnOffsetCommit v4: verified (v5, transaction.version 2, adds the
	// partition instead).
	v4 := kversion.Stable()
	v4.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	committer := c.client(kgo.MaxVersions(v4))
	commit := func() error {
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "cf", group, r.ProducerID, r.ProducerEpoch, -1
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "tx", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 1, Offset: 7, LeaderEpoch: -1}}}}
		return kerr.ErrorForCode(txnRequest[*kmsg.TxnOffsetCommitResponse](t, committer, tc).Topics[0].Partitions[0].ErrorCode)
	}
	if err := commit(); err != kerr.InvalidTxnState {
		t.Fatalf("TxnOffsetCommit before AddOffsetsToTxn: %v, want INVALID_TXN_STATE", err)
	}
	if err := txnAdd(t, cl, "cf", r.ProducerID, r.ProducerEpoch, "tx", 0, 1); err != nil {
		t.Fatal(err)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "cf", r.ProducerID, r.ProducerEpoch, group
	if resp := txnRequest[*kmsg.AddOffsetsToTxnResponse](t, cl, ao); resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if err := commit(); err != nil {
		d, derr := c.admin().DescribeTransactions(ctx, "cf")
		t.Fatalf("TxnOffsetCommit (group %s, transaction on node %d): %v; the transaction: %+v %v", group, coord, err, d["cf"], derr)
	}
	adm := c.admin()
	before, err := adm.DescribeTransactions(ctx, "cf")
	if err != nil || before["cf"].State != "Ongoing" {
		t.Fatalf("DescribeTransactions: %v %+v", err, before["cf"])
	}

	start := time.Now()
	c.node(coord).kill()
	survivor := c.node(coord%3 + 1)
	clusterWait.For(t, "the open transaction on its new coordinator", func() (bool, string) {
		// A new client each time: kgo keeps asking the coordinator it
		// found until that answers NOT_COORDINATOR, which a dead one
		// never does.
		scl, err := kgo.NewClient(c.clientOpts(survivor.addr)...)
		if err != nil {
			t.Fatal(err)
		}
		defer scl.Close()
		after, err := kadm.NewClient(scl).DescribeTransactions(ctx, "cf")
		if err != nil {
			return false, err.Error()
		}
		a, was := after["cf"], before["cf"]
		if a.Err != nil || a.Coordinator == coord || a.State != "Ongoing" || a.ProducerID != was.ProducerID ||
			a.ProducerEpoch != was.ProducerEpoch || fmt.Sprint(a.Topics.Sorted()) != fmt.Sprint(was.Topics.Sorted()) {
			return false, fmt.Sprintf("%+v, before the kill %+v", a, was)
		}
		return true, ""
	})
	t.Logf("node %d killed: the transaction on its new coordinator after %v", coord, time.Since(start).Round(time.Millisecond))
	// A new producer of the id fences the old one there too. Its
	// InitProducerId first aborts the open transaction (with a bumped
	// epoch): until the abort's markers are written it is answered
	// CONCURRENT_TRANSACTIONS, which a client retries, as here.
	scl := survivor.client(kgo.RequestRetries(0))
	clusterWait.For(t, "a second InitProducerId", func() (bool, string) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("cf"), 60_000
		resp, err := req.RequestWith(ctx, scl)
		if err != nil {
			return false, err.Error()
		}
		return resp.ErrorCode == 0, fmt.Sprint(kerr.ErrorForCode(resp.ErrorCode))
	})
	if err := txnAdd(t, survivor.client(), "cf", r.ProducerID, r.ProducerEpoch, "tx", 0); err != kerr.ProducerFenced {
		t.Fatalf("the first producer after the failover and a second InitProducerId: %v", err)
	}
}
