package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

// checkedRange is a byte range of a segment data file holding whole
// batches that this process has checked (header, offsets, CRC): by
// appending them, by recovery, by a read or by the scrubber. first is the
// base offset of its first batch, next the offset after its last.
type checkedRange struct {
	start, end  int64
	first, next int64
}

// checkedSet is a segment's checked ranges: sorted, disjoint, and merged
// when they touch. Guarded by Log.mu like the rest of the segment.
type checkedSet []checkedRange

// covers reports whether [start, end) is checked.
func (s checkedSet) covers(start, end int64) bool {
	i, _ := slices.BinarySearchFunc(s, start, func(r checkedRange, p int64) int { return cmpInt64(r.end, p+1) })
	return i < len(s) && s[i].start <= start && end <= s[i].end
}

// add marks r checked. The usual case, an append right after the last
// range, extends it in place.
func (s *checkedSet) add(r checkedRange) {
	if r.end <= r.start {
		return
	}
	if n := len(*s); n > 0 && (*s)[n-1].end == r.start {
		(*s)[n-1].end, (*s)[n-1].next = r.end, r.next
		return
	}
	i, _ := slices.BinarySearchFunc(*s, r.start, func(c checkedRange, p int64) int { return cmpInt64(c.start, p) })
	*s = slices.Insert(*s, i, r)
	// Merge with the neighbours it touches or overlaps.
	out := (*s)[:0]
	for _, c := range *s {
		if n := len(out); n > 0 && c.start <= out[n-1].end {
			if c.end > out[n-1].end {
				out[n-1].end, out[n-1].next = c.end, c.next
			}
			continue
		}
		out = append(out, c)
	}
	*s = out
}

// truncate forgets what lies at or after pos.
func (s *checkedSet) truncate(pos int64) {
	out := (*s)[:0]
	for _, c := range *s {
		if c.start >= pos {
			break
		}
		if c.end > pos {
			// The offsets of a range cut inside are not known here;
			// keep only what is known whole.
			continue
		}
		out = append(out, c)
	}
	*s = out
}

// gap is a part of a segment still to check: [start, end), with the batch
// of offset next at start.
type gap struct {
	start, end, next int64
}

// gapsLocked lists the parts of seg's first size bytes that are neither
// checked nor known damaged.
func (l *Log) gapsLocked(seg *segment, size int64) []gap {
	return l.partsLocked(seg, size, true)
}

// undamagedLocked lists the parts of seg's first size bytes outside its
// damaged ranges.
func (l *Log) undamagedLocked(seg *segment, size int64) []gap {
	return l.partsLocked(seg, size, false)
}

// partsLocked lists the parts of seg's first size bytes outside its
// damaged ranges and, with skipChecked, outside what was checked.
func (l *Log) partsLocked(seg *segment, size int64, skipChecked bool) []gap {
	type known struct{ start, end, next int64 }
	var ks []known
	if skipChecked {
		for _, c := range seg.checked {
			ks = append(ks, known{c.start, c.end, c.next})
		}
	}
	name := segmentName(seg.base, logExt)
	for _, d := range l.damage {
		if d.Segment == name {
			ks = append(ks, known{d.Position, d.Position + d.Length, d.To})
		}
	}
	if len(ks) == 0 && !skipChecked {
		return []gap{{0, size, seg.base}}
	}
	slices.SortFunc(ks, func(a, b known) int { return cmpInt64(a.start, b.start) })
	var gaps []gap
	pos, next := int64(0), seg.base
	for _, k := range ks {
		if k.start > pos && pos < size {
			gaps = append(gaps, gap{pos, min(k.start, size), next})
		}
		if k.end > pos {
			pos, next = k.end, k.next
		}
	}
	if pos < size {
		gaps = append(gaps, gap{pos, size, next})
	}
	return gaps
}

// segmentBoundsLocked returns seg's data size and the offset after it
// (the next segment's base, or the log end offset for the active one).
func (l *Log) segmentBoundsLocked(seg *segment) (size, nextBase int64) {
	i := slices.Index(l.segs, seg)
	if i < 0 {
		return seg.size, seg.base
	}
	if i+1 < len(l.segs) {
		return seg.size, l.segs[i+1].base
	}
	return seg.size, l.end
}

// locateBoundsLocked bounds the search for the end of damage found at pos
// of seg (see locateDamage): the segment's data and the offset after it,
// or, when a known damaged range of the segment lies after pos, its
// position and first offset, so that the new range ends where the known
// one begins instead of overlapping it.
func (l *Log) locateBoundsLocked(seg *segment, pos int64) (size, nextBase int64) {
	size, nextBase = l.segmentBoundsLocked(seg)
	name := segmentName(seg.base, logExt)
	for _, d := range l.damage {
		if d.Segment == name && d.Position > pos && d.Position <= size {
			return d.Position, d.From
		}
	}
	return size, nextBase
}

// skipKnownLocked moves a scan of seg at pos (offset next) past the known
// damaged ranges that start there.
func (l *Log) skipKnownLocked(seg *segment, pos, next int64) (int64, int64) {
	name := segmentName(seg.base, logExt)
	for moved := true; moved; {
		moved = false
		for _, d := range l.damage {
			if d.Segment == name && d.Position == pos && d.Length > 0 {
				pos, next, moved = d.Position+d.Length, d.To, true
			}
		}
	}
	return pos, next
}

// checkResult is what checkBatches found.
type checkResult struct {
	end, next int64 // where checking stopped
	bad       bool  // a bad batch was met (at end, when stopped there)
	recorded  int   // damaged ranges recorded that were not known
}

// checkBatches checks the batches of seg (data file f) from pos, where the
// batch with offset next starts, up to end: headers, offsets and CRCs. It
// marks what passes as checked and records the damage it finds (see
// locateDamage), stepping over the damage already known; it stops at the
// first bad batch when stopAtDamage is set, else goes on after it. pace, when not nil, is called before every
// scrubChunk bytes are checked; its error stops the check.
func (l *Log) checkBatches(seg *segment, f io.ReaderAt, pos, end, next int64, stopAtDamage bool, pace func(n int) error) (checkResult, error) {
	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	// The leader-epoch history only changes past the log end (new epochs)
	// or by truncation, which a check racing it may miss anyway: one copy
	// serves every batch of the check.
	l.mu.RLock()
	epochs := epochCache{entries: slices.Clone(l.epochs.entries)}
	l.mu.RUnlock()
	res := checkResult{end: pos, next: next}
	for {
		l.mu.RLock()
		pos, next = l.skipKnownLocked(seg, pos, next)
		l.mu.RUnlock()
		if pos >= end {
			break
		}
		var paced int64 = -1 // batches up to here were paid for
		scan := scanSegment(f, seg.base, pos, end, next, true, *bufp, func(p int64, h *record.Header) error {
			if epochs.impossible(h.PartitionLeaderEpoch, h.BaseOffset) {
				return fmt.Errorf("%w: %d", errImpossibleEpoch, h.PartitionLeaderEpoch)
			}
			if pace != nil && p+int64(h.Size()) > paced {
				paced = p + scrubChunk
				return pace(scrubChunk)
			}
			return nil
		})
		if errors.Is(scan.stopErr, errImpossibleEpoch) {
			scan.badErr, scan.stopErr = scan.stopErr, nil
		}
		l.markChecked(seg, checkedRange{start: pos, end: scan.end, first: next, next: scan.next})
		res.end, res.next = scan.end, scan.next
		switch {
		case scan.ioErr != nil:
			return res, fmt.Errorf("check %s at %d: %w", segmentName(seg.base, logExt), scan.end, scan.ioErr)
		case scan.stopErr != nil:
			return res, scan.stopErr
		case scan.badErr == nil:
			return res, nil
		}
		l.mu.RLock()
		size, nextBase := l.locateBoundsLocked(seg, scan.end)
		l.mu.RUnlock()
		d, resume, resumeOffset, err := locateDamage(f, seg.base, scan.end, size, scan.next, nextBase, scan.badErr)
		if err != nil {
			return res, fmt.Errorf("check %s at %d: %w", segmentName(seg.base, logExt), scan.end, err)
		}
		l.mu.Lock()
		if !seg.deleted && !l.closed && d.From < l.end && l.recordDamageLocked(d) {
			res.recorded++
		}
		l.mu.Unlock()
		res.bad = true
		if stopAtDamage {
			return res, nil
		}
		pos, next = resume, resumeOffset
		res.end, res.next = pos, next
	}
	return res, nil
}

func (l *Log) markChecked(seg *segment, r checkedRange) {
	if r.end <= r.start {
		return
	}
	l.mu.Lock()
	if !seg.deleted {
		seg.checked.add(r)
	}
	l.mu.Unlock()
}

// errImpossibleEpoch is the damage of a batch whose leader epoch this log
// cannot have written (see epochCache.impossible).
var errImpossibleEpoch = errors.New("batch leader epoch not in the log's history")

// scrubChunk is how many bytes the scrubber checks per call to its pace.
const scrubChunk = 256 << 10

// ScrubStats is what one Scrub did.
type ScrubStats struct {
	Bytes    int64 // bytes checked
	Segments int   // segments with something to check
	Damaged  int   // damaged ranges found
}

// Scrub checks every byte of the log that this process has not checked
// yet (after a restart, the segments below the recovery point were only
// looked at, not read), and records the damage it finds. pace is called
// with the bytes about to be read, before each scrubChunk of them: the
// caller's rate limit (nil: none). Scrub holds no lock while reading, so
// appends and reads go on meanwhile. It stops early with ctx's error or
// pace's.
func (l *Log) Scrub(ctx context.Context, pace func(ctx context.Context, n int) error) (ScrubStats, error) {
	var st ScrubStats
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return st, ErrClosed
	}
	segs := slices.Clone(l.segs)
	l.mu.RUnlock()
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		l.mu.RLock()
		gaps := l.gapsLocked(seg, seg.size)
		deleted := seg.deleted
		l.mu.RUnlock()
		if deleted || len(gaps) == 0 {
			continue
		}
		sf, _, _, err := l.acquire(seg)
		if errors.Is(err, ErrOffsetOutOfRange) {
			continue // deleted meanwhile
		}
		if err != nil {
			return st, err
		}
		st.Segments++
		for _, g := range gaps {
			var paceFn func(int) error
			if pace != nil {
				paceFn = func(n int) error { return pace(ctx, n) }
			}
			res, err := l.checkBatches(seg, sf, g.start, g.end, g.next, false, paceFn)
			st.Bytes += res.end - g.start
			st.Damaged += res.recorded
			if err != nil {
				sf.release()
				return st, err
			}
		}
		sf.release()
	}
	return st, nil
}

// ForgetChecks marks every byte of the log unchecked, so that the next
// Scrub reads everything again (a periodic scrub: data on disk can rot
// after it was checked) and reads check what they serve again.
func (l *Log) ForgetChecks() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, seg := range l.segs {
		seg.checked = nil
	}
}

// Unchecked returns how many bytes of the log are not checked yet.
func (l *Log) Unchecked() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, seg := range l.segs {
		for _, g := range l.gapsLocked(seg, seg.size) {
			n += g.end - g.start
		}
	}
	return n
}

// Throttle paces work to a rate (bytes per second, say) on a Clock: a
// token bucket holding at most one second of work. It is safe for
// concurrent use; concurrent waiters share the rate.
type Throttle struct {
	clock clock.Clock
	rate  float64 // per second

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewThrottle returns a Throttle allowing perSecond units a second (> 0).
// clock nil is real time.
func NewThrottle(perSecond int64, c clock.Clock) *Throttle {
	if c == nil {
		c = clock.Real()
	}
	return &Throttle{clock: c, rate: float64(perSecond), last: c.Now()}
}

// Wait blocks until n units may go, or ctx ends.
func (t *Throttle) Wait(ctx context.Context, n int) error {
	t.mu.Lock()
	now := t.clock.Now()
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*t.rate, t.rate)
	t.last = now
	t.tokens -= float64(n)
	deficit := -t.tokens
	t.mu.Unlock()
	if deficit <= 0 {
		return nil
	}
	d := time.Duration(deficit / t.rate * float64(time.Second))
	tm := t.clock.NewTimer(max(d, time.Millisecond))
	defer tm.Stop()
	select {
	case <-tm.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
