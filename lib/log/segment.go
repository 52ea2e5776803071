package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqproject/mq/lib/record"
)

// File name extensions of a segment's files.
const (
	logExt       = ".log"
	indexExt     = ".index"
	timeIndexExt = ".timeindex"
)

func segmentName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// parseSegmentName returns the base offset and extension of a segment file
// name, ok false for any other name.
func parseSegmentName(name string) (base int64, ext string, ok bool) {
	stem, ext, found := strings.Cut(name, ".")
	if !found || len(stem) != 20 {
		return 0, "", false
	}
	ext = "." + ext
	if ext != logExt && ext != indexExt && ext != timeIndexExt && ext != txnIndexExt {
		return 0, "", false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, "", false
	}
	return base, ext, true
}

// segment is one segment of the log. Every field is guarded by Log.mu;
// idx, tidx and file are nil while a closed segment is not open (they are
// loaded on demand and dropped by the open-segment limit). The active
// segment (the last) is always open.
type segment struct {
	base int64
	size int64 // bytes of whole batches in the .log file

	file *SegmentFile
	idx  []byte // offset index entries; never modified below len once published
	tidx []byte // time index entries; same rule

	// Active segment bookkeeping.
	idxFlushed     int   // bytes of idx already in the .index file
	tidxFlushed    int   // bytes of tidx already in the .timeindex file
	lastIndexedPos int64 // position of the last offset index entry, 0 for none
	rollTS         int64 // when the first batch was appended (ms), -1 when empty

	maxTS      int64 // largest batch max timestamp, -1 when none
	maxTSRel   uint32
	maxTSKnown bool

	// tail are the positions of the newest batches of the active segment,
	// oldest first and contiguous up to size, so that a read at or near
	// the log end finds its batches without reading the file. Empty for
	// other segments and after a truncation, until the next append.
	tail []tailBatch

	// checked are the byte ranges of the data file this process has
	// checked (CRC and offsets); sealedSize is the size the segment was
	// closed at (0 while active or not known).
	checked    checkedSet
	sealedSize int64

	lastUse atomic.Int64
	deleted bool
}

// tailBatch is where one batch of a segment's tail is.
type tailBatch struct {
	base, last int64 // base and last offset
	pos        int64 // position in the .log file
}

// maxTail bounds a segment's tail: it keeps between maxTail and 2*maxTail
// batches once full (24 bytes each). A read further back uses the index.
const maxTail = 512

// addTail records a batch appended at pos.
func (s *segment) addTail(h *record.Header, pos int64) {
	if len(s.tail) >= 2*maxTail {
		s.tail = s.tail[:copy(s.tail, s.tail[len(s.tail)-maxTail:])]
	}
	s.tail = append(s.tail, tailBatch{base: h.BaseOffset, last: h.LastOffset(), pos: pos})
}

// readTail is readSegment for a read the tail covers: offset at or after
// the tail's first batch. ok is false when it does not. Called with
// Log.mu held; the Region has no file reference yet.
func (s *segment) readTail(offset, maxOffset int64, maxBytes int) (r Region, ok bool) {
	t := s.tail
	if len(t) == 0 || offset < t[0].base {
		return Region{}, false
	}
	end := func(j int) int64 {
		if j+1 < len(t) {
			return t[j+1].pos
		}
		return s.size
	}
	k := sort.Search(len(t), func(j int) bool { return t[j].last >= offset })
	if k == len(t) {
		return Region{}, false
	}
	if t[k].base >= maxOffset {
		return emptyRegion(offset), true
	}
	start := t[k].pos
	// The first batch always; then every following one below maxOffset
	// whose end stays within maxBytes of start.
	n := k + 1 + sort.Search(len(t)-k-1, func(i int) bool {
		j := k + 1 + i
		return t[j].base >= maxOffset || end(j)-start > int64(maxBytes)
	})
	return Region{Pos: start, Len: end(n-1) - start, BaseOffset: t[k].base, LastOffset: t[n-1].last}, true
}

func (s *segment) open() bool { return s.file != nil }

// indexBatch updates the in-memory indexes for a batch appended at pos.
func (s *segment) indexBatch(h *record.Header, pos int64, interval int32) {
	rel := uint32(h.BaseOffset - s.base)
	if pos > 0 && pos-s.lastIndexedPos >= int64(interval) {
		s.idx = appendOffsetEntry(s.idx, rel, pos)
		s.lastIndexedPos = pos
	}
	if h.MaxTimestamp > s.maxTS {
		s.tidx = appendTimeEntry(s.tidx, h.MaxTimestamp, rel)
		s.maxTS, s.maxTSRel = h.MaxTimestamp, rel
	}
	s.maxTSKnown = true
}

// resetIndexState recomputes the bookkeeping from idx and tidx.
func (s *segment) resetIndexState() {
	s.lastIndexedPos = 0
	if n := len(s.idx) / offsetEntrySize; n > 0 {
		_, s.lastIndexedPos = offsetEntry(s.idx, n-1)
	}
	s.maxTS, s.maxTSRel = -1, 0
	if n := len(s.tidx) / timeEntrySize; n > 0 {
		s.maxTS, s.maxTSRel = timeEntry(s.tidx, n-1)
	}
	s.maxTSKnown = true
}

// badBatch describes why a batch failed the recovery checks.
var (
	errShortHeader   = errors.New("torn batch header")
	errPastEnd       = errors.New("batch length past the end of the segment")
	errOffsetOrder   = errors.New("batch offsets not following the previous batch")
	errOffsetInvalid = errors.New("batch offsets outside the segment")
)

// chunkReader serves small reads of a file from a buffer.
type chunkReader struct {
	f        io.ReaderAt
	buf      []byte
	pos      int64 // file position of buf[0]
	n        int   // valid bytes in buf
	fileSize int64
}

// at returns n bytes at file position p, reading a chunk when they are not
// buffered. The result is valid until the next call.
func (r *chunkReader) at(p int64, n int) ([]byte, error) {
	if p >= r.pos && p+int64(n) <= r.pos+int64(r.n) {
		return r.buf[p-r.pos : p-r.pos+int64(n)], nil
	}
	if n > len(r.buf) {
		r.buf = make([]byte, n)
	}
	want := int64(len(r.buf))
	if rest := r.fileSize - p; rest < want {
		want = rest
	}
	if want < int64(n) {
		return nil, io.ErrUnexpectedEOF
	}
	got, err := r.f.ReadAt(r.buf[:want], p)
	if int64(got) < int64(n) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		r.n = 0
		return nil, err
	}
	r.pos, r.n = p, got
	return r.buf[:n], nil
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// scanResult is what a scan of a segment found.
type scanResult struct {
	end      int64 // position after the last good batch
	next     int64 // offset after the last good batch
	badErr   error // why the scan stopped before the file end, nil when it did not
	ioErr    error // a read error: nothing can be concluded about the data
	stopErr  error // fn's error, which stopped the scan before the batch it was given
	nBatches int
}

// scanSegment walks the batches of a segment data file from position pos
// (where the batch with base offset next must start) up to size bytes,
// checking each header, the offsets (dense from next, relative offsets fit
// in 32 bits) and, with checkCRC, the CRC. It calls fn for each good batch
// and stops at the first bad one, or when fn returns an error (the batch
// fn was given then does not count as scanned). buf is the read buffer.
func scanSegment(f io.ReaderAt, base, pos, size, next int64, checkCRC bool, buf []byte, fn func(pos int64, h *record.Header) error) scanResult {
	r := chunkReader{f: f, fileSize: size, buf: buf}
	res := scanResult{end: pos, next: next}
	for pos < size {
		if size-pos < record.HeaderSize {
			res.badErr = errShortHeader
			return res
		}
		hb, err := r.at(pos, record.HeaderSize)
		if err != nil {
			res.ioErr = err
			return res
		}
		h, err := record.ParseHeader(hb)
		if err != nil {
			res.badErr = err
			return res
		}
		bsize := int64(h.Size())
		if pos+bsize > size {
			res.badErr = errPastEnd
			return res
		}
		if h.LastOffsetDelta < 0 || h.BaseOffset-base < 0 || h.LastOffset()-base > math.MaxUint32 {
			res.badErr = errOffsetInvalid
			return res
		}
		if h.BaseOffset != next {
			res.badErr = fmt.Errorf("%w: base offset %d, want %d", errOffsetOrder, h.BaseOffset, next)
			return res
		}
		if checkCRC {
			b, err := r.at(pos, int(bsize))
			if err != nil {
				res.ioErr = err
				return res
			}
			if err := record.CheckCRC(b); err != nil {
				res.badErr = err
				return res
			}
		}
		if fn != nil {
			if err := fn(pos, &h); err != nil {
				res.stopErr = err
				return res
			}
		}
		pos += bsize
		next = h.LastOffset() + 1
		res.end, res.next = pos, next
		res.nBatches++
	}
	return res
}

// segmentPaths returns the paths of a segment's three files.
func segmentPaths(dir string, base int64) (logPath, indexPath, timeIndexPath string) {
	return filepath.Join(dir, segmentName(base, logExt)),
		filepath.Join(dir, segmentName(base, indexExt)),
		filepath.Join(dir, segmentName(base, timeIndexExt))
}
