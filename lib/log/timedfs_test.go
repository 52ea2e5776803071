package log

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestTimedFSReportsEveryFsync: a log on a TimedFS reports its fsyncs
// (segment, checkpoints, directories) and still serves zero-copy reads.
func TestTimedFSReportsEveryFsync(t *testing.T) {
	var syncs atomic.Int64
	fs := TimedFS(nil, func(d time.Duration) {
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
