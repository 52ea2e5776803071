package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/server"
)

// hotPath is a produce and a fetch of what it appended, handled as the
// server handles them (Handle, the response, Done) with requests decoded
// once and reused, so that only the handlers' own allocations count.
type hotPath struct {
	tb         *testBroker
	produce    *kmsg.ProduceRequest
	fetch      *kmsg.FetchRequest
	req        server.Request
	next       int64 // the fetch offset of the next round
	perRound   int64 // records appended per round
	lastAnswer server.Response
}

const hotPathFetchVersion = 12

// newHotPath produces to a topic with configs (nil: the defaults).
func newHotPath(tb testing.TB, configs map[string]string) *hotPath {
	return newFollowedHotPath(tb, configs, -1)
}

// newFollowedHotPath is newHotPath whose topic has follower (>= 0) as a
// replica out of the ISR, for fetches as that follower.
func newFollowedHotPath(tb testing.TB, configs map[string]string, follower int32) *hotPath {
	b := startBroker(tb, "", nil)
	var id controller.TopicID
	if follower >= 0 {
		id = b.createFollowedTopic(tb, "hot", 1, configs, follower)
	} else {
		id = b.createTopic(tb, "hot", 1, configs)
	}
	const n = 10
	recs := make([]record.Record, n)
	for i := range recs {
		// Keyed, as a compacted topic wants them.
		recs[i] = record.Record{Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v-%d", i)}
	}
	batch, err := record.Build(record.BuildOptions{}, recs)
	if err != nil {
		tb.Fatal(err)
	}
	h := &hotPath{
		tb:       b,
		produce:  produceRequest("hot", 0, -1, batch),
		fetch:    fetchRequest("hot", id, 0, 0, 0),
		perRound: n,
	}
	h.produce.SetVersion(produceVersion)
	h.fetch.SetVersion(hotPathFetchVersion)
	return h
}

// handle answers body and releases the response, keeping a copy of it
// (valid until the next call) for inspection.
func (h *hotPath) handle(version int16, body kmsg.Request) server.Response {
	h.req = server.Request{Key: body.Key(), Version: version, Body: body}
	resp := h.req.Answer(h.tb.Handle(context.Background(), testConn, &h.req))
	h.lastAnswer = resp
	if resp.Done != nil {
		resp.Done()
	}
	return resp
}

func (h *hotPath) round() {
	h.handle(produceVersion, h.produce)
	h.fetch.Topics[0].Partitions[0].FetchOffset = h.next
	h.next += h.perRound
	h.handle(hotPathFetchVersion, h.fetch)
}

// TestProduceAndFetchHandlersReuseTheirState checks that the produce and
// fetch handlers take their per-request state (responses, the fetch's
// partitions and encoding buffer, the Reply and Done funcs) from pools:
// once warm, a produce and a fetch of what it appended allocate nothing
// (a fetch answered at once takes no partition change channel, which the
// next append would remake; BenchmarkProduceAndFetchSpread shows that
// flat over 1,000 partitions a request). Under the race detector sync.Pool
// reuses far less (5 allocations measured, against 16 before pooling).
// A topic whose compression.type is the batches' codec takes the same
// path as producer, the default: nothing is decoded or copied. A
// compacted topic's batches are decoded to check their keys, with an
// iterator from a pool: no allocation either.
func TestProduceAndFetchHandlersReuseTheirState(t *testing.T) {
	for name, configs := range map[string]map[string]string{
		"producer":     {"compression.type": "producer"},
		"uncompressed": {"compression.type": "uncompressed"},
		"compacted":    {"cleanup.policy": "compact"},
	} {
		t.Run(name, func(t *testing.T) {
			testHandlersReuseTheirState(t, configs)
		})
	}
}

func testHandlersReuseTheirState(t *testing.T, configs map[string]string) {
	h := newHotPath(t, configs)
	for range 10 {
		h.round()
	}
	// The fetch really read the records: one batch of perRound records.
	h.round()
	resp := decodeResponse(t, kmsg.Fetch.Int16(), hotPathFetchVersion, h.lastAnswer)
	parts := resp.(*kmsg.FetchResponse).Topics[0].Partitions
	if len(parts) != 1 || parts[0].ErrorCode != 0 || len(parts[0].RecordBatches) == 0 {
		t.Fatalf("fetch answered %+v, want the batch just produced", parts)
	}
	allocs := testing.AllocsPerRun(500, h.round)
	t.Logf("%.2f allocations per produce and fetch", allocs)
	limit := 1.0
	if raceEnabled {
		limit = 8
	}
	if allocs > limit {
		t.Errorf("%.2f allocations per produce and fetch, want at most %g", allocs, limit)
	}
}

// BenchmarkProduceAndFetchHandlers measures the handlers alone: a
// produce of ten 1-byte-ish records and a fetch of them per iteration.
func BenchmarkProduceAndFetchHandlers(b *testing.B) {
	h := newHotPath(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		h.round()
	}
}

// The produce and fetch handlers' state is pooled: a request of one shape
// must see nothing an earlier request of another shape left behind
// (partitions, records, errors, topic names or IDs).
func TestPooledStateDoesNotLeakBetweenRequests(t *testing.T) {
	tb := startBroker(t, "", nil)
	idA := tb.createTopic(t, "a", 3, nil)
	tb.createTopic(t, "b", 1, nil)
	for p := range int32(3) {
		if r := produce(t, tb, "a", p, -1, testBatch(t, record.BuildOptions{}, "a", 5)); r.ErrorCode != 0 {
			t.Fatalf("produce a/%d: error %d", p, r.ErrorCode)
		}
	}
	if r := produce(t, tb, "b", 0, -1, testBatch(t, record.BuildOptions{}, "b", 2)); r.ErrorCode != 0 {
		t.Fatalf("produce b/0: error %d", r.ErrorCode)
	}

	// Four partitions of two topics, each with records.
	big := fetchRequest("a", idA, 0, 0, 0)
	for _, p := range []int32{1, 2} {
		rp := big.Topics[0].Partitions[0]
		rp.Partition = p
		big.Topics[0].Partitions = append(big.Topics[0].Partitions, rp)
	}
	big.Topics = append(big.Topics, fetchRequest("b", [16]byte{}, 0, 0, 0).Topics[0])
	resp := tb.do(t, 12, big).(*kmsg.FetchResponse)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("fetch of a/0-2 and b/0: %+v", resp.Topics)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
				t.Fatalf("fetch %s/%d: error %d, %d bytes of records", rt.Topic, rp.Partition, rp.ErrorCode, len(rp.RecordBatches))
			}
		}
	}

	// One partition at its end: nothing of the fetch before.
	small := tb.do(t, 12, fetchRequest("b", [16]byte{}, 0, 2, 0)).(*kmsg.FetchResponse)
	if len(small.Topics) != 1 || small.Topics[0].Topic != "b" || len(small.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch of b/0 at its end: %+v", small.Topics)
	}
	if p := small.Topics[0].Partitions[0]; p.Partition != 0 || p.ErrorCode != 0 || p.HighWatermark != 2 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch of b/0 at its end: %+v", p)
	}

	// An unknown topic: an error, no offsets, no records.
	if p := fetchOne(t, tb, 12, fetchRequest("zz", [16]byte{}, 0, 0, 0)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.HighWatermark != -1 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch of an unknown topic: %+v", p)
	}

	// By topic ID (v13): the ID comes back, not a name left over.
	byID := tb.do(t, 13, fetchRequest("", idA, 1, 0, 0)).(*kmsg.FetchResponse)
	if len(byID.Topics) != 1 || byID.Topics[0].TopicID != idA || byID.Topics[0].Topic != "" {
		t.Fatalf("fetch by topic id: %+v", byID.Topics)
	}
	if p := byID.Topics[0].Partitions[0]; p.Partition != 1 || p.HighWatermark != 5 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch of a/1 by topic id: %+v", p)
	}

	// A produce with a failing partition, then one without: the error
	// (and its message) stays with the first.
	multi := produceRequest("zz", 0, -1, testBatch(t, record.BuildOptions{}, "z", 1))
	multi.Topics = append(multi.Topics, produceRequest("a", 0, -1, testBatch(t, record.BuildOptions{}, "a", 1)).Topics[0])
	presp := tb.do(t, produceVersion, multi).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 2 || presp.Topics[0].Partitions[0].ErrorMessage == nil || presp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce to zz/0 and a/0: %+v", presp.Topics)
	}
	if r := produce(t, tb, "a", 1, -1, testBatch(t, record.BuildOptions{}, "a", 1)); r.ErrorCode != 0 || r.ErrorMessage != nil || r.BaseOffset != 5 {
		t.Fatalf("produce to a/1 after a failed one: %+v", r)
	}
}

// BenchmarkProduceRecompressing measures the produce handler appending a
// 1 MiB batch of 100-byte records to a topic whose compression.type
// differs from the producer's codec, recompression included. MB/s counts
// the uncompressed records.
func BenchmarkProduceRecompressing(b *testing.B) {
	for _, tc := range []struct {
		from  record.Codec
		topic string
	}{
		{record.CodecNone, "zstd"}, {record.CodecSnappy, "lz4"}, {record.CodecNone, "producer"},
	} {
		b.Run(tc.from.String()+"-to-"+tc.topic, func(b *testing.B) {
			tb := startBroker(b, "", nil)
			tb.createTopic(b, "r", 1, map[string]string{"compression.type": tc.topic, "segment.bytes": "1073741824", "max.message.bytes": "8388608"})
			recs := make([]record.Record, 1<<20/100)
			for i := range recs {
				v := fmt.Sprintf(`{"id":%d,"user":"user-%04d","event":"page_view","path":"/items/%d"}`, i, i%5000, i*7%100000)
				recs[i].Value = []byte((v + strings.Repeat(" ", 100))[:100])
			}
			batch, err := record.Build(record.BuildOptions{Codec: tc.from, BaseTimestamp: 1}, recs)
			if err != nil {
				b.Fatal(err)
			}
			plain, _ := record.Build(record.BuildOptions{BaseTimestamp: 1}, recs)
			req := produceRequest("r", 0, 1, batch)
			req.SetVersion(produceVersion)
			b.SetBytes(int64(len(plain) - record.HeaderSize))
			b.ReportAllocs()
			for b.Loop() {
				sreq := server.Request{Key: req.Key(), Version: produceVersion, Body: req}
				resp := sreq.Answer(tb.Handle(context.Background(), testConn, &sreq))
				if code := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
					b.Fatal(kerr.ErrorForCode(code))
				}
				resp.Done()
			}
		})
	}
}
