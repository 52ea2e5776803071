package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
)

// Region is a byte range of a segment data file holding whole batches, for
// sending to a socket without copying.
//
// A non-empty Region holds a reference on its file: the file stays
// readable, even when retention or truncation deletes the segment
// meanwhile, until Release. The caller must call Release exactly once when
// done with a Region (an empty Region needs none, and Release on it is
// harmless). The Region does not keep a descriptor open: Files may close
// the file while it is idle. Read the bytes with ReadAt or WriteTo, or
// borrow the *os.File for a sendfile with File().AcquireFile.
type Region struct {
	// Pos and Len delimit the bytes in the file.
	Pos, Len int64
	// BaseOffset is the base offset of the first batch, LastOffset the last
	// offset of the last one. An empty Region has LastOffset < BaseOffset.
	BaseOffset, LastOffset int64

	sf *SegmentFile
}

// RegionOf returns a Region of n bytes at pos of f, a file outside any log
// (tests, tools). Release leaves f open.
func RegionOf(f *os.File, pos, n, baseOffset, lastOffset int64) Region {
	return Region{Pos: pos, Len: n, BaseOffset: baseOffset, LastOffset: lastOffset, sf: &SegmentFile{f: vfs.FileOf(f)}}
}

// File is the Region's segment file, nil for an empty Region.
func (r *Region) File() *SegmentFile { return r.sf }

// Release drops the Region's reference on its file.
func (r *Region) Release() {
	if r.sf != nil {
		r.sf.release()
		r.sf = nil
	}
}

// ReadAt reads the Region's bytes from off, relative to its start
// (io.ReaderAt).
func (r *Region) ReadAt(p []byte, off int64) (int, error) {
	if r.sf == nil {
		return 0, errors.New("log: region released")
	}
	if off < 0 || off >= r.Len {
		return 0, io.EOF
	}
	n := len(p)
	short := false
	if int64(n) > r.Len-off {
		n, short = int(r.Len-off), true
	}
	m, err := r.sf.ReadAt(p[:n], r.Pos+off)
	if err == nil && short {
		err = io.EOF
	}
	return m, err
}

// WriteTo writes the Region's bytes to w.
func (r *Region) WriteTo(w io.Writer) (int64, error) {
	if r.Len == 0 {
		return 0, nil
	}
	if r.sf == nil {
		return 0, errors.New("log: region released")
	}
	return io.Copy(w, io.NewSectionReader(r.sf, r.Pos, r.Len))
}

func emptyRegion(offset int64) Region { return Region{BaseOffset: offset, LastOffset: offset - 1} }

// Read returns the whole batches starting with the one that holds offset,
// none whose base offset is ≥ maxOffset (pass the high-water mark), and at
// most maxBytes bytes except that the first batch is always returned whole
// (KIP-74). A Region lies within one segment; a read at the end of a
// segment continues in the next. offset equal to maxOffset or to the log
// end offset gives an empty Region; offset below the log start offset or
// above the log end offset is ErrOffsetOutOfRange. Release the Region when
// done.
//
// Damaged ranges are never served: a Region stops before one, and a read
// at an offset in one is a *DamagedError (wrapping ErrDamaged) until the
// range is skipped (SkipDamaged), after which reads pass over it. Bytes
// this process has not checked yet (closed segments after a restart) are
// checked before they are returned; damage found so is recorded.
func (l *Log) Read(offset, maxOffset int64, maxBytes int) (Region, error) {
	for attempt := 0; ; attempt++ {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return Region{}, ErrClosed
		}
		if offset < l.logStart || offset > l.end {
			start, end := l.logStart, l.end
			l.mu.RUnlock()
			return Region{}, fmt.Errorf("%w: offset %d, log start %d, log end %d", ErrOffsetOutOfRange, offset, start, end)
		}
		maxOffset = min(maxOffset, l.end)
		if offset >= maxOffset {
			l.mu.RUnlock()
			return emptyRegion(offset), nil
		}
		bounds := readBounds{limitOffset: -1}
		if len(l.damage) > 0 {
			var err error
			if offset, bounds, err = l.damageBoundsLocked(offset); err != nil {
				l.mu.RUnlock()
				return Region{}, err
			}
			if offset >= maxOffset {
				l.mu.RUnlock()
				return emptyRegion(offset), nil
			}
		}
		i := l.segIndexLocked(offset)
		seg := l.segs[i]
		if bounds.none() {
			if r, ok := seg.readTail(offset, maxOffset, maxBytes); ok {
				if r.Len > 0 {
					seg.file.acquire()
					r.sf = seg.file
				}
				l.mu.RUnlock()
				return r, nil
			}
		}
		limit := seg.size
		nextBase := l.end
		if i+1 < len(l.segs) {
			nextBase = l.segs[i+1].base
		}
		readMax := maxOffset
		if bounds.limitOffset >= 0 {
			nextBase = min(nextBase, bounds.limitOffset)
			readMax = min(readMax, bounds.limitOffset)
			if d := bounds.limit; d.segmentBase() == seg.base {
				limit = min(limit, d.Position)
			}
		}
		if bounds.start != nil && bounds.start.segmentBase() != seg.base {
			bounds.start = nil
		}
		l.mu.RUnlock()

		sf, idx, _, err := l.acquire(seg)
		if errors.Is(err, ErrOffsetOutOfRange) {
			continue // deleted meanwhile: look again
		}
		if err != nil {
			return Region{}, err
		}
		r, found, err := readSegment(seg.base, sf, idx, limit, nextBase, offset, readMax, maxBytes, bounds.start)
		if err != nil || !found {
			sf.release()
		}
		var cerr *CorruptionError
		if errors.As(err, &cerr) && attempt < maxReadAttempts {
			// Bad bytes where the index or the batch before pointed: find
			// their extent, record them, and read again around them.
			if l.checkAround(seg, cerr.walkFrom, cerr.walkNext) {
				continue
			}
		}
		if err != nil {
			return Region{}, err
		}
		if found {
			if r.Len == 0 {
				return r, nil
			}
			if again, err := l.checkRegion(seg, &r, offset); err != nil || again {
				r.Release()
				if err != nil {
					return Region{}, err
				}
				if attempt >= maxReadAttempts {
					return Region{}, fmt.Errorf("log: read at offset %d: damage found but not recorded", offset)
				}
				continue
			}
			return r, nil
		}
		if nextBase >= maxOffset {
			return emptyRegion(offset), nil
		}
		offset = nextBase
	}
}

// maxReadAttempts bounds how often one Read looks again after finding
// damage.
const maxReadAttempts = 3

// readBounds are the damaged ranges around a read: start, when set, is a
// damaged range before the read in its segment, after whose bytes the
// header walk must begin; limit the first one after the read (its first
// offset is limitOffset; -1 when none).
type readBounds struct {
	start, limit *Damage
	limitOffset  int64
}

func (b readBounds) none() bool { return b.start == nil && b.limit == nil }

// damageBoundsLocked applies the damaged ranges to a read at offset: an
// offset in a range skipped moves to the range's end; one in a range not
// skipped is a *DamagedError. It returns the offset to read and the ranges
// around it.
func (l *Log) damageBoundsLocked(offset int64) (int64, readBounds, error) {
	b := readBounds{limitOffset: -1}
	for {
		d := l.damageAtLocked(offset)
		if d == nil {
			break
		}
		if !d.Skipped {
			return offset, b, &DamagedError{Offset: offset, Damage: *d}
		}
		offset = d.To
	}
	for i := range l.damage {
		d := &l.damage[i]
		if d.To <= offset {
			b.start = d
			continue
		}
		b.limit, b.limitOffset = d, d.From
		break
	}
	return offset, b, nil
}

// checkRegion checks the batches of r that this process has not checked
// yet. When one is bad it records the damage and cuts r before it; again
// reports that nothing is left of r (the read at offset must look again:
// it now meets the damage).
func (l *Log) checkRegion(seg *segment, r *Region, offset int64) (again bool, err error) {
	end := r.Pos + r.Len
	l.mu.RLock()
	checked := seg.checked.covers(r.Pos, end)
	l.mu.RUnlock()
	if checked {
		return false, nil
	}
	res, err := l.checkBatches(seg, r.sf, r.Pos, end, r.BaseOffset, true, nil)
	if err != nil {
		return false, err
	}
	if !res.bad {
		return false, nil
	}
	if res.end <= r.Pos || res.next <= offset {
		return true, nil
	}
	r.Len, r.LastOffset = res.end-r.Pos, res.next-1
	return false, nil
}

// checkAround is called when a read met a bad header: it checks seg from
// where the read's walk over headers last started (position from, offset
// next: the bad batch lies after it) to find and record the damage, and
// reports whether it recorded some, so that reading again avoids it.
func (l *Log) checkAround(seg *segment, from, next int64) bool {
	sf, _, _, err := l.acquire(seg)
	if err != nil {
		return false
	}
	defer sf.release()
	l.mu.RLock()
	size := seg.size
	l.mu.RUnlock()
	res, err := l.checkBatches(seg, sf, from, size, next, true, nil)
	return err == nil && res.recorded > 0
}

// readSegment finds the Region for a read in one segment whose data file is
// sf and whose first limit bytes are readable; nextBase is the offset that
// must follow them (the next segment's base, the log end, or the first
// offset of the damaged range the read stops at). found is false when the
// segment holds nothing at or after offset. The Region takes over the
// caller's reference on sf when it is non-empty. after, when set, is a
// damaged range of the segment before offset: the walk starts after its
// bytes when the index would start it before them.
func readSegment(base int64, sf *SegmentFile, idx []byte, limit, nextBase, offset, maxOffset int64, maxBytes int, after *Damage) (Region, bool, error) {
	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	r := chunkReader{f: sf, buf: *bufp, fileSize: limit}
	var walkFrom, walkNext int64 // where the header walk last started
	corrupt := func(pos int64, err error) error {
		return &CorruptionError{Segment: segmentName(base, logExt), Position: pos, Err: err, walkFrom: walkFrom, walkNext: walkNext}
	}
	header := func(pos int64) (record.Header, error) {
		b, err := r.at(pos, record.HeaderSize)
		if err != nil {
			return record.Header{}, corrupt(pos, err)
		}
		h, err := record.ParseHeader(b)
		if err != nil {
			return h, corrupt(pos, err)
		}
		if pos+int64(h.Size()) > limit {
			return h, corrupt(pos, errPastEnd)
		}
		return h, nil
	}

	rel, pos := offsetFloor(idx, relOffset(offset-base))
	expect := base + int64(rel)
	if after != nil && pos < after.Position+after.Length {
		pos, expect = after.Position+after.Length, after.To
	}
	walkFrom, walkNext = pos, expect
	var h record.Header
	// A header is only trusted as far as the next one (or what follows the
	// segment) agrees with it: a last offset damaged lower would otherwise
	// send the read past its offset, to serve the batch after it.
	follows := func(pos, next int64) error {
		if next != nextBase {
			return corrupt(pos, fmt.Errorf("%w: segment ends before offset %d, the next begins at %d", errOffsetOrder, next, nextBase))
		}
		return nil
	}
	for {
		if pos >= limit {
			return Region{}, false, follows(pos, expect)
		}
		var err error
		if h, err = header(pos); err != nil {
			return Region{}, false, err
		}
		if h.BaseOffset != expect {
			return Region{}, false, corrupt(pos, fmt.Errorf("%w: base offset %d, want %d", errOffsetOrder, h.BaseOffset, expect))
		}
		expect = h.LastOffset() + 1
		if h.LastOffset() >= offset {
			break
		}
		pos += int64(h.Size())
	}
	if h.BaseOffset >= maxOffset {
		return emptyRegion(offset), true, nil
	}
	start := pos
	end := pos + int64(h.Size())
	last := h.LastOffset()

	// Skip ahead with the index: with entry k-1 the last one that fits
	// (position within maxBytes, base offset below maxOffset), every batch
	// from entry k-2 up to entry k-1 fits too, so the header walk can start
	// at entry k-2.
	budget := min(int64(maxBytes), limit-start)
	if budgetEnd := start + budget; budgetEnd > end {
		k := entriesAtMostPos(idx, min(budgetEnd, limit-1))
		for k > 0 {
			if r, _ := offsetEntry(idx, k-1); base+int64(r) < maxOffset {
				break
			}
			k--
		}
		if k >= 2 {
			if r, p := offsetEntry(idx, k-2); p > end {
				end, last = p, base+int64(r)-1
				walkFrom, walkNext = p, base+int64(r)
			}
		}
	}
	for end < limit {
		h2, err := header(end)
		if err != nil {
			return Region{}, false, err
		}
		if h2.BaseOffset != last+1 {
			return Region{}, false, corrupt(end, fmt.Errorf("%w: base offset %d, want %d", errOffsetOrder, h2.BaseOffset, last+1))
		}
		size := int64(h2.Size())
		if h2.BaseOffset >= maxOffset || end+size-start > int64(maxBytes) {
			break
		}
		end += size
		last = h2.LastOffset()
	}
	if end >= limit {
		if err := follows(end, last+1); err != nil {
			return Region{}, false, err
		}
	}
	return Region{Pos: start, Len: end - start, BaseOffset: h.BaseOffset, LastOffset: last, sf: sf}, true, nil
}

// ReadBytes is Read with the bytes copied into memory.
func (l *Log) ReadBytes(offset, maxOffset int64, maxBytes int) ([]byte, error) {
	r, err := l.Read(offset, maxOffset, maxBytes)
	if err != nil || r.Len == 0 {
		return nil, err
	}
	defer r.Release()
	b := make([]byte, r.Len)
	if _, err := r.sf.ReadAt(b, r.Pos); err != nil {
		return nil, fmt.Errorf("log: read %s at %d: %w", segmentName(r.BaseOffset, logExt), r.Pos, err)
	}
	return b, nil
}

// readBatch returns the batch holding offset.
func (l *Log) readBatch(offset int64) ([]byte, record.Header, error) {
	b, err := l.ReadBytes(offset, math.MaxInt64, 1)
	if err != nil {
		return nil, record.Header{}, err
	}
	batch, _, h, err := record.Next(b)
	if err == nil && batch == nil {
		err = ErrNotFound
	}
	return batch, h, err
}

var errStopIteration = errors.New("stop")

// OffsetForTimestamp answers ListOffsets by timestamp: the earliest offset
// whose record timestamp is ≥ ts, and that timestamp. ErrNotFound when no
// record is that recent.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, err error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return -1, -1, ErrClosed
	}
	logStart := l.logStart
	batchBase := int64(-1)
	for _, seg := range l.segs {
		mts, _, err := l.segMaxTSLocked(seg)
		if err != nil {
			l.mu.Unlock()
			return -1, -1, err
		}
		if mts < ts {
			continue
		}
		if err := l.openSegmentLocked(seg); err != nil {
			l.mu.Unlock()
			return -1, -1, err
		}
		if i := timeCeil(seg.tidx, ts); i < len(seg.tidx)/timeEntrySize {
			_, rel := timeEntry(seg.tidx, i)
			batchBase = seg.base + int64(rel)
			break
		}
	}
	l.mu.Unlock()
	if batchBase < 0 {
		return -1, -1, ErrNotFound
	}
	batch, h, err := l.readBatch(max(batchBase, logStart))
	var de *DamagedError
	if errors.As(err, &de) {
		// The records there cannot be read: the answer is the first
		// offset after the damage, the earliest one that can be.
		batch, h, err = l.readBatch(de.Damage.To)
	}
	if err != nil {
		return -1, -1, err
	}
	offset, timestamp = h.BaseOffset, h.MaxTimestamp
	_ = record.Iterate(batch, 0, func(r *record.Record) error {
		if t := r.Timestamp(&h); t >= ts {
			offset, timestamp = r.Offset(&h), t
			return errStopIteration
		}
		return nil
	})
	return max(offset, logStart), timestamp, nil
}

// MaxTimestamp returns the largest record timestamp in the log and the
// offset of the first record carrying it (ListOffsets MAX_TIMESTAMP), or
// (-1, -1) when the log has no timestamps.
func (l *Log) MaxTimestamp() (timestamp, offset int64) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return -1, -1
	}
	if !l.maxTSValid {
		l.maxTS, l.maxTSBase = -1, -1
		for _, seg := range l.segs {
			ts, rel, err := l.segMaxTSLocked(seg)
			if err != nil {
				l.mu.Unlock()
				return -1, -1
			}
			if ts > l.maxTS {
				l.maxTS, l.maxTSBase = ts, seg.base+int64(rel)
			}
		}
		l.maxTSValid = true
	}
	ts, base, logStart := l.maxTS, l.maxTSBase, l.logStart
	l.mu.Unlock()
	if ts < 0 {
		return -1, -1
	}
	offset = max(base, logStart)
	batch, h, err := l.readBatch(offset)
	if err != nil {
		return ts, offset
	}
	_ = record.Iterate(batch, 0, func(r *record.Record) error {
		if r.Timestamp(&h) == ts {
			offset = max(r.Offset(&h), logStart)
			return errStopIteration
		}
		return nil
	})
	return ts, offset
}
