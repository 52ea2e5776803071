package log

import (
	"encoding/binary"
	"fmt"
)

// Offset index (.index): back-to-back 8-byte entries, big endian,
//
//	relative offset uint32 | position uint32
//
// one per batch that starts at least index.interval.bytes after the
// previous entry (the first batch of a segment has the implicit entry
// (0, 0)). The relative offset is the batch's base offset minus the
// segment's base offset. Both columns strictly increase.
//
// Time index (.timeindex): back-to-back 12-byte entries, big endian,
//
//	timestamp int64 | relative offset uint32
//
// one per batch whose max timestamp exceeds the previous entry's, so the
// last entry holds the segment's largest timestamp and the first entry with
// timestamp ≥ t names the first batch whose max timestamp is ≥ t. Both
// columns strictly increase.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

var be = binary.BigEndian

func offsetEntry(idx []byte, i int) (rel uint32, pos int64) {
	e := idx[i*offsetEntrySize:]
	return be.Uint32(e), int64(be.Uint32(e[4:]))
}

func appendOffsetEntry(idx []byte, rel uint32, pos int64) []byte {
	idx = be.AppendUint32(idx, rel)
	return be.AppendUint32(idx, uint32(pos))
}

func timeEntry(tidx []byte, i int) (ts int64, rel uint32) {
	e := tidx[i*timeEntrySize:]
	return int64(be.Uint64(e)), be.Uint32(e[8:])
}

func appendTimeEntry(tidx []byte, ts int64, rel uint32) []byte {
	tidx = be.AppendUint64(tidx, uint64(ts))
	return be.AppendUint32(tidx, rel)
}

// offsetFloor returns the entry with the largest relative offset ≤ rel:
// its relative offset and position, or (0, 0) when there is none (the
// segment's first batch).
func offsetFloor(idx []byte, rel uint32) (uint32, int64) {
	lo, hi := 0, len(idx)/offsetEntrySize // find the first entry > rel
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r, _ := offsetEntry(idx, m); r <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, 0
	}
	return offsetEntry(idx, lo-1)
}

// entriesBeforePos is the number of entries whose position is < pos.
func entriesBeforePos(idx []byte, pos int64) int {
	lo, hi := 0, len(idx)/offsetEntrySize
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if _, p := offsetEntry(idx, m); p < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// entriesAtMostPos is the number of entries whose position is ≤ pos.
func entriesAtMostPos(idx []byte, pos int64) int { return entriesBeforePos(idx, pos+1) }

// timeCeil returns the index of the first entry with timestamp ≥ ts, or
// the number of entries when there is none.
func timeCeil(tidx []byte, ts int64) int {
	lo, hi := 0, len(tidx)/timeEntrySize
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t, _ := timeEntry(tidx, m); t < ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// validOffsetPrefix returns how many leading entries of idx are sane: both
// columns strictly increasing, positions inside a log of logSize bytes and
// relative offsets below maxRel.
func validOffsetPrefix(idx []byte, logSize int64, maxRel int64) int {
	n := len(idx) / offsetEntrySize
	var prevRel uint32
	var prevPos int64
	for i := range n {
		rel, pos := offsetEntry(idx, i)
		if pos >= logSize || int64(rel) >= maxRel || (i > 0 && (rel <= prevRel || pos <= prevPos)) || (i == 0 && pos == 0) {
			return i
		}
		prevRel, prevPos = rel, pos
	}
	return n
}

// validTimePrefix returns how many leading entries of tidx are sane: both
// columns strictly increasing and relative offsets below maxRel.
func validTimePrefix(tidx []byte, maxRel int64) int {
	n := len(tidx) / timeEntrySize
	var prevTS int64
	var prevRel uint32
	for i := range n {
		ts, rel := timeEntry(tidx, i)
		if int64(rel) >= maxRel || (i > 0 && (ts <= prevTS || rel <= prevRel)) {
			return i
		}
		prevTS, prevRel = ts, rel
	}
	return n
}

// checkIndexes reports whether index files read back for a whole segment are
// consistent with a log of logSize bytes.
func checkIndexes(idx, tidx []byte, logSize int64) error {
	if len(idx)%offsetEntrySize != 0 {
		return fmt.Errorf("offset index size %d is not a multiple of %d", len(idx), offsetEntrySize)
	}
	if len(tidx)%timeEntrySize != 0 {
		return fmt.Errorf("time index size %d is not a multiple of %d", len(tidx), timeEntrySize)
	}
	if n := validOffsetPrefix(idx, logSize, 1<<32); n != len(idx)/offsetEntrySize {
		return fmt.Errorf("offset index entry %d out of order or past the end of the log", n)
	}
	if n := validTimePrefix(tidx, 1<<32); n != len(tidx)/timeEntrySize {
		return fmt.Errorf("time index entry %d out of order", n)
	}
	return nil
}
