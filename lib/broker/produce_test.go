package broker

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/server"
)

const produceVersion = 11

// produceRequest builds a one-partition produce request.
func produceRequest(topic string, partition int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produce sends one batch and returns the partition's answer (the zero
// value for acks=0).
func produce(t *testing.T, tb *testBroker, topic string, partition int32, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := tb.do(t, produceVersion, produceRequest(topic, partition, acks, records))
	if resp == nil {
		return kmsg.ProduceResponseTopicPartition{}
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func TestProduceAcks(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "acks", 1, nil)
	var next int64
	for _, acks := range []int16{1, -1, 0, 1} {
		got := produce(t, tb, "acks", 0, acks, testBatch(t, record.BuildOptions{}, "v", 4))
		if acks == 0 {
			if got.Partition != 0 || got.ErrorCode != 0 || got.BaseOffset != 0 {
				t.Fatalf("acks=0 got a response: %+v", got)
			}
		} else if got.ErrorCode != 0 || got.BaseOffset != next || got.LogStartOffset != 0 || got.LogAppendTime != -1 {
			t.Fatalf("acks=%d: %+v, want base offset %d", acks, got, next)
		}
		next += 4
	}
	if hw := tb.parts.Lookup("acks", 0).HighWatermark(); hw != next {
		t.Fatalf("high-water mark %d, want %d", hw, next)
	}
}

func TestProduceRefusals(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.AutoCreateTopics = false })
	tb.createTopic(t, "small", 1, map[string]string{"max.message.bytes": "200"})
	tb.createTopic(t, "t", 1, nil)

	good := testBatch(t, record.BuildOptions{}, "ok", 2)
	badCRC := testBatch(t, record.BuildOptions{}, "crc", 2)
	badCRC[len(badCRC)-1] ^= 0xff
	badCount := testBatch(t, record.BuildOptions{}, "count", 2)
	badCount[60]++ // NumRecords no longer matches LastOffsetDelta
	record.UpdateCRC(badCount)
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	truncated := good[:len(good)-3]
	large := testBatch(t, record.BuildOptions{}, string(make([]byte, 300)), 1)
	txn := testBatch(t, record.BuildOptions{Idempotent: true, Transactional: true, ProducerID: 1}, "txn", 1)
	// A good batch followed by a corrupt one: nothing may be appended.
	goodThenBad := append(append([]byte(nil), good...), badCRC...)

	tests := []struct {
		name    string
		topic   string
		part    int32
		records []byte
		version int16
		want    int16
	}{
		{"unknown topic, no auto-create", "nope", 0, good, produceVersion, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", "t", 7, good, produceVersion, kerr.UnknownTopicOrPartition.Code},
		{"bad crc", "t", 0, badCRC, produceVersion, kerr.CorruptMessage.Code},
		{"count mismatch", "t", 0, badCount, produceVersion, kerr.InvalidRecord.Code},
		{"count mismatch, old version", "t", 0, badCount, 7, kerr.CorruptMessage.Code},
		{"magic 1", "t", 0, badMagic, produceVersion, kerr.InvalidRecord.Code},
		{"truncated", "t", 0, truncated, produceVersion, kerr.CorruptMessage.Code},
		{"empty records", "t", 0, nil, produceVersion, kerr.InvalidRecord.Code},
		{"good then corrupt", "t", 0, goodThenBad, produceVersion, kerr.CorruptMessage.Code},
		{"over max.message.bytes", "small", 0, large, produceVersion, kerr.MessageTooLarge.Code},
		{"transactional batch without a transactional id", "t", 0, txn, produceVersion, kerr.InvalidRecord.Code},
		{"control batch", "t", 0, record.BuildMarker(record.Marker{ProducerID: 1, Commit: true}, 0), produceVersion, kerr.InvalidRecord.Code},
		{"acks 2", "t", 0, good, produceVersion, kerr.InvalidRequiredAcks.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acks := int16(1)
			if tt.name == "acks 2" {
				acks = 2
			}
			resp := tb.do(t, tt.version, produceRequest(tt.topic, tt.part, acks, tt.records)).(*kmsg.ProduceResponse)
			got := resp.Topics[0].Partitions[0]
			if got.ErrorCode != tt.want {
				t.Fatalf("error %v, want %v", kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tt.want))
			}
			if got.BaseOffset != -1 {
				t.Fatalf("base offset %d on error, want -1", got.BaseOffset)
			}
		})
	}
	for _, topic := range []string{"t", "small"} {
		if end := tb.parts.Lookup(topic, 0).Log().EndOffset(); end != 0 {
			t.Fatalf("%s: refused produce appended: log end %d", topic, end)
		}
	}
}

func TestProduceAcksZeroErrorClosesConnection(t *testing.T) {
	tb := startBroker(t, "", nil)
	req := produceRequest("missing", 0, 0, testBatch(t, record.BuildOptions{}, "x", 1))
	req.SetVersion(produceVersion)
	reply := tb.Handle(context.Background(), testConn, &server.Request{Key: req.Key(), Version: produceVersion, Body: req})
	if reply == nil {
		t.Fatal("acks=0 error: no reply, want a connection close")
	}
	if resp := reply(); !resp.CloseAfter || !resp.Empty() {
		t.Fatalf("acks=0 error: %+v, want an empty response closing the connection", resp)
	}
}

func TestProduceIdempotence(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "idem", 1, nil)
	opts := func(seq int32) record.BuildOptions {
		return record.BuildOptions{Idempotent: true, ProducerID: 42, ProducerEpoch: 0, BaseSequence: seq}
	}
	first := testBatch(t, opts(0), "a", 3)
	retry := append([]byte(nil), first...)
	if got := produce(t, tb, "idem", 0, -1, first); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", got)
	}
	if got := produce(t, tb, "idem", 0, -1, testBatch(t, opts(3), "b", 2)); got.ErrorCode != 0 || got.BaseOffset != 3 {
		t.Fatalf("second batch: %+v", got)
	}
	// The retry of the first batch is answered with its original offset and
	// not written again.
	if got := produce(t, tb, "idem", 0, -1, retry); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("retried batch: %+v, want no error and base offset 0", got)
	}
	if end := tb.parts.Lookup("idem", 0).Log().EndOffset(); end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
	// A gap in the sequence.
	if got := produce(t, tb, "idem", 0, -1, testBatch(t, opts(9), "gap", 1)); got.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(got.ErrorCode))
	}
	// An older epoch of the same producer after a newer one.
	newer := record.BuildOptions{Idempotent: true, ProducerID: 42, ProducerEpoch: 1, BaseSequence: 0}
	if got := produce(t, tb, "idem", 0, -1, testBatch(t, newer, "e1", 1)); got.ErrorCode != 0 {
		t.Fatalf("new epoch: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := produce(t, tb, "idem", 0, -1, testBatch(t, opts(5), "old", 1)); got.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(got.ErrorCode))
	}
}

func TestProduceLogAppendTime(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	before := time.Now().Add(-time.Second).UnixMilli()
	got := produce(t, tb, "lat", 0, 1, testBatch(t, record.BuildOptions{BaseTimestamp: 1000}, "x", 1))
	if got.ErrorCode != 0 || got.LogAppendTime < before {
		t.Fatalf("produce to a LogAppendTime topic: %+v, want a log append time ≥ %d", got, before)
	}
}

func TestProduceAcksAllTimesOutWithoutFollowers(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "slow", 1, nil)
	// Pretend a second replica in the ISR that never fetches: the HW
	// cannot pass the batch, so acks=all times out.
	h := tb.parts.Lookup("slow", 0)
	if err := h.Become(replica.PartitionState{Leader: 1, LeaderEpoch: h.LeaderEpoch(), PartitionEpoch: h.State().PartitionEpoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	req := produceRequest("slow", 0, -1, testBatch(t, record.BuildOptions{}, "x", 1))
	req.TimeoutMillis = 50
	resp := tb.do(t, produceVersion, req).(*kmsg.ProduceResponse)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all without the ISR: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(got.ErrorCode))
	}
	// min.insync.replicas=2 with the ISR shrunk to {1}: refused up front.
	if err := h.Become(replica.PartitionState{Leader: 1, LeaderEpoch: h.LeaderEpoch(), PartitionEpoch: h.State().PartitionEpoch, Replicas: []int32{1, 2}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	h.SetMinInsyncReplicas(2)
	if got := produce(t, tb, "slow", 0, -1, testBatch(t, record.BuildOptions{}, "y", 1)); got.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(got.ErrorCode))
	}
}

func TestProduceSeveralBatchesInOnePartition(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "multi", 1, nil)
	two := append(testBatch(t, record.BuildOptions{}, "a", 2), testBatch(t, record.BuildOptions{}, "b", 3)...)
	if got := produce(t, tb, "multi", 0, -1, two); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("two batches: %v base offset %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	got := fetchOne(t, tb, 12, fetchRequest("multi", id, 0, 0, 0))
	if values := recordValues(t, got.RecordBatches); len(values) != 5 || values[2] != "b-0" {
		t.Fatalf("values %q", values)
	}
}

// A produce request's state goes back to a pool once its response is done
// with, and must not keep the request's frame alive there: the server
// decodes recycled requests in place (the topic names point into the
// frame), and a 100 MiB frame kept by a pooled name would be memory outside
// queued.max.request.bytes.
func TestProduceStateKeepsNoRequestFrame(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "t", 1, nil)
	req := produceRequest("t", 0, 1, testBatch(t, record.BuildOptions{}, "v", 1))
	req.SetVersion(produceVersion)
	frame := req.AppendTo(make([]byte, 0, 2<<20))
	collected := make(chan struct{})
	runtime.AddCleanup(&frame[0], func(c chan struct{}) { close(c) }, collected)
	body := kmsg.NewPtrProduceRequest()
	body.SetVersion(produceVersion)
	if err := body.UnsafeReadFrom(frame); err != nil {
		t.Fatal(err)
	}
	sreq := &server.Request{Key: body.Key(), Version: produceVersion, Body: body}
	resp := sreq.Answer(tb.Handle(context.Background(), testConn, sreq))
	if code := decodeResponse(t, body.Key(), produceVersion, resp).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	resp.Done()
	frame, body, sreq, resp = nil, nil, nil, server.Response{}
	// One collection: a frame still referenced from a pool survives it
	// (sync.Pool keeps what it held for one more cycle).
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's frame is still referenced after its response was done with")
	}
}

// TestProduceToCompactedTopicNeedsKeys: a compacted topic refuses a batch
// holding records without a key, whole, with INVALID_RECORD (CORRUPT_MESSAGE
// before Produce v8), the message and, per KIP-467, the index of each
// keyless record in its batch; compressed batches are checked too. A topic
// whose cleanup.policy becomes compact refuses them from then on; one that
// only deletes takes them.
func TestProduceToCompactedTopicNeedsKeys(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "table", 1, map[string]string{"cleanup.policy": "compact"})
	tb.createTopic(t, "stream", 1, nil)
	batch := func(codec record.Codec, keys ...string) []byte {
		recs := make([]record.Record, len(keys))
		for i, k := range keys {
			if k != "" {
				recs[i].Key = []byte(k)
			}
			recs[i].Value = []byte("v")
		}
		b, err := record.Build(record.BuildOptions{Codec: codec, BaseTimestamp: time.Now().UnixMilli()}, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	refused := func(topic string, version int16, b []byte, want int16, indexes ...int32) {
		t.Helper()
		resp := tb.do(t, version, produceRequest(topic, 0, 1, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if resp.ErrorCode != want || resp.BaseOffset != -1 {
			t.Fatalf("%s v%d: error %v, base offset %d; want %v", topic, version, kerr.ErrorForCode(resp.ErrorCode), resp.BaseOffset, kerr.ErrorForCode(want))
		}
		if version < 8 {
			return
		}
		var got []int32
		for _, r := range resp.ErrorRecords {
			if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "without a key") {
				t.Fatalf("%s: record error %+v", topic, r)
			}
			got = append(got, r.RelativeOffset)
		}
		if resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "compacted topic partition "+topic+"-0") || !slices.Equal(got, indexes) {
			t.Fatalf("%s: error message %v, record errors at %v; want them at %v", topic, resp.ErrorMessage, got, indexes)
		}
	}
	refused("table", produceVersion, batch(record.CodecNone, "a", "", "b", ""), kerr.InvalidRecord.Code, 1, 3)
	refused("table", produceVersion, batch(record.CodecZstd, ""), kerr.InvalidRecord.Code, 0)
	refused("table", 7, batch(record.CodecNone, ""), kerr.CorruptMessage.Code)
	if got := produce(t, tb, "table", 0, 1, batch(record.CodecLZ4, "a", "b")); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("keyed records to a compacted topic: %v at %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	if got := produce(t, tb, "stream", 0, 1, batch(record.CodecNone, "", "")); got.ErrorCode != 0 {
		t.Fatalf("records without a key to a deleting topic: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.ctrl.AlterTopicConfigs(ctx, "stream", map[string]string{"cleanup.policy": "compact,delete"}, nil); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(t, "cleanup.policy applied", func() bool { return tb.parts.Lookup("stream", 0).Config().CleanupPolicy == "compact,delete" })
	refused("stream", produceVersion, batch(record.CodecNone, "k", ""), kerr.InvalidRecord.Code, 1)
}
