package log

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// cleanerFile is the cleaner checkpoint: the first dirty offset (where the
// next cleaning pass starts looking for new keys) and when each offset range
// was first cleaned, which tells when its tombstones may go:
//
//	mq cleaner-offset 1
//	<first dirty offset>
//	<count>
//	<from> <to> <cleaned at, unix ms> <tombstones>    one per range, by offset
//
// A range [from, to) was first cleaned at the time given: a tombstone in it
// is removed by a pass at or after that time plus the delete retention.
// Offsets no range covers were never cleaned, and their tombstones stay.
// <tombstones> is 1 when the range may hold tombstones that a later pass
// will remove, 0 when the last pass over it kept none: a log whose
// tombstones have passed their delete retention is cleaned again even when
// nothing new was written to it (CleanableState's TombstonesDue). A line
// without the field (an older file) counts as 1.
const cleanerFile = "cleaner-offset-checkpoint"

// maxCleanedRanges bounds the ranges the checkpoint keeps. Past it the two
// neighbours closest in time are joined under the later time, which only
// keeps tombstones longer.
const maxCleanedRanges = 64

// cleanedRange is one line of the cleaner checkpoint.
type cleanedRange struct {
	from, to int64 // offsets, to exclusive
	at       int64 // unix ms of the first pass that cleaned them
	// tombstones: the range may hold tombstones a pass will remove once
	// at plus the delete retention has passed.
	tombstones bool
}

// cleanerState is what the cleaner keeps between passes. Guarded by Log.mu.
type cleanerState struct {
	firstDirty int64 // -1: never cleaned (the log start)
	ranges     []cleanedRange
}

// rangeOf returns the index of the range holding offset, ok false when
// offset was never cleaned.
func (s *cleanerState) rangeOf(offset int64) (int, bool) {
	i, found := slices.BinarySearchFunc(s.ranges, offset, func(r cleanedRange, o int64) int {
		switch {
		case r.to <= o:
			return -1
		case r.from > o:
			return 1
		}
		return 0
	})
	return i, found
}

// tombstonesDue reports whether a range below end (where a pass may clean
// now) may hold tombstones whose delete retention (ms) has passed at now.
// A range reaching past end waits: a pass could not read all of it, nor
// tell that it was left without tombstones.
func (s *cleanerState) tombstonesDue(end, now, retention int64) bool {
	for _, r := range s.ranges {
		if r.to <= end && r.tombstones && r.at+retention <= now {
			return true
		}
	}
	return false
}

// add records that [from, to) was cleaned at ms; the offsets already
// covered keep their earlier time. The new ranges may hold tombstones
// until a pass says otherwise.
func (s *cleanerState) add(from, to, at int64) {
	var out []cleanedRange
	pos := from
	for _, r := range s.ranges {
		if r.to <= pos || r.from >= to {
			out = append(out, r)
			continue
		}
		if r.from > pos {
			out = append(out, cleanedRange{from: pos, to: r.from, at: at, tombstones: true})
		}
		out = append(out, r)
		pos = max(pos, r.to)
	}
	if pos < to {
		out = append(out, cleanedRange{from: pos, to: to, at: at, tombstones: true})
	}
	slices.SortFunc(out, func(a, b cleanedRange) int { return cmpInt64(a.from, b.from) })
	s.ranges = out
}

// prune forgets ranges below start, cuts those at or above end (the log was
// truncated) and joins ranges over the limit.
func (s *cleanerState) prune(start, end int64) {
	out := s.ranges[:0]
	for _, r := range s.ranges {
		r.from = max(r.from, start)
		r.to = min(r.to, end)
		if r.from < r.to {
			out = append(out, r)
		}
	}
	s.ranges = out
	if s.firstDirty > end {
		s.firstDirty = end
	}
	for len(s.ranges) > maxCleanedRanges {
		best := 0
		for i := 1; i+1 < len(s.ranges); i++ {
			if absInt64(s.ranges[i].at-s.ranges[i+1].at) < absInt64(s.ranges[best].at-s.ranges[best+1].at) {
				best = i
			}
		}
		a, b := s.ranges[best], s.ranges[best+1]
		s.ranges[best] = cleanedRange{from: a.from, to: b.to, at: max(a.at, b.at), tombstones: a.tombstones || b.tombstones}
		s.ranges = slices.Delete(s.ranges, best+1, best+2)
	}
}

func absInt64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func encodeCleanerState(s cleanerState) []byte {
	var b strings.Builder
	b.WriteString(checkpointHeader("cleaner-offset"))
	fmt.Fprintf(&b, "%d\n%d\n", max(s.firstDirty, 0), len(s.ranges))
	for _, r := range s.ranges {
		t := 0
		if r.tombstones {
			t = 1
		}
		fmt.Fprintf(&b, "%d %d %d %d\n", r.from, r.to, r.at, t)
	}
	return []byte(b.String())
}

func decodeCleanerState(b []byte) (cleanerState, error) {
	lines, err := checkpointLines("cleaner-offset", b)
	if err != nil {
		return cleanerState{}, err
	}
	if len(lines) < 2 {
		return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: %d lines", len(lines))
	}
	first, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil || first < 0 {
		return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: bad offset %q", lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: count %q for %d lines", lines[1], len(lines)-2)
	}
	s := cleanerState{firstDirty: first}
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 3 && len(f) != 4 {
			return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: bad line %q", line)
		}
		v := [4]int64{3: 1}
		for i := range f {
			if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil || v[i] < 0 || i == 3 && v[i] > 1 {
				return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: bad line %q", line)
			}
		}
		r := cleanedRange{from: v[0], to: v[1], at: v[2], tombstones: v[3] == 1}
		if r.to <= r.from || len(s.ranges) > 0 && r.from < s.ranges[len(s.ranges)-1].to {
			return cleanerState{}, fmt.Errorf("cleaner-offset checkpoint: line %q out of order", line)
		}
		s.ranges = append(s.ranges, r)
	}
	return s, nil
}

// loadCleanerLocked reads the cleaner checkpoint, during load. Without one
// the log counts as never cleaned: the next pass starts at the log start
// and its tombstones get a full delete retention from then.
func (l *Log) loadCleanerLocked() {
	l.cleaner = cleanerState{firstDirty: -1}
	b, err := l.readCheckpointLocked(cleanerFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var s cleanerState
		if s, err = decodeCleanerState(b); err == nil {
			// Offsets past the log end are ones it lost: left in the
			// file, they would be taken for this log's once it regrew.
			past := s.firstDirty > l.end || len(s.ranges) > 0 && s.ranges[len(s.ranges)-1].to > l.end
			l.cleaner = s
			l.cleaner.prune(l.logStart, l.end)
			if past {
				if err := l.checkpointCleanerLocked(); err != nil {
					l.logger.Warn("cannot rewrite the cleaner checkpoint", "err", err)
				}
			}
			return
		}
	}
	l.logger.Warn("ignoring cleaner checkpoint", "err", err)
}

func (l *Log) checkpointCleanerLocked() error {
	return l.writeAtomic(cleanerFile, encodeCleanerState(l.cleaner))
}

// truncateCleanerLocked forgets what the cleaner knew of the offsets at and
// after offset, which a truncation removed: batches appended there later
// are dirty and their tombstones not cleaned yet.
func (l *Log) truncateCleanerLocked(offset int64) error {
	if l.cleaner.firstDirty <= offset && (len(l.cleaner.ranges) == 0 || l.cleaner.ranges[len(l.cleaner.ranges)-1].to <= offset) {
		return nil
	}
	l.cleaner.prune(0, offset)
	return l.checkpointCleanerLocked()
}
