package broker

import (
	"fmt"
	"testing"

	"github.com/mqproject/mq/lib/record"
)

// newSpreadHotPath is a hotPath whose produce and fetch each carry parts
// partitions of one topic (a batch of 10 records each), as a client
// spreading its load over many partitions sends them (issue 19).
func newSpreadHotPath(tb testing.TB, parts int) *hotPath {
	b := startBroker(tb, "", nil)
	id := b.createTopic(tb, "spread", int32(parts), nil)
	const n = 10
	batch := testBatch(tb, record.BuildOptions{}, "v", n)
	h := &hotPath{
		tb:       b,
		produce:  produceRequest("spread", 0, -1, batch),
		fetch:    fetchRequest("spread", id, 0, 0, 0),
		perRound: n,
	}
	h.fetch.MaxBytes = 1 << 30
	for p := 1; p < parts; p++ {
		rp := h.produce.Topics[0].Partitions[0]
		rp.Partition = int32(p)
		rp.Records = append([]byte(nil), batch...) // its own: the broker sets the base offset in place
		h.produce.Topics[0].Partitions = append(h.produce.Topics[0].Partitions, rp)
		fp := h.fetch.Topics[0].Partitions[0]
		fp.Partition = int32(p)
		h.fetch.Topics[0].Partitions = append(h.fetch.Topics[0].Partitions, fp)
	}
	h.produce.SetVersion(produceVersion)
	h.fetch.SetVersion(hotPathFetchVersion)
	return h
}

func (h *hotPath) spreadRound() {
	h.handle(produceVersion, h.produce)
	for i := range h.fetch.Topics[0].Partitions {
		h.fetch.Topics[0].Partitions[i].FetchOffset = h.next
	}
	h.next += h.perRound
	h.handle(hotPathFetchVersion, h.fetch)
}

// BenchmarkProduceAndFetchSpread is BenchmarkProduceAndFetchHandlers with
// 1, 10, 100 and 1,000 partitions in each produce and fetch: what a
// partition more costs a request (ns/partition), and whether the
// allocations per request stay flat.
func BenchmarkProduceAndFetchSpread(b *testing.B) {
	for _, parts := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			h := newSpreadHotPath(b, parts)
			b.ReportAllocs()
			for b.Loop() {
				h.spreadRound()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(parts), "ns/partition")
		})
	}
}
