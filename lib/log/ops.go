package log

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
)

// StartOffset returns the log start offset: the first offset a read may ask for.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// EndOffset returns the log end offset: the offset the next batch gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// RecoveryPoint returns the offset below which the log is known to be on
// stable storage (fsynced). Under FlushAlways every acknowledged append is
// below it.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// Size returns the total size of the segment data files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// NumSegments returns the number of segments, the active one included.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// LeaderEpochs returns a copy of the leader-epoch history.
func (l *Log) LeaderEpochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.epochs.entries)
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the end offset of epoch
// (the start offset of the first larger epoch, or the log end offset for
// the latest epoch) and the largest epoch ≤ epoch in the history. An epoch
// larger than the latest, or an empty history, gives (-1, -1).
func (l *Log) EndOffsetForEpoch(epoch int32) (endOffset int64, epochFound int32) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.end)
}

// TruncateTo removes every batch whose last offset is ≥ offset (a follower
// diverging from its leader). The new log end offset is the base offset of
// the first removed batch, which is offset itself when offset is a batch
// boundary. Indexes, the leader-epoch history and the producer state
// follow. An offset below the log start offset empties the log and
// restarts it at offset. TruncateTo(EndOffset()) removes no batch but
// drops the epochs begun at the log end with nothing in them.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	// A cut at or past the log end removes no batch, and needs no flush:
	// a follower whose log agrees with its new leader's (after a clean
	// restart, thousands of partitions at once) cuts nothing, and fsyncing
	// each of them first made its fetcher spend seconds on it.
	l.mu.Lock()
	if offset >= l.end {
		defer l.mu.Unlock()
		if err := l.writableLocked(); err != nil {
			return err
		}
		return errors.Join(l.truncateLocked(offset), l.truncateCleanerLocked(l.end))
	}
	l.mu.Unlock()
	// Settle the writes in flight first, so that appenders waiting for an
	// fsync are answered before their batches may go.
	if err := l.Flush(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return errors.Join(l.truncateLocked(offset), l.truncateCleanerLocked(l.end))
}

func (l *Log) truncateLocked(offset int64) error {
	if offset >= l.end {
		// No batch goes, but an epoch begun at the log end (BeginEpoch)
		// is at or above offset too: a follower cutting its history back
		// to where its leader's agrees must lose it.
		if offset == l.end && l.epochs.truncateFrom(offset) {
			return l.checkpointEpochsLocked()
		}
		return nil
	}
	l.truncGen++
	l.maxTSValid = false
	if offset < l.logStart {
		return l.truncateFullyLocked(offset)
	}
	i := l.segIndexLocked(offset)
	if len(l.segs) > i+1 {
		for len(l.segs) > i+1 {
			l.deleteSegmentLocked(l.segs[len(l.segs)-1])
		}
		// The removals must be on disk before the cut below: deleted
		// segments coming back after a crash behind a shortened one,
		// below the recovery point, would be a gap in the offsets.
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			if l.failed == nil {
				l.failed = fmt.Errorf("%w: truncate: %w", ErrFailed, err)
				l.logger.Error("log failed", "err", l.failed)
			}
			return l.failed
		}
		// sealed-segments must not list them: a later roll's new segment
		// past their offsets, with the file not yet rewritten, would make
		// them missing segments at the next Open.
		if err := l.checkpointSealedLocked(); err != nil {
			return err
		}
	}
	seg := l.segs[i]
	if err := l.openSegmentLocked(seg); err != nil {
		return err
	}
	l.openClosed = slices.DeleteFunc(l.openClosed, func(s *segment) bool { return s == seg })

	rel, pos := offsetFloor(seg.idx, relOffset(offset-seg.base))
	cut, newEnd, found := int64(-1), int64(0), false
	res := scanSegment(seg.file, seg.base, pos, seg.size, seg.base+int64(rel), false, make([]byte, 8<<10), func(p int64, h *record.Header) error {
		if !found && h.LastOffset() >= offset {
			cut, newEnd, found = p, h.BaseOffset, true
		}
		return nil
	})
	if res.ioErr != nil {
		return res.ioErr
	}
	if !found {
		cut, newEnd = res.end, res.next
	}
	f := seg.file
	if err := f.Truncate(cut); err != nil {
		return fmt.Errorf("truncate %s: %w", segmentName(seg.base, logExt), err)
	}
	// An fsync failure here is not fatal: the next successful fsync of
	// the file makes the new size durable too.
	if err := f.Sync(); err != nil {
		l.logger.Warn("fsync after truncation failed", "segment", segmentName(seg.base, logExt), "err", err)
	}
	seg.size = cut
	seg.checked.truncate(cut)
	seg.tail = nil // rebuilt by the next appends
	// Copy, never reslice: readers may hold the old slices.
	seg.idx = slices.Clone(seg.idx[:entriesBeforePos(seg.idx, cut)*offsetEntrySize])
	n := 0
	for n < len(seg.tidx)/timeEntrySize {
		if _, r := timeEntry(seg.tidx, n); seg.base+int64(r) >= newEnd {
			break
		}
		n++
	}
	seg.tidx = slices.Clone(seg.tidx[:n*timeEntrySize])
	seg.resetIndexState()
	seg.idxFlushed, seg.tidxFlushed = -1, -1
	seg.rollTS = -1
	if cut > 0 {
		seg.rollTS = l.clock.Now().UnixMilli()
		if h, err := readHeader(f, 0); err == nil && h.MaxTimestamp >= 0 {
			seg.rollTS = min(seg.rollTS, h.MaxTimestamp)
		}
	}
	if err := l.flushIndexesLocked(seg, true); err != nil {
		return err
	}
	l.end = newEnd
	l.dropDamageLocked(func(d Damage) bool { return d.From < newEnd })
	if l.logStart > newEnd {
		l.logStart = newEnd
		if err := l.checkpointLogStartLocked(); err != nil {
			return err
		}
	}
	if l.recoveryPoint > newEnd {
		l.recoveryPoint = newEnd
	}
	if err := l.checkpointRecoveryLocked(); err != nil {
		return err
	}
	if l.epochs.truncateFrom(newEnd) {
		if err := l.checkpointEpochsLocked(); err != nil {
			return err
		}
	}
	if err := l.loadProducerStateLocked(); err != nil {
		return err
	}
	return l.snapshotProducersLocked()
}

// RestartAt removes every batch and restarts the empty log at offset: the
// log start and end offsets become offset, the leader-epoch history and the
// producer state are emptied. A follower whose fetch offset fell below its
// leader's log start offset starts over there.
func (l *Log) RestartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: restart at %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.Flush(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.truncGen++
	l.maxTSValid = false
	return errors.Join(l.truncateFullyLocked(offset), l.truncateCleanerLocked(offset))
}

func (l *Log) truncateFullyLocked(offset int64) error {
	for len(l.segs) > 0 {
		l.deleteSegmentLocked(l.segs[len(l.segs)-1])
	}
	l.dropDamageLocked(func(Damage) bool { return false })
	if _, err := l.createSegmentLocked(offset); err != nil {
		return err
	}
	l.logStart, l.end, l.recoveryPoint = offset, offset, offset
	l.epochs = epochCache{}
	l.producers = newProducerState()
	l.aborted, l.txnFiles = nil, map[int64][]byte{}
	l.firstUnstable.Store(-1)
	return l.checkpointAllLocked()
}

// DeleteRecordsBefore raises the log start offset to offset (checkpointed)
// and deletes the segments wholly below it. An offset past the log end
// offset is ErrOffsetOutOfRange; one at or below the log start changes
// nothing.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset > l.end {
		return fmt.Errorf("%w: delete records before %d, log end offset %d", ErrOffsetOutOfRange, offset, l.end)
	}
	if offset <= l.logStart {
		return nil
	}
	l.logStart = offset
	if err := l.checkpointLogStartLocked(); err != nil {
		return err
	}
	for len(l.segs) > 1 && l.segs[1].base <= offset {
		l.deleteSegmentLocked(l.segs[0])
	}
	return l.afterStartMovedLocked()
}

func (l *Log) afterStartMovedLocked() error {
	l.dropDamageLocked(func(d Damage) bool { return d.To > l.logStart })
	l.producers.evictBelow(l.logStart)
	if l.epochs.truncateBefore(l.logStart) {
		return l.checkpointEpochsLocked()
	}
	return nil
}

// EnforceRetention deletes the oldest closed segments that retention.ms
// (largest timestamp older than that, by the Clock) or retention.bytes (the
// log stays at least that big without them) condemn. The active segment
// is never deleted. With Config.RemoteStorage it applies the local
// retention instead, and deletes only segments below the remote end
// (SetRemoteEnd). It returns the number of segments deleted.
func (l *Log) EnforceRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	now := l.clock.Now().UnixMilli()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	retentionMS, retentionBytes := l.cfg.RetentionMS, l.cfg.RetentionBytes
	if l.cfg.RemoteStorage {
		retentionMS, retentionBytes = l.cfg.LocalRetentionMS, l.cfg.LocalRetentionBytes
	}
	deleted := 0
	for len(l.segs) > 1 {
		seg := l.segs[0]
		if l.cfg.RemoteStorage && l.segs[1].base > l.remoteEnd {
			// Not recorded in the remote store yet: kept, however old.
			break
		}
		expired := retentionBytes >= 0 && total-seg.size >= retentionBytes
		if !expired && retentionMS >= 0 {
			ts, err := l.segRetentionTimeLocked(seg)
			if err != nil {
				return deleted, err
			}
			expired = now-ts > retentionMS
		}
		if !expired {
			break
		}
		l.logger.Info("deleting segment by retention", "segment", segmentName(seg.base, logExt), "bytes", seg.size)
		total -= seg.size
		l.deleteSegmentLocked(seg)
		deleted++
	}
	if deleted == 0 {
		return 0, nil
	}
	if start := l.segs[0].base; start > l.logStart {
		l.logStart = start
		if err := l.checkpointLogStartLocked(); err != nil {
			return deleted, err
		}
	}
	return deleted, l.afterStartMovedLocked()
}

// segMaxTSLocked returns a segment's largest batch max timestamp (-1 when
// it has none) and the relative offset of the batch holding it, reading
// only the end of the time index when the segment is not open.
func (l *Log) segMaxTSLocked(seg *segment) (int64, uint32, error) {
	if seg.maxTSKnown {
		return seg.maxTS, seg.maxTSRel, nil
	}
	if seg.size == 0 {
		seg.maxTS, seg.maxTSRel, seg.maxTSKnown = -1, 0, true
		return -1, 0, nil
	}
	_, _, timeIndexPath := segmentPaths(l.dir, seg.base)
	if f, err := l.fs.OpenFile(timeIndexPath, os.O_RDONLY, 0); err == nil {
		fi, err := f.Stat()
		var b [timeEntrySize]byte
		if err == nil && fi.Size() > 0 && fi.Size()%timeEntrySize == 0 {
			if _, err := f.ReadAt(b[:], fi.Size()-timeEntrySize); err == nil {
				seg.maxTS, seg.maxTSRel = timeEntry(b[:], 0)
				seg.maxTSKnown = true
			}
		}
		_ = f.Close()
		if seg.maxTSKnown {
			return seg.maxTS, seg.maxTSRel, nil
		}
	}
	if err := l.openSegmentLocked(seg); err != nil {
		return -1, 0, err
	}
	return seg.maxTS, seg.maxTSRel, nil
}

// segRetentionTimeLocked is the time retention.ms measures a segment by:
// its largest timestamp, or its data file's modification time when it has
// no timestamps.
func (l *Log) segRetentionTimeLocked(seg *segment) (int64, error) {
	ts, _, err := l.segMaxTSLocked(seg)
	if err != nil || ts >= 0 {
		return ts, err
	}
	fi, err := l.fs.Stat(l.path(segmentName(seg.base, logExt)))
	if err != nil {
		return 0, err
	}
	return fi.ModTime().UnixMilli(), nil
}
