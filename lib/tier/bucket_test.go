package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/mqproject/mq/lib/mqtest"
)

// bucketRanger reads ranges of a gocloud bucket's objects, one ranged GET
// each, and counts them.
type bucketRanger struct {
	bucket  *blob.Bucket
	latency time.Duration // added to each GET: a remote store's round trip
	gets    atomic.Int64
	bytes   atomic.Int64
}

func (r *bucketRanger) ReadRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r.gets.Add(1)
	if r.latency > 0 {
		t := time.NewTimer(r.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	rr, err := r.bucket.NewRangeReader(ctx, key, off, n, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	// One buffer of the range's size: io.ReadAll would grow one by
	// doubling, copying each chunk several times.
	b := make([]byte, n)
	k, err := io.ReadFull(rr, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil // the object's end
	}
	r.bytes.Add(int64(k))
	return b[:k], err
}

func TestCacheReadsSeaweedFSWithRangedGETs(t *testing.T) {
	s := mqtest.StartSeaweed(t)
	s.Setenv(t)
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, s.URL())
	if err != nil {
		t.Fatalf("open %s: %v", s.URL(), err)
	}
	defer bucket.Close()

	const chunkBytes = 1 << 20
	r := rand.New(rand.NewPCG(25, 26))
	// Replayed in this order: the 3-chunk object last but one, so that
	// the cache (8 chunks, a little less than the 3 objects) evicts
	// chunks of the first one only and still holds it whole below.
	keys := []string{
		"topic-0/00000000000000000000.log",
		"topic-0/00000000000000001000.log",
		"topic-0/00000000000000002000.log",
	}
	objects := map[string][]byte{
		keys[0]: randomBytes(r, 5*chunkBytes+12345), // a short last chunk
		keys[1]: randomBytes(r, 3*chunkBytes),
		keys[2]: randomBytes(r, 100),
	}
	var total int64
	for _, key := range keys {
		data := objects[key]
		if err := bucket.WriteAll(ctx, key, data, nil); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		total += int64(len(data))
	}
	ranger := &bucketRanger{bucket: bucket}
	c := NewCache(ranger, CacheConfig{ChunkBytes: chunkBytes, MaxBytes: 8 * chunkBytes, ReadAhead: 4})
	defer c.Close()

	// Each object replayed in reads of 256 KiB, the way fetches read a
	// segment, then read once more at random places, from the cache.
	wantGETs := int64(0)
	for _, key := range keys {
		data := objects[key]
		size := int64(len(data))
		var got bytes.Buffer
		p := make([]byte, 256<<10)
		for off := int64(0); off < size; {
			n, err := c.ReadAt(ctx, key, size, p, off)
			if err != nil && err != io.EOF {
				t.Fatalf("%s at %d: %v", key, off, err)
			}
			got.Write(p[:n])
			off += int64(n)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%s: the bytes read back differ from those written", key)
		}
		wantGETs += (size + chunkBytes - 1) / chunkBytes
	}
	if gets := ranger.gets.Load(); gets != wantGETs || ranger.bytes.Load() != total {
		t.Fatalf("%d ranged GETs, %d bytes for %d bytes in chunks of %d: want %d GETs (%.2f per MiB), each byte once",
			gets, ranger.bytes.Load(), total, chunkBytes, wantGETs, float64(wantGETs)/(float64(total)/(1<<20)))
	}
	t.Logf("%d bytes replayed with %d ranged GETs (%.2f per MiB); %+v", total, ranger.gets.Load(), float64(ranger.gets.Load())/(float64(total)/(1<<20)), c.Stats())

	key := keys[1]
	data := objects[key]
	p := make([]byte, 1000)
	before := ranger.gets.Load()
	for range 20 {
		off := r.Int64N(int64(len(data)) - int64(len(p)))
		if _, err := c.ReadAt(ctx, key, int64(len(data)), p, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, data[off:off+int64(len(p))]) {
			t.Fatalf("%s at %d: wrong bytes", key, off)
		}
	}
	if gets := ranger.gets.Load() - before; gets != 0 {
		t.Fatalf("%d GETs for reads of a 3-chunk object held whole in the cache", gets)
	}
}

// TestCacheReadsAFileBucket reads objects of a file:// bucket, the
// embedded default store, through the cache.
func TestCacheReadsAFileBucket(t *testing.T) {
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, fmt.Sprintf("file://%s?create_dir=true", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	data := randomBytes(rand.New(rand.NewPCG(27, 28)), 300<<10+17)
	if err := bucket.WriteAll(ctx, "t-0/seg.log", data, nil); err != nil {
		t.Fatal(err)
	}
	ranger := &bucketRanger{bucket: bucket}
	c := NewCache(ranger, CacheConfig{ChunkBytes: 64 << 10, MaxBytes: 256 << 10})
	defer c.Close()
	got := make([]byte, len(data))
	if n, err := c.ReadAt(ctx, "t-0/seg.log", int64(len(data)), got, 0); n != len(data) || err != nil {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes read back differ from those written")
	}
	if gets := ranger.gets.Load(); gets != 5 {
		t.Fatalf("%d GETs for 5 chunks", gets)
	}
}
