package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
)

// CleanOptions are the settings of a cleaning pass (log compaction), with
// the Kafka topic or broker property each stands for.
type CleanOptions struct {
	// Now is the time of the pass; the zero value is the log's clock.
	Now time.Time
	// DeleteRetention (delete.retention.ms) is how long a tombstone stays
	// after the pass that first cleaned the offsets holding it.
	DeleteRetention time.Duration
	// MinCompactionLag (min.compaction.lag.ms): a segment whose newest
	// timestamp is more recent than this is not cleaned yet, nor any
	// segment after it.
	MinCompactionLag time.Duration
	// MaxCompactionLag (max.compaction.lag.ms), when positive, makes
	// CleanableState report MustClean once the first dirty segment's
	// oldest timestamp is this old.
	MaxCompactionLag time.Duration
	// DedupeBufferBytes (log.cleaner.dedupe.buffer.size) bounds the
	// memory of the offset map: a table of 24-byte slots filled to 3/4,
	// which grows as keys come up to 2/3 of the buffer (the old and the
	// new table fit in it while it grows), so DedupeBufferBytes/48 keys.
	// A pass whose dirty keys do not fit cleans up to where the map
	// filled (CleanResult.CleanedTo) and leaves the rest to the next
	// pass. 0 means DefaultDedupeBufferBytes.
	DedupeBufferBytes int
	// SegmentBytes (segment.bytes) is the size cleaned segments are merged
	// up to: consecutive segments whose sizes add up to at most this are
	// rewritten as one. 0 means the log's Config.SegmentBytes.
	SegmentBytes int64
	// MaxOffset, when positive, keeps the pass below it: only segments
	// whose offsets are all below it are cleaned. A replica passes its
	// high-water mark, so that nothing a leader may still truncate is
	// cleaned.
	MaxOffset int64
}

// DefaultDedupeBufferBytes is the offset map size when
// CleanOptions.DedupeBufferBytes is 0: about 2.8 million keys.
const DefaultDedupeBufferBytes = 128 << 20

// cleanedBatchBytes is the size up to which the surviving records of
// consecutive mergeable batches are written into one batch.
const cleanedBatchBytes = 64 << 10

// Cleanable describes what a cleaning pass would do now (CleanableState).
type Cleanable struct {
	// FirstDirtyOffset is where the part of the log not cleaned yet
	// starts (the cleaner checkpoint).
	FirstDirtyOffset int64
	// EndOffset is the offset after the last segment a pass may clean
	// now: never the active segment, nothing past the recovery point,
	// CleanOptions.MaxOffset or a damaged range, nothing newer than the
	// minimum compaction lag.
	EndOffset int64
	// CleanBytes are the bytes of the segments wholly below
	// FirstDirtyOffset; DirtyBytes those of the cleanable segments from
	// it to EndOffset. DirtyRatio is DirtyBytes/(CleanBytes+DirtyBytes),
	// 0 when both are 0 (min.cleanable.dirty.ratio compares with it).
	CleanBytes, DirtyBytes int64
	DirtyRatio             float64
	// MustClean reports dirty bytes older than the maximum compaction
	// lag: the log must be cleaned whatever its dirty ratio.
	MustClean bool
	// TombstonesDue reports cleaned offsets that may hold tombstones whose
	// delete retention (CleanOptions.DeleteRetention) has passed: a pass
	// would remove them, dirty bytes or not. Without it a log nobody
	// writes to would keep its deleted keys forever.
	TombstonesDue bool
	// LastCleaned is when the last pass that cleaned something ran, zero
	// if none did.
	LastCleaned time.Time
}

// CleanResult is what a cleaning pass did.
type CleanResult struct {
	// FirstDirtyOffset is where the pass found the dirty part starting;
	// CleanedTo is where it starts now (the new cleaner checkpoint).
	// CleanedTo == FirstDirtyOffset when the pass cleaned nothing.
	FirstDirtyOffset, CleanedTo int64
	// BytesBefore and BytesAfter are the sizes of the segments the pass
	// rewrote, before and after; SegmentsBefore and SegmentsAfter their
	// number.
	BytesBefore, BytesAfter       int64
	SegmentsBefore, SegmentsAfter int
	// RecordsRemoved counts the records the pass dropped, tombstones
	// included; TombstonesRemoved the tombstones among them.
	RecordsRemoved, TombstonesRemoved int64
}

// cleanPlan is the cleanable part of the log when a pass starts.
type cleanPlan struct {
	segs       []*segment
	next       []int64 // base offset of the segment after each
	sizes      []int64
	firstDirty int64
	end        int64 // offset after the last segment of segs
	gen        uint64
	newest     map[int64]int64 // producer id → base offset of its newest batch
	aborted    []AbortedTxn    // the log's aborted transactions
	state      cleanerState
	interval   int32
	segBytes   int64
	now        int64  // unix ms
	readBuf    []byte // the pass's read buffer
	writeBuf   []byte // and write buffer
}

// abortedAt reports whether producer pid's batch at offset belongs to a
// transaction that aborted.
func (p *cleanPlan) abortedAt(pid, offset int64) bool {
	i, _ := slices.BinarySearchFunc(p.aborted, offset, func(a AbortedTxn, o int64) int { return cmpInt64(a.LastOffset, o) })
	for _, a := range p.aborted[i:] {
		if a.ProducerID == pid && a.FirstOffset <= offset {
			return true
		}
	}
	return false
}

func (l *Log) cleanNow(o CleanOptions) time.Time {
	if o.Now.IsZero() {
		return l.clock.Now()
	}
	return o.Now
}

// planLocked finds the cleanable segments. Called with mu held exclusively.
func (l *Log) planLocked(o CleanOptions) (*cleanPlan, error) {
	if err := l.writableLocked(); err != nil {
		return nil, err
	}
	now := l.cleanNow(o).UnixMilli()
	p := &cleanPlan{gen: l.truncGen, interval: l.cfg.IndexIntervalBytes, segBytes: o.SegmentBytes, now: now}
	if p.segBytes <= 0 {
		p.segBytes = l.cfg.SegmentBytes
	}
	limit := l.recoveryPoint
	if o.MaxOffset > 0 {
		limit = min(limit, o.MaxOffset)
	}
	for _, d := range l.damage {
		limit = min(limit, d.From)
	}
	// A transaction still open may yet abort: nothing from its first
	// offset on is cleaned.
	if fu := l.producers.firstUnstable(); fu >= 0 {
		limit = min(limit, fu)
	}
	p.firstDirty = max(l.cleaner.firstDirty, l.segs[0].base)
	p.end = l.segs[0].base
	horizon := now - o.MinCompactionLag.Milliseconds()
	for i := 0; i+1 < len(l.segs); i++ {
		seg, next := l.segs[i], l.segs[i+1].base
		if next > limit {
			break
		}
		if next > p.firstDirty && o.MinCompactionLag > 0 {
			ts, _, err := l.segMaxTSLocked(seg)
			if err != nil {
				return nil, err
			}
			if ts > horizon {
				break
			}
		}
		p.segs = append(p.segs, seg)
		p.next = append(p.next, next)
		p.sizes = append(p.sizes, seg.size)
		p.end = next
	}
	return p, nil
}

// CleanableState tells how dirty the log is and how much a cleaning pass
// with o could clean now, without reading any segment.
func (l *Log) CleanableState(o CleanOptions) (Cleanable, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, err := l.planLocked(o)
	if err != nil {
		return Cleanable{}, err
	}
	c := Cleanable{FirstDirtyOffset: p.firstDirty, EndOffset: p.end}
	firstDirtySeg := -1
	for i, seg := range p.segs {
		if p.next[i] <= p.firstDirty {
			c.CleanBytes += p.sizes[i]
			continue
		}
		if firstDirtySeg < 0 {
			firstDirtySeg = i
		}
		c.DirtyBytes += seg.size
	}
	if total := c.CleanBytes + c.DirtyBytes; total > 0 {
		c.DirtyRatio = float64(c.DirtyBytes) / float64(total)
	}
	if o.MaxCompactionLag > 0 && firstDirtySeg >= 0 {
		seg := p.segs[firstDirtySeg]
		if err := l.openSegmentLocked(seg); err != nil {
			return Cleanable{}, err
		}
		if len(seg.tidx) >= timeEntrySize {
			ts, _ := timeEntry(seg.tidx, 0)
			c.MustClean = p.now-ts > o.MaxCompactionLag.Milliseconds()
		}
	}
	for _, r := range l.cleaner.ranges {
		c.LastCleaned = maxTime(c.LastCleaned, time.UnixMilli(r.at))
	}
	c.TombstonesDue = l.cleaner.tombstonesDue(p.end, p.now, o.DeleteRetention.Milliseconds())
	return c, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Clean runs one cleaning pass (log compaction) over the closed segments
// CleanableState describes: it keeps the latest record of every key, drops
// older ones and the tombstones whose delete retention has passed, and
// rewrites the segments from the first one on, merged up to
// o.SegmentBytes, atomically one group of segments at a time. Offsets do
// not change. Appends and reads go on meanwhile; a truncation, retention
// or Close that changes the segments being rewritten makes the pass stop
// there (what it committed before stays) and leaves CleanedTo where it
// was. Only one pass runs at a time.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.mu.Lock()
	p, err := l.planLocked(o)
	if err == nil {
		p.state = cleanerState{firstDirty: l.cleaner.firstDirty, ranges: append([]cleanedRange(nil), l.cleaner.ranges...)}
		p.aborted = slices.Clone(l.aborted)
		p.newest = make(map[int64]int64, len(l.producers.m))
		for pid, e := range l.producers.m {
			if e.n > 0 {
				p.newest[pid] = e.newest().baseOffset
			}
		}
	}
	l.mu.Unlock()
	if err != nil {
		return CleanResult{}, err
	}
	res := CleanResult{FirstDirtyOffset: p.firstDirty, CleanedTo: p.firstDirty}
	retention := o.DeleteRetention.Milliseconds()
	if p.firstDirty >= p.end && !p.state.tombstonesDue(p.end, p.now, retention) {
		return res, nil
	}
	p.readBuf, p.writeBuf = make([]byte, 1<<20), make([]byte, 0, 1<<20)
	bufSize := o.DedupeBufferBytes
	if bufSize <= 0 {
		bufSize = DefaultDedupeBufferBytes
	}
	m := newOffsetMap(bufSize)
	cleanedTo, err := l.buildOffsetMap(ctx, p, m)
	if errors.Is(err, errSegmentGone) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	p.state.add(p.firstDirty, cleanedTo, p.now)
	f := &cleanFilter{m: m, state: &p.state, cleanedTo: cleanedTo, now: p.now, retention: retention, newest: p.newest,
		kept: make([]bool, len(p.state.ranges))}

	n := 0 // segments to rewrite: those holding offsets below cleanedTo
	for n < len(p.segs) && p.segs[n].base < cleanedTo {
		n++
	}
	// A group left without any record (all its keys written again later)
	// is rewritten with the group after it, its offsets leading that
	// group's first batch, or, at the end of the pass, with the group
	// before it; so its offsets are covered by a batch with records.
	// Each group is cleaned alone first, and a run of such groups waits
	// (carry) for the next group instead of being cleaned again with each,
	// so a pass reads a segment at most three times. A group's output is
	// committed once the next one's is known.
	var carry []int // groups left without records, waiting for the next
	var held []int  // the last group cleaned, its output not committed
	var heldOut *groupOutput
	defer func() { l.discardCleaned(heldOut) }()
	commit := func() (bool, error) {
		out := heldOut
		heldOut = nil
		if out.same {
			return true, nil
		}
		committed, err := l.commitGroup(p, held, out)
		if err != nil || !committed {
			return false, err
		}
		for _, i := range held {
			res.BytesBefore += p.sizes[i]
		}
		res.BytesAfter += out.size
		res.SegmentsBefore += len(held)
		res.SegmentsAfter++
		res.RecordsRemoved += out.removed
		res.TombstonesRemoved += out.tombstones
		return true, nil
	}
	groups := groupSegments(p, n)
	for k := 0; k < len(groups); k++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		g := groups[k]
		out, err := l.cleanGroup(p, g, f)
		if err == nil && out.bare {
			first := g
			if carry != nil {
				first = carry
			}
			if k+1 < len(groups) && joinable(p, first, groups[k+1]) {
				l.discardCleaned(out)
				carry = slices.Concat(carry, g)
				continue
			}
		}
		if carry != nil && err == nil {
			l.discardCleaned(out)
			g, carry = slices.Concat(carry, g), nil
			out, err = l.cleanGroup(p, g, f)
		}
		if err == nil && out.bare && heldOut != nil && joinable(p, held, g) {
			l.discardCleaned(out)
			l.discardCleaned(heldOut)
			g, heldOut = slices.Concat(held, g), nil
			out, err = l.cleanGroup(p, g, f)
		}
		if errors.Is(err, errSegmentGone) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if heldOut != nil {
			if ok, err := commit(); err != nil || !ok {
				l.discardCleaned(out)
				return res, err
			}
		}
		held, heldOut = g, out
	}
	if heldOut != nil {
		if ok, err := commit(); err != nil || !ok {
			return res, err
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.truncGen != p.gen {
		return res, nil
	}
	l.cleaner.firstDirty = max(l.cleaner.firstDirty, cleanedTo)
	l.cleaner.add(p.firstDirty, cleanedTo, p.now)
	// The pass read every record below cleanedTo: a range there holds
	// tombstones to remove later only if the pass kept some in it.
	for i := range l.cleaner.ranges {
		if r := &l.cleaner.ranges[i]; r.to <= cleanedTo {
			r.tombstones = f.keptIn(r.from, r.to)
		}
	}
	l.cleaner.prune(l.logStart, l.end)
	res.CleanedTo = cleanedTo
	return res, l.checkpointCleanerLocked()
}

// buildOffsetMap puts the keys of the dirty batches into m, from the
// first dirty offset on, and returns the offset after the last batch whose
// keys all fit.
func (l *Log) buildOffsetMap(ctx context.Context, p *cleanPlan, m *offsetMap) (int64, error) {
	it := new(record.Iter)
	defer it.Close()
	for i, seg := range p.segs {
		if p.next[i] <= p.firstDirty {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		stop := int64(-1)
		err := l.readSegment(p, i, func(pos int64, b []byte, h *record.Header) error {
			// An aborted record must not hide an older value of its key.
			if h.LastOffset() < p.firstDirty || h.Control() || h.Transactional() && p.abortedAt(h.ProducerID, h.BaseOffset) {
				return nil
			}
			if !m.room(int(h.NumRecords)) {
				stop = h.BaseOffset
				return errStopIteration
			}
			if err := it.Reset(b, 0); err != nil {
				return &CorruptionError{Segment: segmentName(seg.base, logExt), Position: pos, Err: err}
			}
			for it.Next() {
				r := it.Record()
				if r.Key != nil {
					m.put(r.Key, r.Offset(h))
				}
			}
			if err := it.Err(); err != nil {
				return &CorruptionError{Segment: segmentName(seg.base, logExt), Position: pos, Err: err}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if stop >= 0 {
			if stop <= p.firstDirty {
				return 0, fmt.Errorf("log: clean: the dedupe buffer holds %d keys, too few for the batch at offset %d", m.maxKeys(), stop)
			}
			return stop, nil
		}
	}
	return p.end, nil
}

// errSegmentGone: a segment of the pass was deleted meanwhile (retention,
// truncation); the pass stops.
var errSegmentGone = errors.New("log: clean: segment deleted meanwhile")

// readSegment is readBatches over segment i of p, holding a reference on
// its file only meanwhile, so a pass over many segments keeps few open.
func (l *Log) readSegment(p *cleanPlan, i int, fn func(pos int64, b []byte, h *record.Header) error) error {
	seg := p.segs[i]
	sf, _, _, err := l.acquire(seg)
	if errors.Is(err, ErrOffsetOutOfRange) {
		return errSegmentGone
	}
	if err != nil {
		return err
	}
	defer sf.release()
	return readBatches(sf, seg.base, p.sizes[i], p.readBuf, fn)
}

// readBatches calls fn with each batch of a segment data file of size
// bytes, checked (header, dense offsets, CRC). fn may return
// errStopIteration to stop. b is valid until fn returns.
func readBatches(f io.ReaderAt, base, size int64, buf []byte, fn func(pos int64, b []byte, h *record.Header) error) error {
	r := chunkReader{f: f, fileSize: size, buf: buf}
	pos, next := int64(0), base
	var h record.Header // fn gets its address: one for the whole walk
	for pos < size {
		bad := func(err error) error {
			return &CorruptionError{Segment: segmentName(base, logExt), Position: pos, Err: err}
		}
		hb, err := r.at(pos, record.HeaderSize)
		if err != nil {
			return bad(err)
		}
		if h, err = record.ParseHeader(hb); err != nil {
			return bad(err)
		}
		if h.BaseOffset != next {
			return bad(fmt.Errorf("%w: base offset %d, want %d", errOffsetOrder, h.BaseOffset, next))
		}
		b, err := r.at(pos, h.Size())
		if err != nil {
			return bad(err)
		}
		if err := record.CheckCRC(b); err != nil {
			return bad(err)
		}
		if err := fn(pos, b, &h); err != nil {
			if errors.Is(err, errStopIteration) {
				return nil
			}
			return err
		}
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	return nil
}

// groupSegments splits the first n segments of p into runs to merge:
// consecutive segments whose sizes add up to at most the merge target and
// whose offsets fit an index's 32-bit relative offsets.
func groupSegments(p *cleanPlan, n int) [][]int {
	var groups [][]int
	for i := 0; i < n; {
		g := []int{i}
		size := p.sizes[i]
		for j := i + 1; j < n && size+p.sizes[j] <= p.segBytes && p.next[j]-1-p.segs[i].base <= math.MaxUint32; j++ {
			g = append(g, j)
			size += p.sizes[j]
		}
		groups = append(groups, g)
		i += len(g)
	}
	return groups
}

// joinable reports whether the groups a and b, consecutive, can be
// rewritten as one segment: its offsets must fit an index's 32-bit
// relative offsets.
func joinable(p *cleanPlan, a, b []int) bool {
	return p.next[b[len(b)-1]]-1-p.segs[a[0]].base <= math.MaxUint32
}

// cleanFilter decides which records a pass keeps.
type cleanFilter struct {
	m         *offsetMap
	state     *cleanerState
	cleanedTo int64
	now       int64
	retention int64
	newest    map[int64]int64
	kept      []bool // by range of state: a tombstone was kept in it
}

// keep reports whether the record at offset with key and value (nil: a
// tombstone) stays. Records without a key always stay.
func (f *cleanFilter) keep(offset int64, key, value []byte) bool {
	if key == nil || offset >= f.cleanedTo {
		return true
	}
	if latest, ok := f.m.get(key); ok && latest > offset {
		return false
	}
	if value == nil {
		i, ok := f.state.rangeOf(offset)
		if ok && f.state.ranges[i].at+f.retention <= f.now {
			return false
		}
		if ok {
			f.kept[i] = true
		}
	}
	return true
}

// keptIn reports whether the pass kept a tombstone in [from, to).
func (f *cleanFilter) keptIn(from, to int64) bool {
	for i, r := range f.state.ranges {
		if f.kept[i] && r.from < to && r.to > from {
			return true
		}
	}
	return false
}

// producerNeeds reports whether h is the newest batch of a producer the
// log tracks: its header stays even when no record does, so that the
// producer state rebuilt from the log knows the producer's last sequence.
func (f *cleanFilter) producerNeeds(h *record.Header) bool {
	base, ok := f.newest[h.ProducerID]
	return ok && h.ProducerID >= 0 && base == h.BaseOffset
}

// groupOutput is a group's cleaned segment, written under temporary names.
type groupOutput struct {
	base, next          int64
	size                int64
	f                   vfs.File // the cleaned data file, open; nil when same
	idx, tidx           []byte
	removed, tombstones int64
	// same: the result is the group's one segment as it was, and no file
	// was kept. bare: no batch of the result holds a record.
	same, bare bool
}

// discardCleaned closes and removes the files of a group's output that is
// not committed; nil does nothing.
func (l *Log) discardCleaned(out *groupOutput) {
	if out == nil || out.f == nil {
		return
	}
	_ = out.f.Close()
	out.f = nil
	l.removeCleaned(out.base)
}

// cleanGroup writes the cleaned segment replacing the segments g of p.
// When the result would be the same single segment it keeps no file and
// reports same.
func (l *Log) cleanGroup(p *cleanPlan, g []int, f *cleanFilter) (out *groupOutput, err error) {
	base := p.segs[g[0]].base
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	w, err := newSegWriter(l.fs, logPath+cleanedSuffix, base, p.interval, p.writeBuf)
	if err != nil {
		return nil, fmt.Errorf("log: clean: %w", err)
	}
	o := &groupOutput{base: base, next: p.next[g[len(g)-1]], f: w.f}
	defer func() {
		if err != nil || o.same {
			_ = w.f.Close()
			l.removeCleaned(base)
			o.f = nil
		}
	}()
	out = o
	var inSize int64
	bb := newBatchBuilder()
	kept := newRecordBuf()
	it := new(record.Iter)
	defer it.Close()
	for _, i := range g {
		seg := p.segs[i]
		inSize += p.sizes[i]
		err := l.readSegment(p, i, func(pos int64, b []byte, h *record.Header) error {
			corrupt := func(err error) error {
				return &CorruptionError{Segment: segmentName(seg.base, logExt), Position: pos, Err: err}
			}
			if h.BaseOffset < f.cleanedTo && h.Transactional() && !h.Control() && h.NumRecords > 0 && p.abortedAt(h.ProducerID, h.BaseOffset) {
				// An aborted transaction's records go; its batch stays,
				// without records, so that the offsets still tile and a
				// producer state rebuilt from the log still sees the
				// transaction its marker ends.
				if err := bb.flush(w); err != nil {
					return err
				}
				nb, err := record.AppendBatch(w.scratch[:0], record.BuildOptionsFrom(*h), nil)
				if err != nil {
					return fmt.Errorf("log: clean: empty aborted batch at %d: %w", h.BaseOffset, err)
				}
				if h.LogAppendTime() {
					record.SetLogAppendTime(nb, h.MaxTimestamp)
				}
				w.scratch = nb
				out.removed += int64(h.NumRecords)
				return w.write(nb)
			}
			// Markers stay. The batches of committed transactions are
			// cleaned as any producer's: the pass stops before the first
			// open transaction, so every transactional batch below
			// cleanedTo has its outcome known.
			if h.BaseOffset >= f.cleanedTo || h.Control() {
				if err := bb.flush(w); err != nil {
					return err
				}
				return w.write(b)
			}
			if err := it.Reset(b, 0); err != nil {
				return corrupt(err)
			}
			kept.reset()
			var removed int32
			for it.Next() {
				r := it.Record()
				off := r.Offset(h)
				if f.keep(off, r.Key, r.Value) {
					kept.add(r, off, r.Timestamp(h))
					continue
				}
				removed++
				out.removed++
				if r.Value == nil {
					out.tombstones++
				}
			}
			if err := it.Err(); err != nil {
				return corrupt(err)
			}
			mergeable := h.ProducerID < 0 && !h.LogAppendTime()
			switch {
			case mergeable:
				if !bb.fits(h, len(kept.recs) > 0) {
					if err := bb.flush(w); err != nil {
						return err
					}
				}
				bb.take(h, kept)
				return nil
			case len(kept.recs) == 0 && !f.producerNeeds(h):
				// Nothing left (maybe since an earlier pass), and the
				// producer state does not need the batch: its offsets
				// become part of a neighbouring batch or a batch
				// without records.
				if !bb.fits(h, false) {
					if err := bb.flush(w); err != nil {
						return err
					}
				}
				bb.take(h, kept)
				return nil
			case h.ProducerID < 0:
				// Stamped with the log append time, without a producer:
				// its records stay a batch of their own, with its
				// append time, which may take the offsets of the
				// record-less batches around it.
				if !bb.fits(h, true) {
					if err := bb.flush(w); err != nil {
						return err
					}
				}
				bb.take(h, kept)
				return nil
			case removed == 0:
				if err := bb.flush(w); err != nil {
					return err
				}
				return w.write(b)
			}
			// An idempotent or broker-stamped batch keeps its header:
			// offsets, producer id, epoch and sequence, timestamps.
			if err := bb.flush(w); err != nil {
				return err
			}
			nb, err := record.AppendBatch(w.scratch[:0], record.BuildOptionsFrom(*h), kept.records(h.BaseOffset, h.BaseTimestamp))
			if err != nil {
				return fmt.Errorf("log: clean: rebuild batch at %d: %w", h.BaseOffset, err)
			}
			if h.LogAppendTime() {
				record.SetLogAppendTime(nb, h.MaxTimestamp)
			}
			w.scratch = nb
			return w.write(nb)
		})
		if err != nil {
			return nil, err
		}
	}
	if err := bb.flush(w); err != nil {
		return nil, err
	}
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("log: clean: %w", err)
	}
	out.size = w.pos
	out.idx, out.tidx = w.seg.idx, w.seg.tidx
	out.bare = w.withRecords == 0
	if len(g) == 1 && out.removed == 0 && out.size == inSize {
		out.same = true
		return out, nil
	}
	if err := writeSynced(l.fs, indexPath+cleanedSuffix, out.idx); err != nil {
		return nil, fmt.Errorf("log: clean: %w", err)
	}
	if err := writeSynced(l.fs, timeIndexPath+cleanedSuffix, out.tidx); err != nil {
		return nil, fmt.Errorf("log: clean: %w", err)
	}
	return out, nil
}

// removeCleaned removes a group's temporary files.
func (l *Log) removeCleaned(base int64) {
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	for _, p := range []string{logPath, indexPath, timeIndexPath} {
		if err := l.fs.Remove(p + cleanedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("cannot remove cleaner file", "file", p+cleanedSuffix, "err", err)
		}
	}
}

// segWriter writes a new segment data file through a buffer and builds its
// indexes.
type segWriter struct {
	f        vfs.File
	pos      int64 // bytes written to f
	buf      []byte
	scratch  []byte
	seg      *segment
	interval int32
	// withRecords counts the batches written that hold records.
	withRecords int
}

// newSegWriter creates path, buffering writes in buf's capacity.
func newSegWriter(fsys vfs.FS, path string, base int64, interval int32, buf []byte) (*segWriter, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &segWriter{f: f, buf: buf[:0], seg: &segment{base: base, maxTS: -1}, interval: interval}, nil
}

func (w *segWriter) write(b []byte) error {
	h, err := record.ParseHeader(b)
	if err != nil {
		return err
	}
	if len(w.buf)+len(b) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.seg.indexBatch(&h, w.pos+int64(len(w.buf)), w.interval)
	w.buf = append(w.buf, b...)
	if h.NumRecords > 0 {
		w.withRecords++
	}
	return nil
}

func (w *segWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.pos); err != nil {
		return err
	}
	w.pos += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// finish writes what is buffered and fsyncs the file.
func (w *segWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.f.Sync()
}

// writeSynced creates path with data and fsyncs it.
func writeSynced(fsys vfs.FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// recordBuf holds copies of records, outliving the iterator they came
// from.
type recordBuf struct {
	recs  []record.Record
	offs  []int64 // absolute offsets
	tss   []int64 // absolute timestamps
	arena []byte
	hdrs  []record.RecordHeader
}

func newRecordBuf() *recordBuf { return &recordBuf{arena: make([]byte, 0, 64<<10)} }

func (b *recordBuf) reset() {
	b.recs, b.offs, b.tss = b.recs[:0], b.offs[:0], b.tss[:0]
	b.arena, b.hdrs = b.arena[:0], b.hdrs[:0]
}

func (b *recordBuf) bytes(v []byte) []byte {
	if v == nil {
		return nil
	}
	start := len(b.arena)
	b.arena = append(b.arena, v...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

func (b *recordBuf) add(r *record.Record, offset, ts int64) {
	c := record.Record{Attributes: r.Attributes, Key: b.bytes(r.Key), Value: b.bytes(r.Value)}
	if len(r.Headers) > 0 {
		start := len(b.hdrs)
		for _, h := range r.Headers {
			b.hdrs = append(b.hdrs, record.RecordHeader{Key: h.Key, Value: b.bytes(h.Value)})
		}
		c.Headers = b.hdrs[start:len(b.hdrs):len(b.hdrs)]
	}
	b.recs = append(b.recs, c)
	b.offs = append(b.offs, offset)
	b.tss = append(b.tss, ts)
}

// size is the arena's size, roughly the records' encoded size.
func (b *recordBuf) size() int { return len(b.arena) + 8*len(b.recs) }

// records returns the records with offset and timestamp deltas from base
// and baseTS.
func (b *recordBuf) records(base, baseTS int64) []record.Record {
	for i := range b.recs {
		b.recs[i].OffsetDelta = int32(b.offs[i] - base)
		b.recs[i].TimestampDelta = b.tss[i] - baseTS
	}
	return b.recs
}

// batchBuilder merges the surviving records of consecutive batches without
// a producer id, with CreateTime timestamps and the same leader epoch, into
// one batch covering all their offsets, and covers the offsets of
// batches left with nothing the same way (a batch without records when no
// record survives near them). The records of a batch without a producer
// id stamped with the log append time are never merged with others: they
// make a batch of their own, with its append time, which takes the offsets
// of record-less batches next to it.
type batchBuilder struct {
	open     bool
	epoch    int32
	codec    record.Codec
	hasCodec bool
	base     int64
	last     int64
	// maxTS is the largest MaxTimestamp of the batches taken: a batch
	// left without records carries it, so that retention.ms (which goes by
	// a segment's largest timestamp) ages a segment the cleaner emptied as
	// it would have aged the segment before, not from the time of the pass.
	maxTS int64
	// lat: the records are a LogAppendTime batch's, stamped latTS.
	lat   bool
	latTS int64
	buf   *recordBuf
	out   []byte
}

func newBatchBuilder() *batchBuilder { return &batchBuilder{buf: newRecordBuf()} }

// fits reports whether the batch with header h can join the pending one.
func (b *batchBuilder) fits(h *record.Header, withRecords bool) bool {
	if !b.open {
		return true
	}
	if withRecords && (b.lat || h.LogAppendTime() && len(b.buf.recs) > 0) {
		return false
	}
	return h.PartitionLeaderEpoch == b.epoch &&
		(!withRecords || !b.hasCodec || h.Codec() == b.codec) &&
		(!withRecords || b.buf.size() < cleanedBatchBytes) &&
		h.LastOffset()-b.base <= math.MaxInt32
}

// take adds the batch with header h and surviving records kept.
func (b *batchBuilder) take(h *record.Header, kept *recordBuf) {
	if !b.open {
		b.open, b.epoch, b.base, b.hasCodec, b.maxTS, b.lat = true, h.PartitionLeaderEpoch, h.BaseOffset, false, -1, false
	}
	if len(kept.recs) > 0 && h.LogAppendTime() {
		b.lat, b.latTS = true, h.MaxTimestamp
	}
	b.last = h.LastOffset()
	b.maxTS = max(b.maxTS, h.MaxTimestamp)
	if len(kept.recs) > 0 && !b.hasCodec {
		b.codec, b.hasCodec = h.Codec(), true
	}
	for i := range kept.recs {
		b.buf.add(&kept.recs[i], kept.offs[i], kept.tss[i])
	}
}

func (b *batchBuilder) flush(w *segWriter) error {
	if !b.open {
		return nil
	}
	baseTS := b.maxTS // with no records, the batch's only timestamp
	if len(b.buf.recs) > 0 {
		baseTS = b.buf.tss[0]
	}
	opts := record.BuildOptions{
		BaseOffset:           b.base,
		PartitionLeaderEpoch: b.epoch,
		Codec:                b.codec,
		BaseTimestamp:        baseTS,
		KeepOffsetDeltas:     true,
		LastOffsetDelta:      int32(b.last - b.base),
		LogAppendTime:        b.lat,
	}
	out, err := record.AppendBatch(b.out[:0], opts, b.buf.records(b.base, baseTS))
	if err != nil {
		return fmt.Errorf("log: clean: build batch at %d: %w", b.base, err)
	}
	if b.lat {
		record.SetLogAppendTime(out, b.latTS)
	}
	b.out = out
	b.open = false
	b.buf.reset()
	return w.write(out)
}
