package broker

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

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

func newHotPath(tb testing.TB) *hotPath {
	b := startBroker(tb, "", nil)
	id := b.createTopic(tb, "hot", 1, nil)
	const n = 10
	h := &hotPath{
		tb:       b,
		produce:  produceRequest("hot", 0, -1, testBatch(tb, record.BuildOptions{}, "v", n)),
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
// once warm, a produce and a fetch of what it appended allocate about one
// object between them (the partition's change channel, remade after each
// append that a fetch waited on). Under the race detector sync.Pool
// reuses far less (5 allocations measured, against 16 before pooling).
func TestProduceAndFetchHandlersReuseTheirState(t *testing.T) {
	h := newHotPath(t)
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
	limit := 2.0
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
	h := newHotPath(b)
	b.ReportAllocs()
	for b.Loop() {
		h.round()
	}
}
