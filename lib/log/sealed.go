package log

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// sealedFile records the closed segments as they were sealed: a header
// line, the number of segments, and one "<base> <size> <next offset>" line
// each, next offset being the offset after the segment's last batch. At
// start-up every closed segment below the recovery point is compared with
// it — a size check, no data read — so a segment cut short, grown, or gone
// is noticed before anyone reads it.
const sealedFile = "sealed-segments"

// sealedSegment is one line of the sealed-segments file.
type sealedSegment struct {
	base, size, next int64
}

func encodeSealed(segs []sealedSegment) []byte {
	var b strings.Builder
	b.WriteString(checkpointHeader("sealed-segments"))
	b.WriteString(strconv.Itoa(len(segs)) + "\n")
	for _, s := range segs {
		fmt.Fprintf(&b, "%d %d %d\n", s.base, s.size, s.next)
	}
	return []byte(b.String())
}

func decodeSealed(b []byte) ([]sealedSegment, error) {
	lines, err := checkpointLines("sealed-segments", b)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || n != len(lines)-1 {
		return nil, fmt.Errorf("sealed-segments: count %q for %d lines", lines[0], len(lines)-1)
	}
	segs := make([]sealedSegment, 0, n)
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("sealed-segments: bad line %q", line)
		}
		var v [3]int64
		for i := range f {
			if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil || v[i] < 0 {
				return nil, fmt.Errorf("sealed-segments: bad line %q", line)
			}
		}
		s := sealedSegment{base: v[0], size: v[1], next: v[2]}
		if k := len(segs); s.next < s.base || k > 0 && s.base < segs[k-1].next {
			return nil, fmt.Errorf("sealed-segments: line %q out of order", line)
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// checkpointSealedLocked writes the sealed-segments file for the closed
// segments of the log.
func (l *Log) checkpointSealedLocked() error {
	return l.writeCheckpointLocked(sealedFile, l.sealedContentsLocked())
}

// sealedContentsLocked encodes the sealed-segments file of the log now.
func (l *Log) sealedContentsLocked() []byte {
	segs := make([]sealedSegment, 0, len(l.segs)-1)
	for i, seg := range l.segs[:len(l.segs)-1] {
		size := seg.sealedSize
		if size <= 0 {
			size = seg.size
		}
		segs = append(segs, sealedSegment{base: seg.base, size: size, next: l.segs[i+1].base})
	}
	return encodeSealed(segs)
}

// checkSealedLocked compares the closed segments before segment k (those
// recovery trusts) with the sealed-segments file, during load: a segment
// shorter than it was sealed has lost its tail (damage from the first
// missing batch to the next segment), one longer has bytes that were never
// appended (ignored), and a sealed segment that is gone, or a gap in the
// offsets between two segments, is damage too. A segment the file does not
// know (a log written before the file existed) is left to the scrubber.
func (l *Log) checkSealedLocked(k int) error {
	b, err := l.readCheckpointLocked(sealedFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		var sealed []sealedSegment
		if sealed, err = decodeSealed(b); err == nil {
			return l.compareSealedLocked(k, sealed)
		}
	}
	l.logger.Warn("ignoring sealed-segments file", "err", err)
	return nil
}

func (l *Log) compareSealedLocked(k int, sealed []sealedSegment) error {
	byBase := make(map[int64]sealedSegment, len(sealed))
	for _, s := range sealed {
		byBase[s.base] = s
	}
	first := l.segs[0].base
	onDisk := make(map[int64]bool, len(l.segs))
	for _, seg := range l.segs {
		onDisk[seg.base] = true
	}
	last := l.segs[len(l.segs)-1].base
	for _, s := range sealed {
		if s.base < first || s.base >= last || onDisk[s.base] {
			continue
		}
		l.recordDamageLocked(Damage{From: s.base, To: s.next, Segment: segmentName(s.base, logExt),
			Length: s.size, Reason: "segment file missing"})
	}
	for i, seg := range l.segs[:k] {
		s, known := byBase[seg.base]
		if !known {
			continue
		}
		name := segmentName(seg.base, logExt)
		seg.sealedSize = s.size
		switch {
		case seg.size > s.size:
			l.logger.Warn("closed segment is longer than it was sealed; ignoring the bytes after its end",
				"segment", name, "bytes", seg.size-s.size)
			seg.size = s.size
		case seg.size < s.size:
			if err := l.locateLostTailLocked(seg, s); err != nil {
				return err
			}
		}
		if next := l.segs[i+1].base; s.next < next && l.damageAtLocked(s.next) == nil {
			l.recordDamageLocked(Damage{From: s.next, To: next, Segment: segmentName(s.next, logExt),
				Reason: "offsets missing between two segments"})
		}
	}
	return nil
}

// locateLostTailLocked finds where the good batches of a closed segment
// cut short end, and records the rest of what it was sealed with as
// damage.
func (l *Log) locateLostTailLocked(seg *segment, s sealedSegment) error {
	name := segmentName(seg.base, logExt)
	f, err := l.fs.OpenFile(l.path(name), os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("check %s: %w", name, err)
	}
	defer f.Close()
	res := scanSegment(f, seg.base, 0, seg.size, seg.base, false, make([]byte, 64<<10), nil)
	if res.ioErr != nil {
		return fmt.Errorf("check %s: %w", name, res.ioErr)
	}
	l.recordDamageLocked(Damage{From: res.next, To: s.next, Segment: name, Position: res.end,
		Length: s.size - res.end, Reason: fmt.Sprintf("segment is %d bytes, it was sealed at %d", seg.size, s.size)})
	seg.size = res.end
	return nil
}

// loadDamageLocked reads the damaged-ranges file, during load.
func (l *Log) loadDamageLocked() {
	b, err := l.readCheckpointLocked(damageFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		if l.damage, err = decodeDamage(b); err == nil {
			for _, d := range l.damage {
				l.logger.Warn("log has a damaged range", "segment", d.Segment, "from_offset", d.From,
					"to_offset", d.To, "skipped", d.Skipped, "reason", d.Reason)
			}
			return
		}
	}
	l.logger.Error("cannot read the damaged-ranges file; damage found before is forgotten until found again", "err", err)
}
