package log

import (
	"fmt"
	"slices"
)

// SegmentInfo describes one closed segment, for copying it to a remote
// store (lib/tier).
type SegmentInfo struct {
	// Base is the segment's base offset, Next the base offset of the one
	// after it: the segment holds the offsets [Base, Next).
	Base, Next int64
	// Size is the bytes of its data file.
	Size int64
	// MaxTimestamp is its largest batch max timestamp, -1 for none.
	MaxTimestamp int64
}

// ClosedSegments returns the closed segments (every one but the active),
// oldest first, whose offsets end after from.
func (l *Log) ClosedSegments(from int64) ([]SegmentInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	var out []SegmentInfo
	for i := 0; i+1 < len(l.segs); i++ {
		seg, next := l.segs[i], l.segs[i+1].base
		if next <= from {
			continue
		}
		ts, _, err := l.segMaxTSLocked(seg)
		if err != nil {
			return nil, err
		}
		out = append(out, SegmentInfo{Base: seg.base, Next: next, Size: seg.size, MaxTimestamp: ts})
	}
	return out, nil
}

// SegmentData returns what a remote store keeps of the closed segment at
// base: a Region of its whole data file (Release it), copies of its
// offset and time indexes, and the leader-epoch entries for its range
// (the entry in force at base first).
func (l *Log) SegmentData(base int64) (Region, []byte, []byte, []EpochEntry, error) {
	l.mu.RLock()
	k := -1
	for i := 0; i+1 < len(l.segs); i++ {
		if l.segs[i].base == base {
			k = i
			break
		}
	}
	if l.closed || k < 0 {
		l.mu.RUnlock()
		return Region{}, nil, nil, nil, fmt.Errorf("%w: no closed segment at %d", ErrOffsetOutOfRange, base)
	}
	seg, next := l.segs[k], l.segs[k+1].base
	size := seg.size
	var epochs []EpochEntry
	for _, e := range l.epochs.entries {
		switch {
		case e.StartOffset <= base:
			epochs = append(epochs[:0], e)
		case e.StartOffset < next:
			epochs = append(epochs, e)
		}
	}
	l.mu.RUnlock()
	sf, idx, tidx, err := l.acquire(seg)
	if err != nil {
		return Region{}, nil, nil, nil, err
	}
	r := Region{Pos: 0, Len: size, BaseOffset: base, LastOffset: next - 1, sf: sf}
	return r, slices.Clone(idx), slices.Clone(tidx), epochs, nil
}

// SetRemoteEnd tells a log with Config.RemoteStorage where its remote
// copy ends (the offset after the last one recorded there; -1: nothing
// is): EnforceRetention deletes no segment reaching past it.
func (l *Log) SetRemoteEnd(next int64) {
	l.mu.Lock()
	l.remoteEnd = next
	l.mu.Unlock()
}

// SizeFrom returns the bytes of the segments whose base offset is at or
// after offset: the local part of a log not held remotely when offset is
// the remote end.
func (l *Log) SizeFrom(offset int64) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		if s.base >= offset {
			n += s.size
		}
	}
	return n
}

// SegmentTxnIndex returns the .txnindex entries (txnindex.go's format) of
// the abort markers in the closed segment at base, nil when it holds
// none: what a remote store keeps of them, for read_committed reads of
// the remote copy.
func (l *Log) SegmentTxnIndex(base int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i := 0; i+1 < len(l.segs) && !l.closed; i++ {
		if l.segs[i].base == base {
			return l.txnEntriesLocked(i), nil
		}
	}
	return nil, fmt.Errorf("%w: no closed segment at %d", ErrOffsetOutOfRange, base)
}
