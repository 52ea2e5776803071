package log

import (
	"errors"
	"syscall"
	"testing"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

func openFaultLog(t *testing.T, cfg Config) (*testLog, *faultfs.FS) {
	t.Helper()
	ffs := faultfs.New(nil)
	clock := clock.NewManual(testStart)
	tl := &testLog{t: t, dir: t.TempDir() + "/topic-0", cfg: cfg, clock: clock, opts: Options{Clock: clock, FS: ffs}}
	tl.open()
	t.Cleanup(func() {
		if tl.Log != nil {
			tl.Log.Close()
		}
	})
	return tl, ffs
}

func TestDiskFaultsLoseNothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy FlushPolicy
		inject func(ffs *faultfs.FS, batch []byte)
		sticky bool // the fault stays until Clear
		errIs  error
	}{
		{"failing write", FlushOS, func(ffs *faultfs.FS, _ []byte) { ffs.FailNextWrite(".log") }, false, syscall.EIO},
		{"short write", FlushOS, func(ffs *faultfs.FS, b []byte) { ffs.ShortNextWrite(".log", len(b)/3) }, false, syscall.EIO},
		{"no space in the middle of a batch", FlushOS, func(ffs *faultfs.FS, b []byte) { ffs.NoSpaceAfter(".log", int64(len(b)/2)) }, true, syscall.ENOSPC},
		{"no space under flush always", FlushAlways, func(ffs *faultfs.FS, b []byte) { ffs.NoSpaceAfter(".log", 7) }, true, syscall.ENOSPC},
		{"failing fsync under flush always", FlushAlways, func(ffs *faultfs.FS, _ []byte) { ffs.FailNextSync(".log") }, false, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 4000
			cfg.FlushPolicy = tc.policy
			tl, ffs := openFaultLog(t, cfg)
			acked := tl.appendN(20, 150)
			end := tl.EndOffset()
			b := simpleBatch(t, 77, 3, 150, 0)
			tc.inject(ffs, b)
			_, err := tl.Append(b, 0)
			if !errors.Is(err, tc.errIs) {
				t.Fatalf("append error %v, want %v", err, tc.errIs)
			}
			if tl.EndOffset() != end {
				t.Fatalf("end offset %d after a failed append, want %d", tl.EndOffset(), end)
			}
			checkContents(t, tl.Log, acked)
			if tc.sticky {
				_, err := tl.Append(simpleBatch(t, 78, 1, 10, 0), 0)
				mustErr(t, err, tc.errIs)
				ffs.Clear()
			}
			acked = append(acked, tl.appendN(5, 150)...)
			checkContents(t, tl.Log, acked)
			tl.Close()
			tl.opts.FS = nil
			tl.open()
			checkContents(t, tl.Log, acked)
		})
	}
}

func TestFailedUndoPutsTheLogInFailedState(t *testing.T) {
	tl, ffs := openFaultLog(t, testConfig())
	acked := tl.appendN(5, 100)
	ffs.ShortNextWrite(".log", 20)
	ffs.FailNextTruncate(".log")
	_, err := tl.Append(simpleBatch(t, 1, 1, 100, 0), 0)
	mustErr(t, err, syscall.EIO)
	_, err = tl.Append(simpleBatch(t, 2, 1, 100, 0), 0)
	mustErr(t, err, ErrFailed)
	checkContents(t, tl.Log, acked) // reads still work
	mustErr(t, tl.Close(), ErrFailed)
	tl.opts.FS = nil
	tl.open() // recovery drops the partial write
	checkContents(t, tl.Log, acked)
}

func TestFsyncFailureUnderFlushOSFailsTheLog(t *testing.T) {
	tl, ffs := openFaultLog(t, testConfig())
	acked := tl.appendN(5, 100)
	ffs.FailNextSync(".log")
	mustErr(t, tl.Flush(), ErrFailed)
	_, err := tl.Append(simpleBatch(t, 2, 1, 100, 0), 0)
	mustErr(t, err, ErrFailed)
	checkContents(t, tl.Log, acked)
}

func TestFsyncFailureFailsEveryWaitingAppend(t *testing.T) {
	cfg := testConfig()
	cfg.FlushPolicy = FlushAlways
	tl, ffs := openFaultLog(t, cfg)
	acked := tl.appendN(3, 100)
	ffs.Inject(faultfs.Fault{Op: faultfs.OpSync, Suffix: ".log", Times: 3})
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := tl.Append(simpleBatch(t, uint64(100+i), 1, 50, 0), 0)
			errs <- err
		}()
	}
	var ok int
	for range n {
		if err := <-errs; err == nil {
			ok++
		} else if !errors.Is(err, syscall.EIO) {
			t.Fatalf("append: %v", err)
		}
	}
	// Whatever succeeded is durable and in the log; whatever failed is not.
	end := tl.EndOffset()
	if want := acked[len(acked)-1].last + 1 + int64(ok); end != want {
		t.Fatalf("end %d with %d successful appends, want %d", end, ok, want)
	}
	if tl.RecoveryPoint() != end {
		t.Fatalf("recovery point %d, end %d", tl.RecoveryPoint(), end)
	}
	ffs.Clear()
	for _, a := range acked {
		if got, err := tl.ReadBytes(a.base, end, 1); err != nil || string(got) != string(a.bytes) {
			t.Fatalf("batch %d lost: %v", a.base, err)
		}
	}
	tl.appendN(2, 10)
	end = tl.EndOffset()
	tl.Close()
	tl.opts.FS = nil
	tl.open()
	if tl.EndOffset() != end {
		t.Fatalf("end %d after reopen, want %d", tl.EndOffset(), end)
	}
}

// A roll whose sealed-segments write fails has made the new segment the
// active one: the old segment's background fsync must still be queued, or
// the next Flush moves the recovery point past data never fsynced, which
// a power loss then takes with it below the recovery point.
func TestFailedSealedWriteStillSyncsTheRolledSegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	crash := crashfs.New(crashfs.Strict, 1)
	fsys := faultfs.New(crash)
	l, err := Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
	if err != nil {
		t.Fatal(err)
	}
	ts := testStart.UnixMilli()
	fsys.FailNextWrite(sealedFile + vfs.TempSuffix)
	for i := 0; l.NumSegments() < 2; i++ {
		if _, err := l.Append(simpleBatch(t, uint64(i), 1, 900, ts), 0); err != nil {
			t.Logf("append %d: %v", i, err)
		}
	}
	if _, err := l.Append(simpleBatch(t, 99, 1, 900, ts), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	abandon(l)
	r, err := Open(powerLossDir, cfg, Options{FS: crash.Crash(), Clock: clock.NewManual(testStart)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.ReadBytes(0, r.EndOffset(), 1<<20); err != nil || r.EndOffset() < rp || len(r.Damaged()) > 0 {
		t.Fatalf("recovery point was %d; after a power loss: end %d, damage %v, read from 0: %v", rp, r.EndOffset(), r.Damaged(), err)
	}
}
