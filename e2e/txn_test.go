package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/record"
)

// TestReadCommittedSeesCommittedTransactionsOnly writes transactional
// batches of two producers and, acting as their transaction coordinator,
// commits one's transactions and aborts the other's with WriteTxnMarkers;
// a kgo consumer reading committed sees the committed records only, in
// order, and one reading uncommitted sees them all. After a crash and a
// restart the read_committed consumer sees the same. With no
// coordinator to verify the transactions with, the partition does not
// ask one (transaction.partition.verification.enable=false).
func TestReadCommittedSeesCommittedTransactionsOnly(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{"transaction.partition.verification.enable=false"}})
	ctx := ctxFor(t, time.Minute)
	const topic = "txn"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	raw := b.client()
	producerID := func() int64 {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, raw)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("InitProducerId: %v", err)
		}
		return resp.ProducerID
	}
	committer, aborter := producerID(), producerID()
	seq := map[int64]int32{}
	produce := func(pid int64, values ...string) {
		recs := make([]record.Record, len(values))
		for i, v := range values {
			recs[i] = record.Record{Value: []byte(v)}
		}
		batch, err := record.Build(record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), Idempotent: true, Transactional: true,
			ProducerID: pid, BaseSequence: seq[pid]}, recs)
		if err != nil {
			t.Fatal(err)
		}
		seq[pid] += int32(len(values))
		req := kmsg.NewPtrProduceRequest()
		id := fmt.Sprintf("tx-%d", pid)
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, raw)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
	}
	marker := func(pid int64, commit bool) {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed, m.CoordinatorEpoch = pid, commit, 1
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, raw)
		if err == nil {
			err = kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
		}
		if err != nil {
			t.Fatalf("WriteTxnMarkers: %v", err)
		}
	}

	var committed, all []string
	for round := range 5 {
		c := []string{fmt.Sprintf("c%d-a", round), fmt.Sprintf("c%d-b", round)}
		a := []string{fmt.Sprintf("a%d-a", round), fmt.Sprintf("a%d-b", round), fmt.Sprintf("a%d-c", round)}
		// Interleaved: each transaction spans the other's batches.
		produce(committer, c[0])
		produce(aborter, a[:2]...)
		produce(committer, c[1])
		produce(aborter, a[2])
		marker(aborter, false)
		marker(committer, true)
		committed = append(committed, c...)
		all = append(all, c[0], a[0], a[1], c[1], a[2])
	}
	// A last transaction left open: read_committed stops before it.
	produce(committer, "open")
	all = append(all, "open")

	read := func(isolation kgo.IsolationLevel, want int) []string {
		cl := b.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation),
			kgo.FetchMaxWait(200*time.Millisecond))
		var got []string
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		for len(got) < want {
			fs := cl.PollFetches(rctx)
			if err := rctx.Err(); err != nil {
				t.Fatalf("read %d of %d records: %v", len(got), want, got)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		// Nothing more arrives: one more poll within a short wait.
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer pcancel()
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		return got
	}
	if got := read(kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed saw %v, want %v", got, committed)
	}
	if got := read(kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted saw %v, want %v", got, all)
	}

	// DescribeProducers (kadm) names the open transaction's start.
	described, err := b.admin().DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var open []int64
	described.EachProducer(func(d kadm.DescribedProducer) {
		if d.CurrentTxnStartOffset >= 0 {
			open = append(open, d.ProducerID)
		}
		if d.CoordinatorEpoch != 1 {
			t.Errorf("producer %d: coordinator epoch %d, want 1", d.ProducerID, d.CoordinatorEpoch)
		}
	})
	if !slices.Equal(open, []int64{committer}) {
		t.Fatalf("producers with an open transaction: %v, want [%d]", open, committer)
	}

	// The aborted-transaction index and the open transaction survive a crash.
	b.restart(true)
	raw = b.client()
	if got := read(kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("after a crash, read_committed saw %v, want %v", got, committed)
	}
	marker(committer, true)
	committed = append(committed, "open")
	if got := read(kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("after the last commit, read_committed saw %v, want %v", got, committed)
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
