package log

import (
	"testing"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// A high-water mark checkpointed by a log in a batch (as a broker's
// shutdown does) is the old one after a power loss before the batch
// commits, and the new one after.
func TestHighWatermarkInABatchIsDurableOnceCommitted(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 1)
	opts := Options{FS: fsys, Clock: clock.NewManual(testStart)}
	l, err := Open(powerLossDir, testConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.CheckpointHighWatermark(3); err != nil {
		t.Fatal(err)
	}
	batch := NewSyncBatch(fsys, "/")
	if batch == nil {
		t.Fatal("no batch on a crashfs.FS")
	}
	batch.Add(l)
	if err := l.CheckpointHighWatermark(7); err != nil {
		t.Fatal(err)
	}
	reopen := func(fs *crashfs.FS) int64 {
		t.Helper()
		l, err := Open(powerLossDir, testConfig(), Options{FS: fs, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.HighWatermarkCheckpoint()
	}
	if hw := reopen(fsys.Crash()); hw != 3 {
		t.Fatalf("power loss before the commit: high-water mark checkpoint %d, want the old 3", hw)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if hw := reopen(fsys.Crash()); hw != 7 {
		t.Fatalf("power loss after the commit: high-water mark checkpoint %d, want 7", hw)
	}
	// After the commit the log checkpoints on its own again.
	if err := l.CheckpointHighWatermark(9); err != nil {
		t.Fatal(err)
	}
	if hw := reopen(fsys.Crash()); hw != 9 {
		t.Fatalf("after the batch: high-water mark checkpoint %d, want 9", hw)
	}
}
