package log

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// logLines collects a logger's lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// matching returns the lines containing s.
func (l *logLines) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func openHealthLog(t *testing.T, cfg Config) (*testLog, *faultfs.FS, *logLines, *StorageCounters) {
	t.Helper()
	lines := &logLines{}
	counters := &StorageCounters{}
	ffs := faultfs.New(nil)
	logger := slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return openTestLogWith(t, cfg, Options{FS: ffs, Logger: logger, Counters: counters}), ffs, lines, counters
}

func TestFullDiskIsOneIncidentWithTwoLogLines(t *testing.T) {
	tl, ffs, lines, counters := openHealthLog(t, testConfig())
	acked := tl.appendN(3, 100)
	if h := tl.Health(); h.Failing || h.TotalFailed != 0 {
		t.Fatalf("health before any failure: %+v", h)
	}

	ffs.NoSpaceAfter(".log", 10)
	start := tl.clock.Now()
	for range 50 {
		_, err := tl.Append(simpleBatch(t, 9, 2, 100, 0), 0)
		mustErr(t, err, syscall.ENOSPC)
		tl.clock.Advance(time.Second)
	}
	h := tl.Health()
	if !h.Failing || !h.Since.Equal(start) || h.Failed != 50 || h.TotalFailed != 50 {
		t.Fatalf("health while the disk is full: %+v, want failing since %v with 50 failures", h, start)
	}
	if h.Err == nil || !strings.Contains(h.Err.Error(), "no space left on device") {
		t.Fatalf("health error %v, want the write's", h.Err)
	}
	if n := counters.FailedAppends.Load(); n != 50 {
		t.Fatalf("counted %d failed appends, want 50", n)
	}
	errLines := lines.matching("level=ERROR")
	if len(errLines) != 1 || !strings.Contains(errLines[0], "no space left on device") || !strings.Contains(errLines[0], "log=topic-0") {
		t.Fatalf("error lines while failing: %q, want one naming the log and the error", errLines)
	}
	checkContents(t, tl.Log, acked)

	ffs.Clear()
	acked = append(acked, tl.appendN(2, 100)...)
	if h := tl.Health(); h.Failing || h.Err != nil || h.TotalFailed != 50 {
		t.Fatalf("health after a successful append: %+v", h)
	}
	rec := lines.matching("appends recovered")
	if len(rec) != 1 || !strings.Contains(rec[0], "failed_appends=50") || !strings.Contains(rec[0], "level=INFO") {
		t.Fatalf("recovery lines %q, want one Info line counting 50 failed appends", rec)
	}
	checkContents(t, tl.Log, acked)

	// A second incident is logged again.
	ffs.FailNextWrite(".log")
	_, err := tl.Append(simpleBatch(t, 10, 1, 100, 0), 0)
	mustErr(t, err, syscall.EIO)
	if n := len(lines.matching("level=ERROR")); n != 2 {
		t.Fatalf("%d error lines after a second incident, want 2", n)
	}
	if n := counters.Incidents.Load(); n != 2 {
		t.Fatalf("counted %d incidents, want 2", n)
	}
}

func TestRefusedBatchesAreNoStorageIncident(t *testing.T) {
	tl, _, lines, counters := openHealthLog(t, testConfig())
	idem := func(seq int32) []byte {
		return makeBatch(t, batchSpec{records: 1, valueSize: 10, idempotent: true, pid: 4, seq: seq})
	}
	tl.append(idem(0), 0)
	_, err := tl.Append(idem(5), 0)
	mustErr(t, err, ErrOutOfOrderSequence)
	err = tl.AppendAsFollower(simpleBatch(t, 1, 1, 10, 0)) // base offset 0, log end 1
	mustErr(t, err, ErrOffsetMismatch)
	if h := tl.Health(); h.Failing || h.TotalFailed != 0 || counters.FailedAppends.Load() != 0 {
		t.Fatalf("health after refused batches: %+v", h)
	}
	if l := lines.matching("level=ERROR"); len(l) != 0 {
		t.Fatalf("error lines for refused batches: %q", l)
	}
}

func TestFailedFsyncMarksTheLogFailing(t *testing.T) {
	cfg := testConfig()
	cfg.FlushPolicy = FlushInterval
	tl, ffs, _, counters := openHealthLog(t, cfg)
	tl.appendN(2, 100)
	ffs.FailNextSync(".log")
	mustErr(t, tl.Flush(), ErrFailed) // what the background flusher calls
	if h := tl.Health(); !h.Failing || h.TotalFailed != 1 {
		t.Fatalf("health after a failed fsync: %+v", h)
	}
	_, err := tl.Append(simpleBatch(t, 3, 1, 10, 0), 0)
	mustErr(t, err, ErrFailed)
	if h := tl.Health(); !h.Failing || h.TotalFailed != 2 || counters.FailedAppends.Load() != 2 {
		t.Fatalf("health after an append to the failed log: %+v", h)
	}
	mustErr(t, tl.Close(), ErrFailed)
}

func TestFollowerAppendsReportStorageFailures(t *testing.T) {
	tl, ffs, _, _ := openHealthLog(t, testConfig())
	ffs.FailNextWrite(".log")
	mustErr(t, tl.AppendAsFollower(simpleBatch(t, 1, 1, 10, 0)), syscall.EIO)
	if !tl.Health().Failing {
		t.Fatalf("follower append failure not tracked: %+v", tl.Health())
	}
	if err := tl.AppendAsFollower(simpleBatch(t, 1, 1, 10, 0)); err != nil {
		t.Fatal(err)
	}
	if tl.Health().Failing {
		t.Fatalf("still failing after a follower append succeeded: %+v", tl.Health())
	}
}
