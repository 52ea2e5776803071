package log

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/record"
)

func benchBatch(b *testing.B, size int) []byte {
	// One record whose value fills the batch to about size bytes.
	return makeBatch(b, batchSpec{records: 1, valueSize: size - 80, ts: time.Now().UnixMilli(), seed: 1})
}

func reportBatches(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "batches/s")
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, policy := range []FlushPolicy{FlushOS, FlushInterval, FlushAlways} {
			b.Run(strconv.Itoa(size>>10)+"KiB/"+policy.String(), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.FlushPolicy = policy
				l, err := Open(filepath.Join(b.TempDir(), "bench-0"), cfg, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batch := benchBatch(b, size)
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := l.Append(batch, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportBatches(b, b.N)
			})
		}
	}
}

func BenchmarkBaselineWrite(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			batch := benchBatch(b, size)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := f.Write(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportBatches(b, b.N)
		})
	}
}

// BenchmarkAppendAlwaysConcurrent: 16 appenders sharing fsyncs (group commit).
func BenchmarkAppendAlwaysConcurrent(b *testing.B) {
	cfg := DefaultConfig()
	cfg.FlushPolicy = FlushAlways
	l, err := Open(filepath.Join(b.TempDir(), "bench-0"), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const appenders = 16
	batch := benchBatch(b, 1<<10)
	b.SetBytes(int64(len(batch)))
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := append([]byte(nil), batch...) // Append patches in place
			for next.Add(1) <= int64(b.N) {
				if _, err := l.Append(own, 0); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportBatches(b, b.N)
}

// BenchmarkAppendAlwaysSerialFsync: one appender, one fsync per append.
func BenchmarkAppendAlwaysSerialFsync(b *testing.B) {
	cfg := DefaultConfig()
	cfg.FlushPolicy = FlushAlways
	l, err := Open(filepath.Join(b.TempDir(), "bench-0"), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch(b, 1<<10)
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportBatches(b, b.N)
}

func BenchmarkReadSequential(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := Open(filepath.Join(b.TempDir(), "bench-0"), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch(b, 1<<10)
	const total = 128 << 20
	for range total / len(batch) {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(l.Size()))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for off := int64(0); off < end; {
			r, err := l.Read(off, end, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadAt(buf[:r.Len], 0); err != nil {
				b.Fatal(err)
			}
			off = r.LastOffset + 1
			r.Release()
		}
	}
}

func BenchmarkOpen2000Segments(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "bench-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.IndexIntervalBytes = 1024
	l, err := Open(dir, cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(b, 1<<10)
	for l.NumSegments() < 2000 {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		l, err := Open(dir, cfg, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l.NumSegments() < 2000 {
			b.Fatalf("%d segments", l.NumSegments())
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

var _ = record.HeaderSize
