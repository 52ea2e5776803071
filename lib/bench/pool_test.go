package bench

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordPoolSizesSlicesByClassAndReusesThem(t *testing.T) {
	p := newRecordPool()
	for _, tc := range []struct{ n, cap int }{
		{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {255, 256}, {256, 256}, {257, 512},
		{1024, 1024}, {1025, 1152}, {2048, 2048}, {2049, 2304},
		{8196, 9216}, {8474, 9216}, {10000, 10240}, {16384, 16384},
	} {
		s := p.GetRecords(tc.n)
		if len(s) != tc.n || cap(s) != tc.cap {
			t.Errorf("GetRecords(%d): len %d cap %d, want len %d cap %d", tc.n, len(s), cap(s), tc.n, tc.cap)
		}
		p.PutRecords(s)
		again := p.GetRecords(tc.n)
		if &again[0] != &s[0] {
			t.Errorf("GetRecords(%d) after PutRecords: a new slice, want the one put back", tc.n)
		}
	}
}

func TestRecordPoolClassesAreContiguousAndTight(t *testing.T) {
	// Every n has the smallest class holding it; above the slab size a
	// slice is at most 1/poolSubClasses larger than asked.
	prevC, prevSize := 0, 1
	for n := 1; n <= 1<<20; n++ {
		c, size := poolClass(n)
		if size < n {
			t.Fatalf("poolClass(%d) = %d, %d: smaller than asked", n, c, size)
		}
		if n > prevSize {
			if c != prevC+1 {
				t.Fatalf("poolClass(%d) = %d, after class %d of size %d", n, c, prevC, prevSize)
			}
			prevC, prevSize = c, size
		} else if c != prevC || size != prevSize {
			t.Fatalf("poolClass(%d) = %d, %d, want %d, %d", n, c, size, prevC, prevSize)
		}
		if n > poolSlabRecords && (size-n)*poolSubClasses > n {
			t.Fatalf("poolClass(%d): size %d wastes more than 1/%d", n, size, poolSubClasses)
		}
	}
	if c, _ := poolClass(1<<poolMaxBits + 1); c != -1 {
		t.Fatalf("poolClass(1<<%d + 1) = %d, want -1 (not pooled)", poolMaxBits, c)
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
	c, size := poolClass(3)
	if got, want := len(p.free[c]), min(parts, poolRecordsPerClass/size); got != want {
		t.Fatalf("free slices of class %d: %d, want %d", c, got, want)
	}
	// A slice the pool did not make (cap not a class) is not kept.
	p.PutRecords(make([]kgo.Record, 0, 3))
	if got, want := len(p.free[c]), min(parts, poolRecordsPerClass/size); got != want {
		t.Fatalf("after a foreign slice: %d free, want %d", got, want)
	}
}

func TestRecordPoolKeepsEveryLargeBatchOfAFetch(t *testing.T) {
	// A 16 MiB fetch of one partition holds 16 batches of 1 MB (about
	// 8,200 records of 100 bytes each), and the next fetch is buffered
	// behind it: all their slices come back and are used again, so a
	// consumer reading such batches allocates no records once warm.
	p := newRecordPool()
	const batches = 2 * 16
	sizes := func(i int) int { return 8196 + 97*i%300 }
	held := make([][]kgo.Record, batches)
	for i := range held {
		held[i] = p.GetRecords(sizes(i))
	}
	made := map[*kgo.Record]bool{}
	for _, s := range held {
		made[&s[:1][0]] = true
		p.PutRecords(s)
	}
	for i := range held {
		s := p.GetRecords(sizes(i))
		if !made[&s[:1][0]] {
			t.Fatalf("batch %d of %d records: a new slice, want one put back", i, sizes(i))
		}
	}
	// Slices of a class beyond poolSlicesPerClass (and its records'
	// worth) are dropped.
	big := make([][]kgo.Record, 2*poolSlicesPerClass)
	for i := range big {
		big[i] = p.GetRecords(1 << 15)
	}
	for _, s := range big {
		p.PutRecords(s)
	}
	if c, _ := poolClass(1 << 15); len(p.free[c]) != poolSlicesPerClass {
		t.Fatalf("free slices of %d records: %d, want %d", 1<<15, len(p.free[c]), poolSlicesPerClass)
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
		if _, size := poolClass(n); len(s) != n || cap(s) != size {
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

// BenchmarkRecordPoolOnePartitionFetches is what a consumer of one
// partition asks of its pool per fetch of 16 MiB: a slice for each of 16
// batches of about 8,200 records (1 MB of 100-byte records), held until
// they are consumed, then all of them back.
func BenchmarkRecordPoolOnePartitionFetches(b *testing.B) {
	const batches = 16
	held := make([][]kgo.Record, batches)
	p := newRecordPool()
	b.ReportAllocs()
	for b.Loop() {
		for i := range held {
			held[i] = p.GetRecords(8196 + i)
		}
		for _, s := range held {
			p.PutRecords(s)
		}
	}
}
