package log

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/vfs"
)

// TestTimedFSReportsEveryFsync: a log on a TimedFS reports its fsyncs
// (segment, checkpoints, directories) and still serves zero-copy reads.
func TestTimedFSReportsEveryFsync(t *testing.T) {
	var syncs atomic.Int64
	fs := vfs.Timed(nil, func(d time.Duration) {
		if d < 0 {
			t.Errorf("negative fsync duration %v", d)
		}
		syncs.Add(1)
	})
	tl := openTestLogWith(t, Config{}, Options{FS: fs})
	opened := syncs.Load()
	if opened == 0 {
		t.Error("opening a log reported no fsync (its directory is fsynced)")
	}
	tl.appendN(3, 10)
	if err := tl.Flush(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() == opened {
		t.Error("Flush reported no fsync")
	}
	r, err := tl.Read(0, tl.EndOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if _, err := r.File().AcquireFile(); err != nil {
		t.Errorf("a Region of a TimedFS log has no *os.File (%v): sendfile would be lost", err)
	} else {
		r.File().ReleaseFile()
	}
}

// TestTruncateAtTheEndSyncsNothing: a cut at or past the log end removes
// no batch and fsyncs nothing (a follower agreeing with its new leader,
// thousands of partitions at once after a restart), while a cut that
// removes batches still flushes the writes in flight first.
func TestTruncateAtTheEndSyncsNothing(t *testing.T) {
	var syncs atomic.Int64
	fs := vfs.Timed(nil, func(time.Duration) { syncs.Add(1) })
	tl := openTestLogWith(t, Config{}, Options{FS: fs})
	tl.appendN(3, 10)
	end := tl.EndOffset()
	before := syncs.Load()
	for _, at := range []int64{end, end + 5} {
		if err := tl.TruncateTo(at); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs.Load() - before; n != 0 {
		t.Errorf("truncating at and past the log end: %d fsyncs, want none", n)
	}
	if tl.EndOffset() != end {
		t.Fatalf("end %d after truncating at the end, want %d", tl.EndOffset(), end)
	}
	if err := tl.TruncateTo(end - 1); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() == before {
		t.Error("a cut that removes a batch fsynced nothing")
	}
}
