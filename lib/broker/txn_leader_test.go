package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/record"
)

// txnProduce sends one transactional batch of producer (pid, epoch)
// starting at seq, as transactional id "tx", and returns the answer.
func txnProduceOne(t *testing.T, tb *testBroker, topic string, pid int64, epoch int16, seq int32, transactional bool, value string) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	b := testBatch(t, record.BuildOptions{Idempotent: true, Transactional: transactional, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, value, 2)
	req := produceRequest(topic, 0, -1, b)
	id := "tx"
	req.TransactionID = &id
	return tb.do(t, produceVersion, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// writeMarker sends WriteTxnMarkers for one partition, as a transaction
// coordinator does, and returns its error code.
func writeMarker(t *testing.T, tb *testBroker, topic string, pid int64, epoch int16, commit bool, coordEpoch int32) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp := tb.do(t, 1, req).(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != pid || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("WriteTxnMarkers answer %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

func fetchIsolated(t *testing.T, tb *testBroker, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchRequest(topic, [16]byte{}, 0, offset, 0)
	req.IsolationLevel = isolation
	return fetchOne(t, tb, 12, req)
}

// batchesOf decodes the record batches of a fetch answer: each batch's
// producer id, whether it is a control batch, and its offsets.
type fetchedBatch struct {
	pid           int64
	control       bool
	base, last    int64
	transactional bool
}

func batchesOf(t *testing.T, b []byte) []fetchedBatch {
	t.Helper()
	var out []fetchedBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg cannot decode a fetched batch: %v", err)
		}
		out = append(out, fetchedBatch{pid: rb.ProducerID, control: rb.Attributes&0x20 != 0, transactional: rb.Attributes&0x10 != 0,
			base: rb.FirstOffset, last: rb.FirstOffset + int64(rb.LastOffsetDelta)})
		b = b[12+int(rb.Length):]
	}
	return out
}

func TestReadCommittedFetchAndWriteTxnMarkers(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "tx", 1, nil)
	plain := produce(t, tb, "tx", 0, -1, testBatch(t, record.BuildOptions{}, "plain", 2))
	a := txnProduceOne(t, tb, "tx", 10, 0, 0, true, "aborted")
	c := txnProduceOne(t, tb, "tx", 11, 0, 0, true, "committed")
	for _, r := range []kmsg.ProduceResponseTopicPartition{plain, a, c} {
		if r.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// Both transactions are open: read_committed stops at the first.
	got := fetchIsolated(t, tb, "tx", 0, 1)
	if got.ErrorCode != 0 || got.HighWatermark != 6 || got.LastStableOffset != a.BaseOffset {
		t.Fatalf("read_committed with open transactions: %+v", got)
	}
	if bs := batchesOf(t, got.RecordBatches); len(bs) != 1 || bs[0].last != 1 {
		t.Fatalf("read_committed returned %+v, want the plain batch only", bs)
	}
	// read_uncommitted sees everything, and the same LSO.
	got = fetchIsolated(t, tb, "tx", 0, 0)
	if got.LastStableOffset != a.BaseOffset || len(batchesOf(t, got.RecordBatches)) != 3 || got.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted: %+v", got)
	}

	if code := writeMarker(t, tb, "tx", 10, 0, false, 3); code != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, tb, "tx", 11, 0, true, 3); code != 0 {
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(code))
	}
	got = fetchIsolated(t, tb, "tx", 0, 1)
	if got.HighWatermark != 8 || got.LastStableOffset != 8 {
		t.Fatalf("after the markers: %+v", got)
	}
	if len(got.AbortedTransactions) != 1 || got.AbortedTransactions[0].ProducerID != 10 || got.AbortedTransactions[0].FirstOffset != a.BaseOffset {
		t.Fatalf("aborted transactions %+v", got.AbortedTransactions)
	}
	bs := batchesOf(t, got.RecordBatches)
	if len(bs) != 5 || !bs[3].control || !bs[4].control || bs[3].pid != 10 || bs[4].pid != 11 || !bs[1].transactional {
		t.Fatalf("batches %+v", bs)
	}
	// A fetch past producer 10's marker needs no aborted list.
	if got := fetchIsolated(t, tb, "tx", bs[4].base, 1); got.AbortedTransactions == nil || len(got.AbortedTransactions) != 0 {
		t.Fatalf("fetch from %d: aborted %+v", bs[4].base, got.AbortedTransactions)
	}
	// ListOffsets latest: the LSO for read_committed, the HW otherwise.
	txnProduceOne(t, tb, "tx", 12, 0, 0, true, "open")
	for _, iso := range []int8{0, 1} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "tx"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := tb.do(t, 5, req).(*kmsg.ListOffsetsResponse)
		want := int64(10)
		if iso == 1 {
			want = 8
		}
		if o := resp.Topics[0].Partitions[0].Offset; o != want {
			t.Fatalf("ListOffsets latest, isolation %d: %d, want %d", iso, o, want)
		}
	}

	// The coordinator that moved on fences the one before; a marker
	// from an older producer epoch is refused.
	if code := writeMarker(t, tb, "tx", 11, 0, false, 2); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker from coordinator epoch 2 after 3: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, tb, "tx", 11, -1, true, 3); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker from an older producer epoch: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, tb, "nope", 12, 0, true, 3); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("marker for an unknown topic: %v", kerr.ErrorForCode(code))
	}

	// DescribeProducers shows the open transaction.
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "tx", []int32{0}
	dreq.Topics = append(dreq.Topics, dt)
	dresp := tb.do(t, 0, dreq).(*kmsg.DescribeProducersResponse)
	ps := dresp.Topics[0].Partitions[0]
	if ps.ErrorCode != 0 || len(ps.ActiveProducers) != 3 {
		t.Fatalf("DescribeProducers: %+v", ps)
	}
	for _, ap := range ps.ActiveProducers {
		wantStart, wantCoord := int64(-1), int32(3)
		if ap.ProducerID == 12 {
			wantStart, wantCoord = 8, -1
		}
		if ap.CurrentTxnStartOffset != wantStart || ap.CoordinatorEpoch != wantCoord || ap.LastSequence != 1 || ap.LastTimestamp <= 0 {
			t.Fatalf("producer %+v", ap)
		}
	}
}

func TestTransactionalProduceErrors(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "tx", 1, nil)
	if r := txnProduceOne(t, tb, "tx", 20, 5, 0, true, "a"); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := txnProduceOne(t, tb, "tx", 20, 4, 2, true, "zombie"); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := txnProduceOne(t, tb, "tx", 20, 5, 2, false, "outside"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("non-transactional batch in a transaction: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := txnProduceOne(t, tb, "tx", 20, 5, 9, true, "gap"); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The coordinator aborted with a bumped epoch: the old epoch is fenced.
	if code := writeMarker(t, tb, "tx", 20, 6, false, 0); code != 0 {
		t.Fatalf("marker: %v", kerr.ErrorForCode(code))
	}
	if r := txnProduceOne(t, tb, "tx", 20, 5, 2, true, "after the abort"); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A tiered topic takes transactions: its remote part keeps the
	// aborted-transaction index of each segment (lib/tier).
	tb.createTopic(t, "tiered", 1, map[string]string{"remote.storage.enable": "true"})
	if r := txnProduceOne(t, tb, "tiered", 21, 0, 0, true, "tiered"); r.ErrorCode != 0 {
		t.Fatalf("a transaction on a tiered topic: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// memVerifier is an in-memory transaction coordinator's answer to
// verifications: the producers in an ongoing transaction, per partition.
type memVerifier struct {
	mu      sync.Mutex
	ongoing map[int64]bool
	err     error
	calls   []bool // each call's add
}

func (v *memVerifier) VerifyTxn(_ context.Context, txnID string, pid int64, epoch int16, topic string, partition int32, add bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, add)
	if v.err != nil {
		return v.err
	}
	if add {
		v.ongoing[pid] = true
	}
	if !v.ongoing[pid] {
		return kerr.InvalidTxnState
	}
	return nil
}

func TestTransactionalProduceIsVerifiedOncePerTransaction(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "tx", 1, nil)
	v := &memVerifier{ongoing: map[int64]bool{}}
	tb.txnVerifier = v
	if r := txnProduceOne(t, tb, "tx", 30, 0, 0, true, "no txn"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("a producer in no transaction: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	v.mu.Lock()
	v.ongoing[30] = true
	v.mu.Unlock()
	for seq := int32(0); seq < 6; seq += 2 {
		if r := txnProduceOne(t, tb, "tx", 30, 0, seq, true, "in txn"); r.ErrorCode != 0 {
			t.Fatalf("seq %d: %v", seq, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if len(v.calls) != 2 || v.calls[0] || v.calls[1] {
		t.Fatalf("verifications %v, want two (VerifyOnly), the refused one and the first of the transaction", v.calls)
	}
	// The marker ends what was verified: the next transaction asks again.
	if code := writeMarker(t, tb, "tx", 30, 0, true, 0); code != 0 {
		t.Fatalf("marker: %v", kerr.ErrorForCode(code))
	}
	v.mu.Lock()
	v.ongoing[30], v.err = false, errors.New("coordinator unreachable")
	v.mu.Unlock()
	if r := txnProduceOne(t, tb, "tx", 30, 0, 6, true, "next txn"); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("unreachable coordinator: %v, want the retriable NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(r.ErrorCode))
	}
	v.mu.Lock()
	v.err = kerr.ProducerFenced
	v.mu.Unlock()
	if r := txnProduceOne(t, tb, "tx", 30, 0, 6, true, "fenced"); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced producer: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// A marker written between a leader's verification and its append
// leaves the transaction closed: the append is refused.
func TestMarkerBetweenVerificationAndAppendRefusesTheBatch(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "tx", 1, nil)
	l := tb.parts.Lookup("tx", 0).Log()
	l.MarkTxnVerified(40, 0)
	if code := writeMarker(t, tb, "tx", 40, 0, false, 0); code != 0 {
		t.Fatalf("marker: %v", kerr.ErrorForCode(code))
	}
	if r := txnProduceOne(t, tb, "tx", 40, 0, 0, true, "late"); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("append after the marker: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestMarkerOnConsumerOffsetsTellsTheGroupCoordinator(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, offsetsTopic, 2, nil)
	tb.createTopic(t, "tx", 1, nil)
	type call struct {
		partition int32
		pid       int64
		epoch     int16
		commit    bool
	}
	var mu sync.Mutex
	var calls []call
	tb.groupTxnCompleted = func(partition int32, pid int64, epoch int16, commit bool) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{partition, pid, epoch, commit})
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 50, 2, true
	for _, topic := range []string{offsetsTopic, "tx"} {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		if topic == offsetsTopic {
			mt.Partitions = []int32{1}
		}
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	resp := tb.do(t, 1, req).(*kmsg.WriteTxnMarkersResponse)
	for _, rt := range resp.Markers[0].Topics {
		if rt.Partitions[0].ErrorCode != 0 {
			t.Fatalf("%s: %v", rt.Topic, kerr.ErrorForCode(rt.Partitions[0].ErrorCode))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []call{{1, 50, 2, true}}; !slices.Equal(calls, want) {
		t.Fatalf("group coordinator told %+v, want %+v", calls, want)
	}
	if end := tb.parts.Lookup(offsetsTopic, 1).Log().EndOffset(); end != 1 {
		t.Fatalf("__consumer_offsets-1 ends at %d, want the marker at 0", end)
	}
}
