package log

import (
	"errors"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// StorageCounters count the storage failures of the logs opened with them
// (Options.Counters): typically one set per log directory, shared by its
// partitions. The counts only grow, for as long as the value lives, so a
// metrics registry can read them as counters. Safe for concurrent use.
type StorageCounters struct {
	// FailedAppends counts appends that failed to write: a full disk, an
	// I/O error, a failed fsync, or a log in the failed state.
	FailedAppends atomic.Uint64
	// Incidents counts the times a log went from appending to failing.
	Incidents atomic.Uint64
	// DamagedRanges counts the damaged ranges found (see Damage).
	DamagedRanges atomic.Uint64
}

// Health is the state of a log's appends, from Log.Health.
type Health struct {
	// Failing is set from a failed append until the next append that
	// succeeds (for a log in the failed state, until it is reopened).
	Failing bool
	// Since is when the first append of the incident failed, by the
	// log's clock; zero when not Failing.
	Since time.Time
	// Err is the error of the last failed append, and LastFailure when it
	// failed, while Failing.
	Err         error
	LastFailure time.Time
	// Failed counts the failed appends of the incident, while Failing.
	Failed uint64
	// TotalFailed counts the failed appends since the log was opened.
	TotalFailed uint64
}

// health tracks the storage incidents of a log's appends. An incident
// starts with an append that fails to write after one that succeeded (or
// after Open) and ends with the next append that succeeds. Each one gets
// two log lines: an Error when it starts, an Info when it ends with how
// many appends failed meanwhile; the failures in between are only counted,
// so a full disk under a steady stream of retries does not flood the log.
type health struct {
	failing atomic.Bool // mirrors state.failing, for the appends' fast path

	mu    sync.Mutex
	state Health
}

// storageError tells an error of the storage (the file system refused or
// failed an operation, or the log is in the failed state) from the
// refusals of a batch or of its producer, which say nothing of the disk.
func storageError(err error) bool {
	var pathErr *fs.PathError
	var errno syscall.Errno
	return errors.Is(err, ErrFailed) || errors.As(err, &pathErr) || errors.As(err, &errno) ||
		errors.Is(err, io.ErrShortWrite)
}

// observeAppend records the outcome of an append.
func (l *Log) observeAppend(err error) {
	if err == nil {
		if l.health.failing.Load() {
			l.appendRecovered()
		}
		return
	}
	if storageError(err) {
		l.appendFailed(err)
	}
}

// appendFailed counts a failed write and starts an incident when none is
// under way.
func (l *Log) appendFailed(err error) {
	h := &l.health
	h.mu.Lock()
	now := l.clock.Now()
	first := !h.state.Failing
	if first {
		h.state.Failing, h.state.Since, h.state.Failed = true, now, 0
		h.failing.Store(true)
	}
	h.state.Err, h.state.LastFailure = err, now
	h.state.Failed++
	h.state.TotalFailed++
	h.mu.Unlock()
	if c := l.counters; c != nil {
		c.FailedAppends.Add(1)
		if first {
			c.Incidents.Add(1)
		}
	}
	if first {
		l.logger.Error("appends failing; producers get KAFKA_STORAGE_ERROR until a write succeeds", "err", err)
	}
}

// appendRecovered ends the incident under way.
func (l *Log) appendRecovered() {
	h := &l.health
	h.mu.Lock()
	if !h.state.Failing {
		h.mu.Unlock()
		return
	}
	since, failed := h.state.Since, h.state.Failed
	h.state = Health{TotalFailed: h.state.TotalFailed}
	h.failing.Store(false)
	h.mu.Unlock()
	l.logger.Info("appends recovered", "failed_appends", failed,
		"failing_for", l.clock.Now().Sub(since).Round(time.Millisecond).String())
}

// Health returns the state of the log's appends.
func (l *Log) Health() Health {
	l.health.mu.Lock()
	defer l.health.mu.Unlock()
	return l.health.state
}
