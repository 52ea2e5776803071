package log

import (
	"math/rand/v2"
	"testing"
)

// readWithoutTail is Read with the active segment's tail hidden, so that
// it finds batches through the offset index and the file.
func readWithoutTail(l *Log, offset, maxOffset int64, maxBytes int) (Region, error) {
	l.mu.Lock()
	seg := l.active()
	saved := seg.tail
	seg.tail = nil
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		seg.tail = saved
		l.mu.Unlock()
	}()
	return l.Read(offset, maxOffset, maxBytes)
}

// checkTail checks that the active segment's tail names the batches the
// file holds, contiguous up to the segment's end, and that reads served
// from it match reads through the index for many offsets and limits.
func checkTail(t *testing.T, l *Log, rng *rand.Rand) {
	t.Helper()
	l.mu.RLock()
	seg := l.active()
	tail := append([]tailBatch(nil), seg.tail...)
	size, f := seg.size, seg.file
	l.mu.RUnlock()
	for i, b := range tail {
		h, err := readHeader(f, b.pos)
		if err != nil {
			t.Fatalf("tail entry %d at %d: %v", i, b.pos, err)
		}
		if h.BaseOffset != b.base || h.LastOffset() != b.last {
			t.Fatalf("tail entry %d says offsets %d..%d, file has %d..%d", i, b.base, b.last, h.BaseOffset, h.LastOffset())
		}
		next := size
		if i+1 < len(tail) {
			next = tail[i+1].pos
			if tail[i+1].base != b.last+1 {
				t.Fatalf("tail entries %d and %d are not contiguous", i, i+1)
			}
		}
		if b.pos+int64(h.Size()) != next {
			t.Fatalf("tail entry %d: batch ends at %d, next starts at %d", i, b.pos+int64(h.Size()), next)
		}
	}
	if len(tail) == 0 {
		return
	}
	end := l.EndOffset()
	if tail[len(tail)-1].last+1 != end {
		t.Fatalf("tail ends at %d, log end offset is %d", tail[len(tail)-1].last+1, end)
	}
	for range 50 {
		offset := tail[0].base + rng.Int64N(end-tail[0].base+1)
		maxOffset := offset + rng.Int64N(end-offset+2)
		maxBytes := 1 + rng.IntN(3000)
		if k := rng.IntN(len(tail)); rng.IntN(2) == 0 && tail[k].last >= offset {
			// A limit right at a batch boundary, or one byte off.
			j := k + 1 + rng.IntN(len(tail)-k)
			next := size
			if j < len(tail) {
				next = tail[j].pos
			}
			first := sortSearchTail(tail, offset)
			maxBytes = max(1, int(next-tail[first].pos)+rng.IntN(3)-1)
		}
		got, gerr := l.Read(offset, maxOffset, maxBytes)
		want, werr := readWithoutTail(l, offset, maxOffset, maxBytes)
		if gerr != nil || werr != nil {
			t.Fatalf("read %d (max offset %d, max bytes %d): with tail %v, without %v", offset, maxOffset, maxBytes, gerr, werr)
		}
		if got.Pos != want.Pos || got.Len != want.Len || got.BaseOffset != want.BaseOffset || got.LastOffset != want.LastOffset {
			t.Fatalf("read %d (max offset %d, max bytes %d): with tail pos %d len %d offsets %d..%d, without pos %d len %d offsets %d..%d",
				offset, maxOffset, maxBytes, got.Pos, got.Len, got.BaseOffset, got.LastOffset, want.Pos, want.Len, want.BaseOffset, want.LastOffset)
		}
		got.Release()
		want.Release()
	}
}

func TestTailAgreesWithIndexAfterAppendsRollsTruncationAndRecovery(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	tl := openTestLog(t, cfg)
	appendSome := func(n int) {
		for range n {
			tl.append(simpleBatch(t, rng.Uint64(), 1+rng.IntN(5), rng.IntN(300), tl.clock.Now().UnixMilli()), 0)
		}
	}
	for step := range 100 {
		switch rng.IntN(6) {
		case 0:
			// Mostly into the active segment's tail, now and then further.
			end, start := tl.EndOffset(), tl.StartOffset()
			if rng.IntN(4) > 0 {
				start = max(start, end-int64(maxTail))
			}
			if end > start {
				if err := tl.TruncateTo(start + rng.Int64N(end-start)); err != nil {
					t.Fatalf("step %d: truncate: %v", step, err)
				}
			}
		case 1:
			tl.reopen()
		default:
			// Enough to roll now and then, and to overflow the tail.
			appendSome(1 + rng.IntN(3*maxTail))
		}
		checkTail(t, tl.Log, rng)
	}
}

// sortSearchTail is the index of the tail batch holding offset.
func sortSearchTail(tail []tailBatch, offset int64) int {
	i := 0
	for i < len(tail)-1 && tail[i].last < offset {
		i++
	}
	return i
}
