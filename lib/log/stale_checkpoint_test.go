package log

import (
	"fmt"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// A truncation into an earlier segment leaves sealed-segments listing the
// segments it deleted. When the log regrows past their offsets in the
// segment it cut (other batches, fewer bytes per offset) and a crash hits
// the roll after the new segment was created but before sealed-segments
// was rewritten, Open takes the stale file for this log's: a "missing"
// segment is damage over offsets the log holds whole.
func TestTruncationRewritesSealedSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	cfg.FlushPolicy = FlushAlways
	// prepare builds the log up to the append that rolls, and returns
	// the file system and the log, open.
	prepare := func() (*crashfs.FS, *Log, int64) {
		fsys := crashfs.New(crashfs.Strict, 1)
		l, err := Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatal(err)
		}
		ts := testStart.UnixMilli()
		// Big one-record batches: segments of a few offsets each.
		for i := 0; l.NumSegments() < 3; i++ {
			if _, err := l.Append(simpleBatch(t, uint64(i), 1, 900, ts), 0); err != nil {
				t.Fatal(err)
			}
		}
		seg1 := l.segs[1].base
		if err := l.TruncateTo(1); err != nil { // into segment 0: segments 1 and 2 go
			t.Fatal(err)
		}
		// Small ten-record batches: segment 0 now reaches past seg1.
		for i := 0; l.EndOffset() < seg1+20; i++ {
			if _, err := l.Append(simpleBatch(t, uint64(100+i), 10, 5, ts), 0); err != nil {
				t.Fatal(err)
			}
		}
		if l.NumSegments() != 1 {
			t.Fatalf("%d segments before the roll", l.NumSegments())
		}
		return fsys, l, seg1
	}
	// How many operations up to the end of the append that rolls.
	fsys, l, seg1 := prepare()
	start := fsys.Ops()
	ts := testStart.UnixMilli()
	rolls := func(l *Log) error {
		for i := 0; l.NumSegments() < 2; i++ {
			if _, err := l.Append(simpleBatch(t, uint64(1000+i), 10, 5, ts), 0); err != nil {
				return err
			}
		}
		return nil
	}
	if err := rolls(l); err != nil {
		t.Fatal(err)
	}
	total := fsys.Ops() - start
	abandon(l)
	t.Logf("old segment 1 at %d; %d operations up to the roll", seg1, total)
	for n := range total + 1 {
		fsys, l, _ := prepare()
		fsys.CrashAfter(n)
		_ = rolls(l)
		crashed := fsys.Crashed()
		abandon(l)
		if crashed == nil {
			crashed = fsys.Crash()
		}
		r, err := Open(powerLossDir, cfg, Options{FS: crashed, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatal(err)
		}
		d := r.Damaged()
		var readErr error
		if r.EndOffset() > seg1 {
			_, readErr = r.ReadBytes(seg1, r.EndOffset(), 1<<20)
		}
		_ = r.Close()
		if len(d) > 0 || readErr != nil {
			t.Fatalf("crash after %d of %d operations of the roll: damage %v, read at %d: %v", n, total, d, seg1, readErr)
		}
	}
}

// The cleaner checkpoint says which offsets were cleaned, and when. Open
// clips it to the log in memory only: a checkpoint left past the log end
// (a crash between a truncation's cut and its cleaner checkpoint) is
// taken for this log's again once the log regrew past it, and the
// tombstones appended there since count as cleaned long ago: the next
// pass removes them without their delete retention.
func TestCleanerCheckpointPastTheLogEndIsRewritten(t *testing.T) {
	cfg := cleanConfig()
	ts := testStart.UnixMilli()
	t0 := testStart.Add(time.Minute)
	retention := time.Hour
	fsys := crashfs.New(crashfs.Strict, 1)
	l, err := Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := l.Append(kvBatch(t, ts, put(fmt.Sprintf("k%d", i%5), "value")), 0); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, l)
	first := mustClean(t, l, CleanOptions{Now: t0, DeleteRetention: retention})
	res := first
	t.Logf("first pass: %+v", res)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	base := fsys.Crash()
	// How many operations TruncateTo takes.
	fsys = base.Crash()
	l, err = Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
	if err != nil {
		t.Fatal(err)
	}
	start := fsys.Ops()
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	total := fsys.Ops() - start
	abandon(l)
	for n := range total + 1 {
		fsys := base.Crash()
		l, err := Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatal(err)
		}
		fsys.CrashAfter(n)
		_ = l.TruncateTo(5)
		crashed := fsys.Crashed()
		abandon(l)
		if crashed == nil {
			crashed = fsys.Crash()
		}
		tl := &testLog{t: t, dir: powerLossDir, cfg: cfg, opts: Options{FS: crashed, Clock: clock.NewManual(testStart)}}
		tl.open()
		cut := tl.EndOffset()
		if cut >= res.CleanedTo {
			abandon(tl.Log)
			continue // the crash came before the cut
		}
		// Regrow: a tombstone at the cut, then enough to push it out of
		// the active segment.
		tl.append(kvBatch(t, ts, tomb("k1")), 0)
		for i := range 60 {
			tl.append(kvBatch(t, ts, put(fmt.Sprintf("x%d", i%5), "value")), 0)
		}
		tl.reopen()
		// The tombstone was never cleaned: the first pass that cleans it
		// keeps it for the delete retention.
		res := mustClean(t, tl.Log, CleanOptions{Now: t0.Add(retention + time.Minute), DeleteRetention: retention})
		tl.Close()
		if res.TombstonesRemoved != 0 {
			t.Fatalf("crash after %d of %d operations of TruncateTo: the first pass over the tombstone at %d removed it: %+v", n, total, cut, res)
		}
	}
}
