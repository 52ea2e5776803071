package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
)

var allCodecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// codecBatch builds a batch in codec of n records with keys, values and
// headers from an idempotent producer.
func codecBatch(t testing.TB, codec record.Codec, seq int32, n int) ([]byte, []record.Record) {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{
			TimestampDelta: int64(i * 3),
			Key:            fmt.Appendf(nil, "key-%d", i%7),
			Value:          fmt.Appendf(nil, "%s value %d %s", codec, i, strings.Repeat("x", i)),
			Headers:        []record.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t%d", i)}, {Key: "null"}},
		}
	}
	if n > 1 {
		recs[1].Key = nil // a null key among them
	}
	opts := record.BuildOptions{
		Codec: codec, BaseTimestamp: time.Now().UnixMilli(),
		Idempotent: true, ProducerID: 7, ProducerEpoch: 2, BaseSequence: seq,
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b, recs
}

// storedBatches fetches the batches of partition 0 of topic from offset
// on, as stored.
func storedBatches(t *testing.T, tb *testBroker, topic string, id controller.TopicID, offset int64) [][]byte {
	t.Helper()
	got := fetchOne(t, tb, 12, fetchRequest(topic, id, 0, offset, 0))
	if got.ErrorCode != 0 {
		t.Fatalf("fetch %s: %v", topic, kerr.ErrorForCode(got.ErrorCode))
	}
	var out [][]byte
	for rest := got.RecordBatches; len(rest) > 0; {
		batch, next, _, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.CheckCRC(batch); err != nil {
			t.Fatal(err)
		}
		out = append(out, batch)
		rest = next
	}
	return out
}

// checkRecords fails unless batch holds exactly want.
func checkRecords(t *testing.T, batch []byte, want []record.Record) {
	t.Helper()
	i := 0
	err := record.Iterate(batch, 0, func(r *record.Record) error {
		if i >= len(want) {
			return fmt.Errorf("more than %d records", len(want))
		}
		w := want[i]
		if r.OffsetDelta != int32(i) || r.TimestampDelta != w.TimestampDelta || !sameBytes(r.Key, w.Key) ||
			!sameBytes(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
			return fmt.Errorf("record %d: %+v, want %+v", i, *r, w)
		}
		for j, h := range r.Headers {
			if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
				return fmt.Errorf("record %d header %d: %q=%q, want %q=%q", i, j, h.Key, h.Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
		i++
		return nil
	})
	if err == nil && i != len(want) {
		err = fmt.Errorf("%d records, want %d", i, len(want))
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// A topic whose compression.type is a codec stores every batch in it,
// whatever the producer's codec, with the same records and producer
// fields; producer (the default) keeps the producer's codec.
func TestProduceStoresTheTopicCodec(t *testing.T) {
	tb := startBroker(t, "", nil)
	for _, policy := range []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		topic := "c-" + policy
		id := tb.createTopic(t, topic, 1, map[string]string{"compression.type": policy})
		for i, from := range allCodecs {
			want := from
			if policy != "producer" {
				want, _ = record.ParseCodec(policy)
			}
			t.Run(policy+"/"+from.String(), func(t *testing.T) {
				batch, recs := codecBatch(t, from, int32(i*20), 20)
				sent, _ := record.ParseHeader(batch)
				got := produce(t, tb, topic, 0, -1, batch)
				if got.ErrorCode != 0 || got.BaseOffset != int64(i*20) {
					t.Fatalf("produce: %v at %d, want offset %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, i*20)
				}
				stored := storedBatches(t, tb, topic, id, int64(i*20))
				if len(stored) != 1 {
					t.Fatalf("%d batches stored, want 1", len(stored))
				}
				h, err := record.Validate(stored[0])
				if err != nil {
					t.Fatal(err)
				}
				if h.Codec() != want {
					t.Fatalf("stored codec %s, want %s", h.Codec(), want)
				}
				if h.BaseOffset != int64(i*20) || h.BaseTimestamp != sent.BaseTimestamp || h.MaxTimestamp != sent.MaxTimestamp ||
					h.ProducerID != 7 || h.ProducerEpoch != 2 || h.BaseSequence != sent.BaseSequence ||
					h.LastOffsetDelta != 19 || h.Attributes&^7 != sent.Attributes&^7 {
					t.Fatalf("stored header %+v, sent %+v", h, sent)
				}
				checkRecords(t, stored[0], recs)
			})
		}
	}
}

// Recompression keeps the producer's sequence numbers, so a retry of a
// recompressed batch is still recognised and not written twice.
func TestProduceRecompressedBatchesKeepIdempotence(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "z", 1, map[string]string{"compression.type": "zstd"})
	first, _ := codecBatch(t, record.CodecNone, 0, 5)
	retry := bytes.Clone(first)
	if got := produce(t, tb, "z", 0, -1, first); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", got)
	}
	second, _ := codecBatch(t, record.CodecSnappy, 5, 3)
	if got := produce(t, tb, "z", 0, -1, second); got.ErrorCode != 0 || got.BaseOffset != 5 {
		t.Fatalf("second batch: %+v", got)
	}
	if got := produce(t, tb, "z", 0, -1, retry); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("retry of the first batch: %+v, want no error and its base offset 0", got)
	}
	if end := tb.parts.Lookup("z", 0).Log().EndOffset(); end != 8 {
		t.Fatalf("log end %d after a duplicate, want 8", end)
	}
	gap, _ := codecBatch(t, record.CodecNone, 20, 1)
	if got := produce(t, tb, "z", 0, -1, gap); got.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(got.ErrorCode))
	}
}

// max.message.bytes applies to the producer's batch and, as in Kafka, to
// the batch stored once recompressed; a request is refused whole.
func TestProduceMaxMessageBytesAfterRecompression(t *testing.T) {
	tb := startBroker(t, "", nil)
	// Random values grow a little under gzip.
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 2000)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	random, err := record.Build(record.BuildOptions{BaseTimestamp: 1}, []record.Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	limit := fmt.Sprint(len(random))
	tb.createTopic(t, "g", 1, map[string]string{"compression.type": "gzip", "max.message.bytes": limit})
	tb.createTopic(t, "p", 1, map[string]string{"max.message.bytes": limit})
	if got := produce(t, tb, "p", 0, 1, random); got.ErrorCode != 0 {
		t.Fatalf("batch at the limit kept as sent: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	small := testBatch(t, record.BuildOptions{}, "ok", 2)
	pr := produce(t, tb, "g", 0, 1, append(bytes.Clone(small), random...))
	if pr.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("batch over the limit once gzipped: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(pr.ErrorCode))
	}
	if pr.ErrorMessage == nil || !strings.Contains(*pr.ErrorMessage, "once recompressed to gzip") {
		t.Fatalf("error message %v, want one naming the recompression", pr.ErrorMessage)
	}
	if end := tb.parts.Lookup("g", 0).Log().EndOffset(); end != 0 {
		t.Fatalf("refused request appended: log end %d", end)
	}
	// A batch over the limit as sent is refused even when it would shrink.
	big := testBatch(t, record.BuildOptions{}, strings.Repeat("z", len(random)), 1)
	if got := produce(t, tb, "g", 0, 1, big); got.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("batch over the limit as sent: %v, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(got.ErrorCode))
	}
}

// Several batches in one partition's records, some in the topic's codec
// already: all are stored in it, in order.
func TestProduceRecompressesEveryBatchOfARequest(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "m", 1, map[string]string{"compression.type": "lz4"})
	a, ra := codecBatch(t, record.CodecLZ4, 0, 3)
	b, rb := codecBatch(t, record.CodecNone, 3, 4)
	c, rc := codecBatch(t, record.CodecZstd, 7, 2)
	if got := produce(t, tb, "m", 0, -1, append(append(bytes.Clone(a), b...), c...)); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("produce: %+v", got)
	}
	stored := storedBatches(t, tb, "m", id, 0)
	if len(stored) != 3 {
		t.Fatalf("%d batches stored, want 3", len(stored))
	}
	for i, want := range [][]record.Record{ra, rb, rc} {
		h, _ := record.ParseHeader(stored[i])
		if h.Codec() != record.CodecLZ4 {
			t.Fatalf("batch %d stored as %s, want lz4", i, h.Codec())
		}
		checkRecords(t, stored[i], want)
	}
	// A request whose second batch does not decompress appends nothing.
	bad, _ := codecBatch(t, record.CodecGzip, 9, 2)
	bad[len(bad)-5] ^= 0xff // gzip's CRC of the data
	record.UpdateCRC(bad)
	ok, _ := codecBatch(t, record.CodecNone, 9, 2)
	if got := produce(t, tb, "m", 0, -1, append(bytes.Clone(ok), bad...)); got.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("request with an undecodable batch: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(got.ErrorCode))
	}
	if end := tb.parts.Lookup("m", 0).Log().EndOffset(); end != 9 {
		t.Fatalf("log end %d after a refused request, want 9", end)
	}
}

// When the batch already has the topic's codec, nothing is decoded: a
// batch whose compressed records are damaged (behind a valid CRC, which
// only a producer with a bug sends) is stored as sent, as under producer.
func TestProduceInTheTopicCodecIsNotDecoded(t *testing.T) {
	tb := startBroker(t, "", nil)
	for _, policy := range []string{"producer", "snappy"} {
		tb.createTopic(t, "n-"+policy, 1, map[string]string{"compression.type": policy})
		bad, _ := codecBatch(t, record.CodecSnappy, 0, 3)
		bad[len(bad)-1] ^= 0xff
		record.UpdateCRC(bad)
		if got := produce(t, tb, "n-"+policy, 0, 1, bad); got.ErrorCode != 0 {
			t.Fatalf("compression.type=%s: %v, want the batch stored undecoded", policy, kerr.ErrorForCode(got.ErrorCode))
		}
	}
}
