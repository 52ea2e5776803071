package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/mqproject/mq/lib/record"
)

// benchEnvInt reads a size from the environment, with a k, M or G suffix.
func benchEnvInt(b *testing.B, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, s = 1<<10, s[:len(s)-1]
	case 'm', 'M':
		mult, s = 1<<20, s[:len(s)-1]
	case 'g', 'G':
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, os.Getenv(name), err)
	}
	return n * mult
}

// BenchmarkClean cleans a log of MQ_CLEAN_BENCH_BYTES (default 32M) whose
// records update MQ_CLEAN_BENCH_KEYS keys (default 32k) in random order,
// each key about four times: MB/s is the dirty log cleaned per second.
// The figure:
//
//	MQ_CLEAN_BENCH_BYTES=1G MQ_CLEAN_BENCH_KEYS=1M go test -run '^$' -bench BenchmarkClean -benchtime 1x ./lib/log
func BenchmarkClean(b *testing.B) {
	total := benchEnvInt(b, "MQ_CLEAN_BENCH_BYTES", 32<<20)
	keys := benchEnvInt(b, "MQ_CLEAN_BENCH_KEYS", 32<<10)
	const perBatch = 10
	valueSize := max(int(total/(keys*4))-40, 8)
	cfg := DefaultConfig()
	cfg.SegmentBytes = min(max(total/16, 1<<20), 256<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	recs := make([]record.Record, perBatch)
	keyBufs := make([][]byte, perBatch)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		l, err := Open(dir, cfg, Options{})
		if err != nil {
			b.Fatal(err)
		}
		var buf []byte
		for l.Size() < total {
			for i := range recs {
				keyBufs[i] = binary.BigEndian.AppendUint64(keyBufs[i][:0], uint64(rng.Int64N(keys)))
				binary.BigEndian.PutUint64(value, rng.Uint64())
				recs[i] = record.Record{OffsetDelta: int32(i), Key: keyBufs[i], Value: value}
			}
			buf, err = record.AppendBatch(buf[:0], record.BuildOptions{BaseTimestamp: 1}, recs)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Append(buf, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			b.Fatal(err)
		}
		c, err := l.CleanableState(CleanOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(c.DirtyBytes)
		b.StartTimer()
		res, err := l.Clean(context.Background(), CleanOptions{})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.CleanedTo != c.EndOffset {
			b.Fatalf("cleaned to %d, want %d: %+v", res.CleanedTo, c.EndOffset, res)
		}
		b.ReportMetric(float64(res.BytesAfter)/float64(res.BytesBefore), "after/before")
		b.Logf("%s in %d segments, %d keys: %+v", fmt.Sprint(c.DirtyBytes), res.SegmentsBefore, keys, res)
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
