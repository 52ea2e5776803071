package bench

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordPoolSizesSlicesByClassAndReusesThem(t *testing.T) {
	p := newRecordPool()
	for _, n := range []int{1, 2, 3, 4, 5, 255, 256, 257, 10000} {
		s := p.GetRecords(n)
		want := 1 << poolClass(n)
		if len(s) != n || cap(s) != want {
			t.Errorf("GetRecords(%d): len %d cap %d, want len %d cap %d", n, len(s), cap(s), n, want)
		}
		p.PutRecords(s)
		again := p.GetRecords(n)
		if &again[0] != &s[0] {
			t.Errorf("GetRecords(%d) after PutRecords: a new slice, want the one put back", n)
		}
	}
}

func TestRecordPoolKeepsManySmallSlicesBoundedInRecords(t *testing.T) {
	p := newRecordPool()
	// A fetch over 10,000 partitions of 3-record batches holds 10,000
	// slices at once; all come back, and are kept up to
	// poolRecordsPerClass records' worth.
	const parts = 10000
	held := make([][]kgo.Record, parts)
	for i := range held {
		held[i] = p.GetRecords(3)
	}
	for _, s := range held {
		p.PutRecords(s)
	}
	c := poolClass(3)
	if got, want := len(p.free[c]), min(parts, poolRecordsPerClass>>c); got != want {
		t.Fatalf("free slices of class %d: %d, want %d", c, got, want)
	}
	// A slice the pool did not make (cap not a class) is not kept.
	p.PutRecords(make([]kgo.Record, 0, 3))
	if got, want := len(p.free[c]), min(parts, poolRecordsPerClass>>c); got != want {
		t.Fatalf("after a foreign slice: %d free, want %d", got, want)
	}
	// One batch bigger than the bound is still kept, alone.
	big := p.GetRecords(poolRecordsPerClass * 2)
	p.PutRecords(big)
	if got := len(p.free[poolClass(len(big))]); got != 1 {
		t.Fatalf("free slices of a batch of %d: %d, want 1", len(big), got)
	}
}

func TestRecordPoolCutsSmallSlicesApart(t *testing.T) {
	// Slices of small classes share a slab: each must stay within its
	// own capacity, so that filling one never writes into another.
	p := newRecordPool()
	var held [][]kgo.Record
	for i := range 3 * poolSlabRecords {
		n := 1 + i%7
		s := p.GetRecords(n)
		if len(s) != n || cap(s) != 1<<poolClass(n) {
			t.Fatalf("GetRecords(%d): len %d cap %d", n, len(s), cap(s))
		}
		s = s[:cap(s)]
		for j := range s {
			s[j].Offset = int64(i)
		}
		held = append(held, s)
	}
	for i, s := range held {
		for j := range s {
			if s[j].Offset != int64(i) {
				t.Fatalf("slice %d, record %d: offset %d, written by slice %d", i, j, s[j].Offset, s[j].Offset)
			}
		}
	}
}

// BenchmarkRecordPoolFirstFetchOver10000Partitions is what a consumer's
// first fetch over 10,000 partitions asks of a new pool: a slice of 1 to
// 8 records per partition, then all of them back, then again (the next
// fetch, from the free slices).
func BenchmarkRecordPoolFirstFetchOver10000Partitions(b *testing.B) {
	const parts = 10000
	held := make([][]kgo.Record, parts)
	b.ReportAllocs()
	for b.Loop() {
		p := newRecordPool()
		for range 2 {
			for i := range held {
				held[i] = p.GetRecords(1 + i%8)
			}
			for _, s := range held {
				p.PutRecords(s)
			}
		}
	}
}
