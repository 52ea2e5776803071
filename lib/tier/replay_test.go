package tier

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/mqproject/mq/lib/mqtest"
)

var (
	replayMiB       = flag.Int("tier.replay.mib", 64, "MiB of objects BenchmarkReplay writes and replays")
	replayObjectMiB = flag.Int("tier.replay.object.mib", 64, "size of each object BenchmarkReplay writes, in MiB (a segment)")
	replayLatency   = flag.Duration("tier.replay.latency", 20*time.Millisecond, "round trip BenchmarkReplay adds to each GET of SeaweedFS in its rtt= runs, as a remote store's (0: no such runs)")
)

// replayReadBytes is the size of each read of a replay: a consumer's
// fetch of one partition (max.partition.bytes).
const replayReadBytes = 1 << 20

// BenchmarkReplay replays the same objects, one after the other in reads
// of 1 MiB, from a local file (the page cache: what a replay from local
// disk costs at best), and through a Cache at its defaults from a file://
// bucket and from SeaweedFS on loopback (skipped without weed), the latter
// with read-ahead and without, and again with a remote store's round trip
// added to each GET (-tier.replay.latency), each replay with a new cache.
// It reports MiB/s and ranged GETs per MiB:
//
//	go test ./lib/tier -run '^$' -bench Replay -benchtime 3x -tier.replay.mib 256
func BenchmarkReplay(b *testing.B) {
	objectBytes := int64(*replayObjectMiB) << 20
	total := int64(*replayMiB) << 20
	r := rand.New(rand.NewPCG(29, 30))
	var keys []string
	var objects [][]byte
	for off := int64(0); off < total; off += objectBytes {
		keys = append(keys, fmt.Sprintf("t-0/%020d.log", off))
		objects = append(objects, randomBytes(r, int(min(objectBytes, total-off))))
	}
	ctx := context.Background()

	b.Run("disk", func(b *testing.B) {
		dir := b.TempDir()
		var files []*os.File
		for i, key := range keys {
			path := filepath.Join(dir, filepath.Base(key))
			if err := os.WriteFile(path, objects[i], 0o644); err != nil {
				b.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			files = append(files, f)
		}
		replay(b, total, func() (gets int64) {
			p := make([]byte, replayReadBytes)
			for i, f := range files {
				size := int64(len(objects[i]))
				for off := int64(0); off < size; off += replayReadBytes {
					if _, err := f.ReadAt(p, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
			}
			return 0
		})
	})

	// fill opens a bucket and writes the objects into it.
	fill := func(b *testing.B, url string) *blob.Bucket {
		bucket, err := blob.OpenBucket(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bucket.Close() })
		for i, key := range keys {
			if err := bucket.WriteAll(ctx, key, objects[i], nil); err != nil {
				b.Fatal(err)
			}
		}
		return bucket
	}
	bucketReplay := func(b *testing.B, bucket *blob.Bucket, latency time.Duration, cfg CacheConfig) {
		replay(b, total, func() int64 {
			ranger := &bucketRanger{bucket: bucket, latency: latency}
			c := NewCache(ranger, cfg)
			defer c.Close()
			p := make([]byte, replayReadBytes)
			for i, key := range keys {
				size := int64(len(objects[i]))
				for off := int64(0); off < size; off += replayReadBytes {
					if _, err := c.ReadAt(ctx, key, size, p, off); err != nil && err != io.EOF {
						b.Fatal(err)
					}
				}
			}
			return ranger.gets.Load()
		})
	}
	b.Run("file", func(b *testing.B) {
		bucketReplay(b, fill(b, "file://"+b.TempDir()), 0, CacheConfig{})
	})
	b.Run("seaweedfs", func(b *testing.B) {
		s := mqtest.StartSeaweed(b)
		s.Setenv(b)
		bucket := fill(b, s.URL())
		b.Run("readahead=8", func(b *testing.B) { bucketReplay(b, bucket, 0, CacheConfig{}) })
		b.Run("readahead=none", func(b *testing.B) { bucketReplay(b, bucket, 0, CacheConfig{ReadAhead: -1}) })
		if d := *replayLatency; d > 0 {
			b.Run(fmt.Sprintf("rtt=%v/readahead=8", d), func(b *testing.B) { bucketReplay(b, bucket, d, CacheConfig{}) })
			b.Run(fmt.Sprintf("rtt=%v/readahead=none", d), func(b *testing.B) { bucketReplay(b, bucket, d, CacheConfig{ReadAhead: -1}) })
		}
	})
}

// replay times replays of total bytes and reports MiB/s and the GETs per
// MiB that replayOnce says it issued.
func replay(b *testing.B, total int64, replayOnce func() (gets int64)) {
	b.SetBytes(total)
	var gets int64
	for b.Loop() {
		gets += replayOnce()
	}
	mib := float64(total) / (1 << 20) * float64(b.N)
	b.ReportMetric(mib/b.Elapsed().Seconds(), "MiB/s")
	b.ReportMetric(float64(gets)/mib, "GETs/MiB")
}
