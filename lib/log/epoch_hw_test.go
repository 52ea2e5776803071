package log

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mqproject/mq/lib/vfs/crashfs"
)

func TestBeginEpochAnswersForALeaderThatWroteNothing(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.append(simpleBatch(t, 1, 3, 10, 1000), 1) // epoch 1: offsets 0..2
	if err := tl.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	want := []EpochEntry{{1, 0}, {3, 3}}
	if got := tl.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	// A follower that was leader in epoch 2 asks about it: epoch 1 ended at 3.
	if end, epoch := tl.EndOffsetForEpoch(2); end != 3 || epoch != 1 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d; want 3, 1", end, epoch)
	}
	if end, epoch := tl.EndOffsetForEpoch(3); end != 3 || epoch != 3 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d; want 3, 3", end, epoch)
	}
	// Not newer: nothing changes. Appending in the begun epoch adds no entry.
	if err := tl.BeginEpoch(2); err != nil {
		t.Fatal(err)
	}
	tl.append(simpleBatch(t, 2, 2, 10, 1001), 3)
	if err := tl.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	if got := tl.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if tl.LatestEpoch() != 3 {
		t.Fatalf("LatestEpoch %d, want 3", tl.LatestEpoch())
	}
}

// TestRecoveryDropsAnEmptyBegunEpoch: recovery cannot tell an epoch begun
// with nothing in it from one whose first batch a crash lost, and drops
// both; the leader begins its epoch again after a restart.
func TestRecoveryDropsAnEmptyBegunEpoch(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "clean"
		if crash {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) {
			tl := openTestLog(t, testConfig())
			tl.append(simpleBatch(t, 1, 3, 10, 1000), 1)
			if err := tl.BeginEpoch(4); err != nil {
				t.Fatal(err)
			}
			if crash {
				tl.crash()
				tl.open()
			} else {
				tl.reopen()
			}
			if got, want := tl.LeaderEpochs(), []EpochEntry{{1, 0}}; !slices.Equal(got, want) {
				t.Fatalf("history after restart %v, want %v", got, want)
			}
		})
	}
}

func TestTruncationDropsABegunEpoch(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.append(simpleBatch(t, 1, 3, 10, 1000), 1)
	tl.append(simpleBatch(t, 2, 2, 10, 1000), 2) // offsets 3..4
	if err := tl.BeginEpoch(5); err != nil {
		t.Fatal(err)
	}
	if err := tl.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if got, want := tl.LeaderEpochs(), []EpochEntry{{1, 0}}; !slices.Equal(got, want) {
		t.Fatalf("history after truncation %v, want %v", got, want)
	}
}

func TestRestartAtEmptiesTheLog(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(5, 100)
	if err := tl.RestartAt(40); err != nil {
		t.Fatal(err)
	}
	check := func(label string) {
		t.Helper()
		if tl.StartOffset() != 40 || tl.EndOffset() != 40 || len(tl.LeaderEpochs()) != 0 {
			t.Fatalf("%s: start %d end %d epochs %v; want 40, 40, none", label, tl.StartOffset(), tl.EndOffset(), tl.LeaderEpochs())
		}
	}
	check("after RestartAt")
	tl.reopen()
	check("after reopen")
	b := simpleBatch(t, 9, 2, 10, 1000)
	if res, err := tl.Append(b, 7); err != nil || res.BaseOffset != 40 {
		t.Fatalf("append after RestartAt: %+v, %v; want base 40", res, err)
	}
}

func TestHighWatermarkCheckpoint(t *testing.T) {
	tl := openTestLog(t, testConfig())
	if got := tl.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("fresh log: HighWatermarkCheckpoint %d, want -1", got)
	}
	tl.appendN(3, 10)
	if err := tl.CheckpointHighWatermark(2); err != nil {
		t.Fatal(err)
	}
	if got := tl.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("HighWatermarkCheckpoint %d before reopen, want the value at Open (-1)", got)
	}
	b, err := os.ReadFile(filepath.Join(tl.dir, highWatermarkFile))
	if err != nil || string(b) != "mq high-water-mark 1\n2\n" {
		t.Fatalf("checkpoint file %q, %v", b, err)
	}
	tl.reopen()
	if got := tl.HighWatermarkCheckpoint(); got != 2 {
		t.Fatalf("after reopen: HighWatermarkCheckpoint %d, want 2", got)
	}
	if err := tl.CheckpointHighWatermark(-1); err == nil {
		t.Fatal("negative high-water mark checkpointed")
	}
	// An unreadable checkpoint is ignored: no high-water mark.
	if err := os.WriteFile(filepath.Join(tl.dir, highWatermarkFile), []byte("mq high-water-mark 1\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tl.reopen()
	if got := tl.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("bad checkpoint: HighWatermarkCheckpoint %d, want -1", got)
	}
	tl.Close()
	if err := tl.CheckpointHighWatermark(3); err == nil {
		t.Fatal("checkpoint after Close succeeded")
	}
}

// TestHighWatermarkCheckpointSurvivesPowerLoss: once CheckpointHighWatermark
// returns, a power loss keeps the value.
func TestHighWatermarkCheckpointSurvivesPowerLoss(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 1)
	cfg := testConfig()
	l, err := Open(powerLossDir, cfg, Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(simpleBatch(t, uint64(i), 2, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, hw := range []int64{2, 4, 6} {
		if err := l.CheckpointHighWatermark(hw); err != nil {
			t.Fatal(err)
		}
	}
	abandon(l)
	l, err = Open(powerLossDir, cfg, Options{FS: fsys.Crash()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.HighWatermarkCheckpoint(); got != 6 {
		t.Fatalf("after power loss: HighWatermarkCheckpoint %d, want 6", got)
	}
}

func TestTruncateAtTheEndDropsABegunEpoch(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.append(simpleBatch(t, 1, 3, 10, 1000), 1)
	if err := tl.BeginEpoch(2); err != nil {
		t.Fatal(err)
	}
	if err := tl.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if got, want := tl.LeaderEpochs(), []EpochEntry{{1, 0}}; !slices.Equal(got, want) || tl.EndOffset() != 3 {
		t.Fatalf("history %v end %d, want %v end 3", got, tl.EndOffset(), want)
	}
	tl.reopen()
	if got, want := tl.LeaderEpochs(), []EpochEntry{{1, 0}}; !slices.Equal(got, want) {
		t.Fatalf("history after reopen %v, want %v", got, want)
	}
}
