package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqproject/mq/lib/record"
)

// ErrDamaged is wrapped by the DamagedError of a read into a damaged range.
var ErrDamaged = errors.New("log: damaged range")

// Damage is a range of the log whose bytes failed their checks: a batch
// whose CRC does not match, a header that does not parse or does not follow
// the batch before it, a segment shorter than it was sealed, a segment file
// that is missing. The offsets in it are never served: a read of one gets a
// DamagedError, and reads before it stop at it. The log keeps every good
// batch around it, and keeps the record of the damage in its directory
// until the range is deleted (retention, DeleteRecordsBefore) or skipped.
type Damage struct {
	// From and To delimit the offsets the damage covers: [From, To).
	From, To int64
	// Segment is the data file holding the damage; Position and Length the
	// bytes of it that are bad (Length 0 when the bytes are missing).
	Segment          string
	Position, Length int64
	// Reason says which check failed.
	Reason string
	// Detected is when the damage was found.
	Detected time.Time
	// Skipped is set by SkipDamaged: reads pass over the range as over a
	// gap in the offsets, and the offsets in it are lost for good.
	Skipped bool
}

func (d Damage) String() string {
	return fmt.Sprintf("offsets %d-%d (segment %s, %d bytes at position %d: %s)",
		d.From, d.To-1, d.Segment, d.Length, d.Position, d.Reason)
}

// segmentBase is the base offset of the segment holding the damage.
func (d Damage) segmentBase() int64 {
	base, _, _ := parseSegmentName(d.Segment)
	return base
}

// DamagedError is the error of a read at an offset of a damaged range.
type DamagedError struct {
	Offset int64 // the offset read
	Damage Damage
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("log: offset %d is in a damaged range: %s", e.Offset, e.Damage)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }

// damageFile records the damaged ranges of the log: a header line, the
// number of ranges and one line per range:
//
//	<from> <to> <segment> <position> <length> <detected unix ms> <skipped 0|1> <reason…>
const damageFile = "damaged-ranges"

func encodeDamage(ds []Damage) []byte {
	var b strings.Builder
	b.WriteString(checkpointHeader("damaged-ranges"))
	b.WriteString(strconv.Itoa(len(ds)) + "\n")
	for _, d := range ds {
		skipped := 0
		if d.Skipped {
			skipped = 1
		}
		reason := strings.ReplaceAll(d.Reason, "\n", " ")
		fmt.Fprintf(&b, "%d %d %s %d %d %d %d %s\n", d.From, d.To, d.Segment, d.Position, d.Length,
			d.Detected.UnixMilli(), skipped, reason)
	}
	return []byte(b.String())
}

func decodeDamage(b []byte) ([]Damage, error) {
	lines, err := checkpointLines("damaged-ranges", b)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, errors.New("damaged-ranges: no count")
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("damaged-ranges: count %q for %d lines", lines[0], len(lines)-1)
	}
	ds := make([]Damage, 0, n)
	for _, line := range lines[1:] {
		f := strings.SplitN(line, " ", 8)
		if len(f) < 7 {
			return nil, fmt.Errorf("damaged-ranges: bad line %q", line)
		}
		var nums [6]int64
		for i, j := range []int{0, 1, 3, 4, 5, 6} {
			if nums[i], err = strconv.ParseInt(f[j], 10, 64); err != nil {
				return nil, fmt.Errorf("damaged-ranges: bad line %q", line)
			}
		}
		if _, _, ok := parseSegmentName(f[2]); !ok || nums[0] >= nums[1] {
			return nil, fmt.Errorf("damaged-ranges: bad line %q", line)
		}
		d := Damage{From: nums[0], To: nums[1], Segment: f[2], Position: nums[2], Length: nums[3],
			Detected: time.UnixMilli(nums[4]), Skipped: nums[5] == 1}
		if len(f) == 8 {
			d.Reason = f[7]
		}
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b Damage) int { return cmpInt64(a.From, b.From) })
	return ds, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Damaged returns the damaged ranges of the log, oldest first.
func (l *Log) Damaged() []Damage {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.damage)
}

// DamageFound returns how many damaged ranges the log has found since it
// was opened.
func (l *Log) DamageFound() uint64 { return l.damageFound.Load() }

// damageAtLocked returns the damaged range holding offset, or nil.
func (l *Log) damageAtLocked(offset int64) *Damage {
	i, _ := slices.BinarySearchFunc(l.damage, offset, func(d Damage, o int64) int {
		if d.To <= o {
			return -1
		}
		if d.From > o {
			return 1
		}
		return 0
	})
	if i < len(l.damage) && l.damage[i].From <= offset && offset < l.damage[i].To {
		return &l.damage[i]
	}
	return nil
}

// nextDamageLocked returns the first damaged range starting after offset
// and before limit, or nil.
func (l *Log) nextDamageLocked(offset, limit int64) *Damage {
	for i := range l.damage {
		if d := &l.damage[i]; d.From > offset {
			if d.From < limit {
				return d
			}
			return nil
		}
	}
	return nil
}

// recordDamageLocked adds d to the damaged ranges, logs it and persists the
// list. A range overlapping one already known is not added again. It
// reports whether d was new.
func (l *Log) recordDamageLocked(d Damage) bool {
	if d.To <= d.From {
		l.logger.Error("bad batch found, but not where its damage ends; not recorded", "segment", d.Segment,
			"from_offset", d.From, "to_offset", d.To, "position", d.Position, "reason", d.Reason)
		return false
	}
	for _, o := range l.damage {
		if d.From < o.To && o.From < d.To {
			return false
		}
	}
	if d.Detected.IsZero() {
		d.Detected = l.clock.Now()
	}
	l.damage = append(l.damage, d)
	slices.SortFunc(l.damage, func(a, b Damage) int { return cmpInt64(a.From, b.From) })
	l.damageFound.Add(1)
	if l.counters != nil {
		l.counters.DamagedRanges.Add(1)
	}
	l.logger.Error("damaged range found; its offsets are not served",
		"segment", d.Segment, "from_offset", d.From, "to_offset", d.To, "position", d.Position,
		"bytes", d.Length, "reason", d.Reason)
	if err := l.checkpointDamageLocked(); err != nil {
		l.logger.Error("cannot record damaged range", "err", err)
	}
	return true
}

func (l *Log) checkpointDamageLocked() error {
	if len(l.damage) == 0 {
		if err := l.fs.Remove(l.path(damageFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return l.writeAtomic(damageFile, encodeDamage(l.damage))
}

// dropDamageLocked forgets the damaged ranges that keep returns false for
// (deleted with their segments, or truncated away).
func (l *Log) dropDamageLocked(keep func(d Damage) bool) {
	n := len(l.damage)
	l.damage = slices.DeleteFunc(l.damage, func(d Damage) bool { return !keep(d) })
	if len(l.damage) != n {
		if err := l.checkpointDamageLocked(); err != nil {
			l.logger.Error("cannot update damaged ranges", "err", err)
		}
	}
}

// SkipDamaged gives up the damaged range holding offset: its offsets are
// lost, and reads pass over them as over a gap. The decision is logged and
// kept in the log's directory. It returns the range skipped; an offset in
// no damaged range is ErrOffsetOutOfRange.
func (l *Log) SkipDamaged(offset int64) (Damage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Damage{}, ErrClosed
	}
	d := l.damageAtLocked(offset)
	if d == nil {
		return Damage{}, fmt.Errorf("%w: offset %d is in no damaged range", ErrOffsetOutOfRange, offset)
	}
	if !d.Skipped {
		d.Skipped = true
		l.logger.Warn("skipping damaged range: its offsets are lost", "segment", d.Segment,
			"from_offset", d.From, "to_offset", d.To, "reason", d.Reason)
		if err := l.checkpointDamageLocked(); err != nil {
			d.Skipped = false
			return Damage{}, err
		}
	}
	return *d, nil
}

// locateDamage works out the extent of a bad batch found at position bad
// of segment base (data [0, size)), where the batch with offset expect
// should start: the next good batch after it, and the offsets in between.
// nextBase is the offset after the segment (the next segment's base, or
// the log end for the active segment). resume is where the good batches go
// on (size when none follows in the segment) and resumeOffset their first
// offset.
func locateDamage(f io.ReaderAt, base, bad, size, expect, nextBase int64, why error) (d Damage, resume, resumeOffset int64, err error) {
	hint := int64(-1)
	if b, err := readAtMost(f, bad, record.HeaderSize, size); err == nil {
		if h, err := record.ParseHeader(b); err == nil && bad+int64(h.Size()) <= size {
			hint = bad + int64(h.Size())
		}
	}
	pos, h, found, err := findNextBatch(f, base, bad+1, size, expect, nextBase, hint, true)
	if err != nil {
		return Damage{}, 0, 0, err
	}
	d = Damage{From: expect, Segment: segmentName(base, logExt), Position: bad, Reason: why.Error()}
	if found {
		d.To, d.Length = h.BaseOffset, pos-bad
		return d, pos, h.BaseOffset, nil
	}
	d.To, d.Length = nextBase, size-bad
	return d, size, nextBase, nil
}

// findNextBatch looks for the first good batch starting at a position ≥
// from: a header that parses, offsets in [minOffset, maxOffset) that fit
// the segment, bytes within size, a matching CRC, and followed by the end
// of the data or by a header that continues its offsets (so that a batch
// embedded in some record's value is not taken for one of the log's). It
// tries hint first (the position after the bad batch, when its length
// looked sane), then every position in order. Without strict, any batch
// passing its CRC will do.
func findNextBatch(f io.ReaderAt, base, from, size, minOffset, maxOffset, hint int64, strict bool) (int64, record.Header, bool, error) {
	if hint >= from {
		if h, ok, err := goodBatchAt(f, base, hint, size, minOffset, maxOffset, strict); err != nil || ok {
			return hint, h, ok, err
		}
	}
	const window = 1 << 20
	buf := make([]byte, window+record.HeaderSize)
	magicAt := 16 // offset of the magic byte in a header
	for start := from; start+record.HeaderSize <= size; start += window {
		n := int64(len(buf))
		if start+n > size {
			n = size - start
		}
		if _, err := f.ReadAt(buf[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return 0, record.Header{}, false, err
		}
		for i := int64(0); i < min(window, n-record.HeaderSize+1); i++ {
			if int8(buf[i+int64(magicAt)]) != record.Magic {
				continue
			}
			h, err := record.ParseHeader(buf[i : i+record.HeaderSize])
			if err != nil || !plausible(&h, base, start+i, size, minOffset, maxOffset) {
				continue
			}
			if h, ok, err := goodBatchAt(f, base, start+i, size, minOffset, maxOffset, strict); err != nil || ok {
				return start + i, h, ok, err
			}
		}
	}
	return 0, record.Header{}, false, nil
}

// plausible reports whether header h found at pos could be a batch of the
// segment.
func plausible(h *record.Header, base, pos, size, minOffset, maxOffset int64) bool {
	return h.LastOffsetDelta >= 0 && h.BaseOffset >= minOffset && h.LastOffset() < maxOffset &&
		h.LastOffset()-base <= math.MaxUint32 && pos+int64(h.Size()) <= size
}

// goodBatchAt checks for a good batch at pos (see findNextBatch); strict
// also wants the end of the data or a continuing header after it.
func goodBatchAt(f io.ReaderAt, base, pos, size, minOffset, maxOffset int64, strict bool) (record.Header, bool, error) {
	hb, err := readAtMost(f, pos, record.HeaderSize, size)
	if err != nil {
		return record.Header{}, false, nil
	}
	h, err := record.ParseHeader(hb)
	if err != nil || !plausible(&h, base, pos, size, minOffset, maxOffset) {
		return h, false, nil
	}
	b := make([]byte, h.Size())
	if _, err := f.ReadAt(b, pos); err != nil {
		return h, false, err
	}
	if record.CheckCRC(b) != nil {
		return h, false, nil
	}
	end := pos + int64(h.Size())
	if end == size || !strict {
		return h, true, nil
	}
	nb, err := readAtMost(f, end, record.HeaderSize, size)
	if err != nil {
		return h, false, nil
	}
	next, err := record.ParseHeader(nb)
	return h, err == nil && next.BaseOffset == h.LastOffset()+1, nil
}

// readAtMost reads n bytes at pos of a file whose data ends at size.
func readAtMost(f io.ReaderAt, pos int64, n int, size int64) ([]byte, error) {
	if pos < 0 || pos+int64(n) > size {
		return nil, io.ErrUnexpectedEOF
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, pos); err != nil {
		return nil, err
	}
	return b, nil
}
