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
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mqproject/mq/lib/record"
)

// noTxnVerification: these tests act as the transaction coordinator
// themselves (the coordinator is built elsewhere), so the partitions ask
// none before a transaction's first batch.
const noTxnVerification = "transaction.partition.verification.enable=false"

// beforeVersion2 keeps a client below Produce v12, whose transactional
// batches have the partition leader add the partition to the transaction
// with its coordinator (transaction.version 2): a txnWriter is its own
// coordinator, and sends its batches with a client so capped.
func beforeVersion2() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	return kgo.MaxVersions(v)
}

// txnWriter writes transactional batches to partition 0 of a topic and
// ends transactions with WriteTxnMarkers, as a transactional producer
// and its coordinator would, through send (a request to the partition's
// leader).
type txnWriter struct {
	t     *testing.T
	ctx   context.Context
	topic string
	send  func(context.Context, kmsg.Request) (kmsg.Response, error)
	seq   map[int64]int32
}

func (w *txnWriter) producerID() int64 {
	w.t.Helper()
	resp, err := w.send(w.ctx, kmsg.NewPtrInitProducerIDRequest())
	if err == nil {
		err = kerr.ErrorForCode(resp.(*kmsg.InitProducerIDResponse).ErrorCode)
	}
	if err != nil {
		w.t.Fatalf("InitProducerId: %v", err)
	}
	return resp.(*kmsg.InitProducerIDResponse).ProducerID
}

func (w *txnWriter) produce(pid int64, values ...string) {
	w.t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	batch, err := record.Build(record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), Idempotent: true, Transactional: true,
		ProducerID: pid, BaseSequence: w.seq[pid]}, recs)
	if err != nil {
		w.t.Fatal(err)
	}
	w.seq[pid] += int32(len(values))
	req := kmsg.NewPtrProduceRequest()
	id := fmt.Sprintf("tx-%d", pid)
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = w.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := w.send(w.ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		w.t.Fatalf("transactional produce: %v", err)
	}
}

func (w *txnWriter) marker(pid int64, commit bool) {
	w.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed, m.CoordinatorEpoch = pid, commit, 1
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = w.topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := w.send(w.ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		w.t.Fatalf("WriteTxnMarkers: %v", err)
	}
}

// rounds writes n rounds of two interleaved transactions, one committed
// and one aborted, and returns the values a read_committed and a
// read_uncommitted consumer must see.
func (w *txnWriter) rounds(n int, committer, aborter int64) (committed, all []string) {
	for round := range n {
		c := []string{fmt.Sprintf("c%d-a", round), fmt.Sprintf("c%d-b", round)}
		a := []string{fmt.Sprintf("a%d-a", round), fmt.Sprintf("a%d-b", round), fmt.Sprintf("a%d-c", round)}
		// Interleaved: each transaction spans the other's batches.
		w.produce(committer, c[0])
		w.produce(aborter, a[:2]...)
		w.produce(committer, c[1])
		w.produce(aborter, a[2])
		w.marker(aborter, false)
		w.marker(committer, true)
		committed = append(committed, c...)
		all = append(all, c[0], a[0], a[1], c[1], a[2])
	}
	return committed, all
}

// readTopic reads want values of topic from the start with a new client
// of newClient at isolation, and whatever more comes within a short wait.
func readTopic(t *testing.T, ctx context.Context, newClient func(...kgo.Opt) *kgo.Client, topic string, isolation kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(got) < want {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(got), want, got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer pcancel()
	cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got
}

// TestReadCommittedSeesCommittedTransactionsOnly writes transactional
// batches of two producers and, acting as their transaction coordinator,
// commits one's transactions and aborts the other's with WriteTxnMarkers;
// a kgo consumer reading committed sees the committed records only, in
// order, and one reading uncommitted sees them all. After a crash and a
// restart the read_committed consumer sees the same.
func TestReadCommittedSeesCommittedTransactionsOnly(t *testing.T) {
	b := startBroker(t, brokerOpts{props: []string{noTxnVerification}})
	ctx := ctxFor(t, time.Minute)
	const topic = "txn"
	if _, err := b.admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	raw := b.client(beforeVersion2())
	w := &txnWriter{t: t, ctx: ctx, topic: topic, seq: map[int64]int32{},
		send: func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) { return raw.Request(ctx, req) }}
	committer, aborter := w.producerID(), w.producerID()
	committed, all := w.rounds(5, committer, aborter)
	// A last transaction left open: read_committed stops before it.
	w.produce(committer, "open")
	all = append(all, "open")

	newClient := func(opts ...kgo.Opt) *kgo.Client { return b.client(opts...) }
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed saw %v, want %v", got, committed)
	}
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
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
	raw = b.client(beforeVersion2())
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("after a crash, read_committed saw %v, want %v", got, committed)
	}
	w.marker(committer, true)
	committed = append(committed, "open")
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("after the last commit, read_committed saw %v, want %v", got, committed)
	}
}

// TestClusterReadCommittedAcrossLeaderKill: on an RF=3 partition the
// markers are replicated like any batch and acknowledged once in the
// ISR; after the leader is SIGKILLed, the new leader serves
// read_committed consumers the same committed records, keeps the open
// transaction open (its LSO), and takes its commit.
func TestClusterReadCommittedAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: append(slices.Clone(fastFailover), noTxnVerification)})
	ctx := ctxFor(t, 2*time.Minute)
	const topic = "txn3"
	c.createRF3(topic, 1)
	ps := c.waitPartitions(topic, "in sync", fullISR)
	cl := c.client(beforeVersion2())
	leader := ps[0].leader
	w := &txnWriter{t: t, ctx: ctx, topic: topic, seq: map[int64]int32{},
		send: func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
			return cl.Broker(int(leader)).Request(ctx, req)
		}}
	committer, aborter := w.producerID(), w.producerID()
	committed, all := w.rounds(4, committer, aborter)
	w.produce(committer, "open")
	all = append(all, "open")

	victim := c.node(leader)
	victim.kill()
	ps = c.waitPartitions(topic, "a new leader", func(ps []partitionState) bool {
		return ps[0].leader >= 0 && ps[0].leader != victim.id
	})
	leader = ps[0].leader
	newClient := func(opts ...kgo.Opt) *kgo.Client { return c.client(opts...) }
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed from the new leader %d saw %v, want %v", leader, got, committed)
	}
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadUncommitted(), len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted from the new leader %d saw %v, want %v", leader, got, all)
	}
	w.marker(committer, true)
	committed = append(committed, "open")
	if got := readTopic(t, ctx, newClient, topic, kgo.ReadCommitted(), len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("after the commit on the new leader %d, read_committed saw %v, want %v", leader, got, committed)
	}
}
