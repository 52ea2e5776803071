package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// syncer implements group commit for FlushAlways. Every write to a segment
// gets a sequence number (Log.writeSeq). An appender waits until its
// sequence is durable; the first waiter to find no fsync in progress
// becomes the leader, fsyncs the active segment for every write made so
// far, and wakes the others. Writes that arrive during an fsync are
// covered by the next one, so N concurrent appenders share few fsyncs.
type syncer struct {
	mu       sync.Mutex
	cond     sync.Cond
	durable  uint64 // writes ≤ durable are on stable storage (unless failed)
	syncing  bool   // a leader is fsyncing
	failures []syncFailure
}

// syncFailure marks the writes in (from, to] as lost: an fsync failed and
// the log was truncated back to its last durable point.
type syncFailure struct {
	from, to uint64
	err      error
}

const maxSyncFailures = 64

func (s *syncer) failed(seq uint64) error {
	for i := len(s.failures) - 1; i >= 0; i-- {
		if f := s.failures[i]; seq > f.from && seq <= f.to {
			return f.err
		}
	}
	return nil
}

// waitDurable returns once write seq is fsynced, or with the error that
// lost it.
func (l *Log) waitDurable(seq uint64) error {
	s := &l.sync
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := s.failed(seq); err != nil {
			return err
		}
		if s.durable >= seq {
			return nil
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		s.syncing = true
		s.mu.Unlock()
		err := l.syncActive()
		s.mu.Lock()
		s.syncing = false
		s.cond.Broadcast()
		if err != nil {
			if ferr := s.failed(seq); ferr != nil {
				return ferr
			}
			if s.durable < seq {
				return err
			}
		}
	}
}

// syncActive fsyncs the active segment and marks every write made before
// it durable. On failure under FlushAlways the log is rolled back to its
// last durable point.
func (l *Log) syncActive() error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	sf := l.active().file
	sf.acquire()
	end, seq, gen, rolled := l.end, l.writeSeq, l.truncGen, l.rolledSync
	l.mu.RUnlock()
	// Segments rolled under another policy (the policy is dynamic) must
	// be on disk before the recovery point passes them.
	waitChan(rolled)
	err := sf.Sync()
	sf.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.syncFailedLocked(fmt.Errorf("fsync: %w", err))
	}
	if gen == l.truncGen {
		l.markDurableLocked(end, seq)
	}
	return nil
}

// markDurableLocked records that the log below end, and writes ≤ seq, are
// on stable storage.
func (l *Log) markDurableLocked(end int64, seq uint64) {
	if end > l.recoveryPoint {
		l.recoveryPoint = end
	}
	s := &l.sync
	s.mu.Lock()
	if seq > s.durable {
		s.durable = seq
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// syncFailedLocked handles a failed fsync. Under FlushAlways nothing after
// the last durable point was acknowledged: the log is truncated back to it
// and the waiting appends fail. Under the other policies acknowledged data
// may be lost, so the log goes into the failed state.
func (l *Log) syncFailedLocked(err error) error {
	l.logger.Error("fsync failed", "err", err)
	if l.cfg.FlushPolicy != FlushAlways {
		if l.failed == nil {
			l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
			l.appendFailed(l.failed) // appends fail from now on
		}
		return l.failed
	}
	s := &l.sync
	s.mu.Lock()
	if from, to := s.durable, l.writeSeq; to > from {
		s.failures = append(s.failures, syncFailure{from: from, to: to, err: err})
		if len(s.failures) > maxSyncFailures {
			s.failures = s.failures[len(s.failures)-maxSyncFailures:]
		}
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	if l.end > l.recoveryPoint && !l.closed {
		if terr := l.truncateLocked(l.recoveryPoint); terr != nil && l.failed == nil {
			l.failed = fmt.Errorf("%w: cannot roll back after a failed fsync: %w", ErrFailed, terr)
			l.logger.Error("log failed", "err", l.failed)
		}
	}
	return err
}

// Flush fsyncs the active segment and its indexes and advances the
// recovery point (checkpointed) to the log end offset as of the call.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.RLock()
	if err := l.writableLocked(); err != nil {
		l.mu.RUnlock()
		return err
	}
	sf := l.active().file
	sf.acquire()
	end, seq, gen, rolled := l.end, l.writeSeq, l.truncGen, l.rolledSync
	l.mu.RUnlock()
	// The recovery point may only pass segments that are on disk: those
	// rolled before end are fsynced in the background. Taken with end,
	// not before: a roll in between would be passed over unsynced.
	waitChan(rolled)
	err := sf.Sync()
	sf.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err // closed, or a rolled segment's fsync failed
	}
	if err != nil {
		return l.syncFailedLocked(fmt.Errorf("flush: %w", err))
	}
	if gen == l.truncGen {
		l.markDurableLocked(end, seq)
	}
	if err := l.flushIndexesLocked(l.active(), true); err != nil {
		return err
	}
	return l.checkpointRecoveryLocked()
}

// restartFlusher starts (or stops) the background flusher to match the
// configuration.
func (l *Log) restartFlusher() {
	l.flusherMu.Lock()
	defer l.flusherMu.Unlock()
	l.stopFlusherLocked()
	l.mu.RLock()
	cfg, closed := l.cfg, l.closed
	l.mu.RUnlock()
	if closed || cfg.FlushPolicy != FlushInterval {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	l.flusherStop, l.flusherDone = stop, done
	ticker := l.clock.NewTicker(cfg.FlushInterval)
	go func() {
		defer close(done)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C():
				if err := l.Flush(); err != nil && !errors.Is(err, ErrClosed) {
					l.logger.Error("background flush failed", "err", err)
				}
			}
		}
	}()
}

func (l *Log) stopFlusherLocked() {
	if l.flusherStop != nil {
		close(l.flusherStop)
		<-l.flusherDone
		l.flusherStop, l.flusherDone = nil, nil
	}
}

// SetConfig changes the configuration. Segment size and age apply from the
// next append, retention from the next EnforceRetention, the flush policy
// at once.
func (l *Log) SetConfig(cfg Config) {
	cfg = cfg.normalized()
	l.mu.Lock()
	old := l.cfg
	l.cfg = cfg
	l.mu.Unlock()
	if old.FlushPolicy != cfg.FlushPolicy || old.FlushInterval != cfg.FlushInterval {
		l.restartFlusher()
	}
}

// Close flushes the log, checkpoints its recovery point (which becomes
// the log end offset) and leader-epoch history, and the active segment's
// indexes and the producer state when the next Open would otherwise walk
// more than walkBytes of batch headers (checkpointForOpenLocked), and
// closes its files. Regions still held stay readable until released.
// Closing twice returns nil.
func (l *Log) Close() error {
	l.flusherMu.Lock()
	l.stopFlusherLocked()
	l.flusherMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	err := l.failed
	if err == nil {
		err = l.closeFlushLocked()
	}
	if err == nil {
		l.recordCleanCloseLocked()
	}
	l.closeFilesLocked()
	l.closed = true
	l.sync.mu.Lock()
	l.sync.cond.Broadcast()
	l.sync.mu.Unlock()
	l.mu.Unlock()
	l.rolledWG.Wait() // background roll fsyncs see closed and stop
	return err
}

func (l *Log) closeFlushLocked() error {
	if err := l.syncRolledPendingLocked(); err != nil {
		return l.syncFailedLocked(fmt.Errorf("close: %w", err))
	}
	act := l.active()
	// In a batch (SyncBatch.Add) its Commit makes the data durable, and
	// no append waits for it: they fail with ErrClosed.
	batched := l.batched()
	if !batched {
		if err := act.file.Sync(); err != nil {
			return l.syncFailedLocked(fmt.Errorf("close: %w", err))
		}
		l.markDurableLocked(l.end, l.writeSeq)
	}
	if batched {
		// The recovery point moves to the end at Commit.
		l.recoveryPoint = l.end
	}
	if l.ckpts == nil {
		// A leader's epoch begun since the last checkpoint, at the end.
		if err := l.checkpointEpochsLocked(); err != nil {
			return err
		}
	}
	return l.checkpointForOpenLocked()
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if errors.Is(cerr, ErrFailed) {
		cerr = nil
	}
	// A high-water mark checkpoint in flight finishes before the files go;
	// later ones see the log closed.
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if l.ckpts != nil {
		l.ckpts.Forget(filepath.Base(l.dir))
	}
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return errors.Join(cerr, err)
	}
	for _, e := range entries {
		l.files.retire(l.segFiles, l.path(e.Name())) // Regions may still read a segment
		if err := l.fs.Remove(l.path(e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(cerr, err)
		}
	}
	return errors.Join(cerr, l.fs.Remove(l.dir))
}

// rollAsyncLocked rolls the active segment without waiting for its fsync:
// its indexes are written (not fsynced) now, and syncRolled fsyncs the data
// and index files in the background, then advances and checkpoints the
// recovery point to where the segment ends.
func (l *Log) rollAsyncLocked() error {
	old := l.active()
	if l.ckptRecovery < 0 {
		// The first roll: a closed segment without a recovery point
		// checkpoint is taken for fsynced (see noCheckpoint).
		if err := l.checkpointRecoveryLocked(); err != nil {
			return err
		}
	}
	old.sealIndexes()
	if err := l.flushIndexesLocked(old, false); err != nil {
		return err
	}
	end, seq, gen := l.end, l.writeSeq, l.truncGen
	if _, err := l.createSegmentLocked(end); err != nil {
		return err
	}
	// The roll has happened: the old segment's fsync is queued before
	// anything else can fail, or a later Flush would move the recovery
	// point past its data unsynced.
	old.sealedSize = old.size
	sf := old.file
	sf.acquire() // held until fsynced, even when evicted or deleted meanwhile
	l.rolledPending = append(l.rolledPending, sf)
	prev, done := l.rolledSync, make(chan struct{})
	l.rolledSync = done
	l.rolledWG.Add(1)
	go l.syncRolled(old.base, sf, end, seq, gen, prev, done)
	l.openClosed = append(l.openClosed, old)
	l.evictLocked()
	l.logger.Debug("rolled segment", "segment", segmentName(end, logExt))
	return errors.Join(l.checkpointSealedLocked(), l.snapshotProducersLocked())
}

// syncRolled fsyncs a rolled segment (data file sf, indexes by name) after
// the previous rolled segment's fsync (prev) is done, then marks the log
// below end durable. A failure puts the log in the failed state, as a
// failed fsync under these policies may have lost acknowledged data.
func (l *Log) syncRolled(base int64, sf *SegmentFile, end int64, seq, gen uint64, prev, done chan struct{}) {
	defer l.rolledWG.Done()
	defer close(done)
	if prev != nil {
		<-prev
	}
	err := sf.Sync()
	if err == nil {
		_, indexPath, timeIndexPath := segmentPaths(l.dir, base)
		err = errors.Join(l.syncPath(indexPath), l.syncPath(timeIndexPath))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.rolledPending, sf); i >= 0 {
		l.rolledPending = slices.Delete(l.rolledPending, i, i+1)
		sf.release()
	}
	if l.closed {
		return // Close fsynced it (or the log failed before)
	}
	if err != nil {
		l.syncFailedLocked(fmt.Errorf("roll %s: %w", segmentName(base, logExt), err))
		return
	}
	if gen != l.truncGen {
		return // truncated meanwhile: the recovery point is not ours to move
	}
	l.markDurableLocked(end, seq)
	if err := l.checkpointRecoveryLocked(); err != nil {
		l.logger.Error("checkpoint after roll failed", "err", err)
	}
}

// syncPath fsyncs the file at path; a file deleted meanwhile (retention)
// needs none.
func (l *Log) syncPath(path string) error {
	f, err := l.fs.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// waitRolled waits for the fsyncs of the segments rolled so far. Called
// without mu.
func (l *Log) waitRolled() {
	l.mu.RLock()
	ch := l.rolledSync
	l.mu.RUnlock()
	waitChan(ch)
}

// waitChan waits for ch to be closed; nil is closed.
func waitChan(ch chan struct{}) {
	if ch != nil {
		<-ch
	}
}

// syncRolledPendingLocked fsyncs, in the caller, the rolled segments whose
// background fsync has not finished, for Close.
func (l *Log) syncRolledPendingLocked() error {
	for _, sf := range l.rolledPending {
		if err := sf.Sync(); err != nil {
			return err
		}
	}
	return nil
}
