package log

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// openCkptLog opens the log name under root with the checkpoints c.
func openCkptLog(t *testing.T, fsys vfs.FS, root, name string, c *Checkpoints) *Log {
	t.Helper()
	l, err := Open(filepath.Join(root, name), testConfig(), Options{FS: fsys, Checkpoints: c})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func openCkpts(t *testing.T, fsys vfs.FS, root string) *Checkpoints {
	t.Helper()
	c, err := OpenCheckpoints(fsys, filepath.Join(root, "log-checkpoints"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writtenHighWatermark opens the log t-0 under root with new Checkpoints,
// checkpoints the high-water mark hw and writes the Checkpoints.
func writtenHighWatermark(t *testing.T, root string, hw int64) (*Checkpoints, *Log) {
	t.Helper()
	c := openCkpts(t, nil, root)
	l := openCkptLog(t, nil, root, "t-0", c)
	if err := l.CheckpointHighWatermark(hw); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	return c, l
}

// TestCheckpointsShareOneFile: logs opened with Checkpoints keep their
// recovery point, leader-epoch history and high-water mark in its one
// file and none in their directories, which hold their segment files
// only, and read them back at the next Open once it was written.
func TestCheckpointsShareOneFile(t *testing.T) {
	root := t.TempDir()
	c := openCkpts(t, nil, root)
	a, b := openCkptLog(t, nil, root, "t-0", c), openCkptLog(t, nil, root, "t-1", c)
	for i, l := range []*Log{a, b} {
		if got := l.HighWatermarkCheckpoint(); got != -1 {
			t.Fatalf("new log %d: checkpoint %d, want -1", i, got)
		}
		if err := l.BeginEpoch(int32(i + 1)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := l.Append(simpleBatch(t, uint64(i), 2, 10, 1000), int32(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.CheckpointHighWatermark(int64(2 * (i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "log-checkpoints")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checkpoints were written before Write: %v", err)
	}
	for _, l := range []*Log{a, b} {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t-0", "t-1"} {
		for _, f := range segmentFiles(t, filepath.Join(root, name)) {
			if !strings.HasSuffix(f, logExt) {
				t.Errorf("%s holds %s beside its segment", name, f)
			}
		}
	}
	c = openCkpts(t, nil, root)
	for _, name := range []string{"t-0", "t-1"} {
		if e, _ := c.get(name); e.recoveryPoint != 6 {
			t.Errorf("%s: recovery point %d in the file, want 6", name, e.recoveryPoint)
		}
	}
	a, b = openCkptLog(t, nil, root, "t-0", c), openCkptLog(t, nil, root, "t-1", c)
	defer a.Close()
	defer b.Close()
	for i, l := range []*Log{a, b} {
		if got, want := l.HighWatermarkCheckpoint(), int64(2*(i+1)); got != want {
			t.Errorf("log %d: high-water mark %d after reopen, want %d", i, got, want)
		}
		if got, want := l.LeaderEpochs(), []EpochEntry{{Epoch: int32(i + 1), StartOffset: 0}}; !slices.Equal(got, want) {
			t.Errorf("log %d: leader epochs %v after reopen, want %v", i, got, want)
		}
	}
}

// TestCheckpointsLoweredAreWrittenAtOnce: a power loss keeps what the
// last Write wrote of a raised high-water mark, and a lowered one (a
// truncation) even without a Write, so that a restart never finds the
// log below a mark the replica no longer had.
func TestCheckpointsLoweredAreWrittenAtOnce(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 1)
	root := "/data"
	c := openCkpts(t, fsys, root)
	l := openCkptLog(t, fsys, root, "t-0", c)
	if err := l.CheckpointHighWatermark(6); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckpointHighWatermark(9); err != nil { // raised, not written
		t.Fatal(err)
	}
	fsys = fsys.Crash()
	c = openCkpts(t, fsys, root)
	l = openCkptLog(t, fsys, root, "t-0", c)
	if got := l.HighWatermarkCheckpoint(); got != 6 {
		t.Fatalf("after power loss: checkpoint %d, want the written 6", got)
	}
	if err := l.CheckpointHighWatermark(4); err != nil { // lowered: written at once
		t.Fatal(err)
	}
	fsys = fsys.Crash()
	l = openCkptLog(t, fsys, root, "t-0", openCkpts(t, fsys, root))
	defer l.Close()
	if got := l.HighWatermarkCheckpoint(); got != 4 {
		t.Fatalf("after lowering and power loss: checkpoint %d, want 4", got)
	}
}

// tenBatches opens the log t-0 under root with new Checkpoints and
// appends ten batches of two records to it, offsets 0 to 19.
func tenBatches(t *testing.T, fsys vfs.FS, root string) (*Checkpoints, *Log) {
	t.Helper()
	c := openCkpts(t, fsys, root)
	l := openCkptLog(t, fsys, root, "t-0", c)
	for i := range 10 {
		if _, err := l.Append(simpleBatch(t, uint64(i), 2, 100, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	return c, l
}

// TestCheckpointsTruncationLowersTheRecoveryPointAtOnce: after a
// truncation below the recovery point the Checkpoints file holds, the
// batches appended again are not taken for durable after a power loss,
// though no Write came after them: what the power loss tore of them is
// cut as a torn tail, never recorded as damage.
func TestCheckpointsTruncationLowersTheRecoveryPointAtOnce(t *testing.T) {
	for seed := range uint64(12) {
		fsys, root := crashfs.New(crashfs.Torn, seed), "/data"
		c, l := tenBatches(t, fsys, root)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(8); err != nil {
			t.Fatal(err)
		}
		for i := range 6 { // not flushed: torn by the power loss
			if _, err := l.Append(simpleBatch(t, uint64(100+i), 2, 300, 1000), 1); err != nil {
				t.Fatal(err)
			}
		}
		crashed := fsys.Crash()
		abandon(l)
		l = openCkptLog(t, crashed, root, "t-0", openCkpts(t, crashed, root))
		if d := l.Damaged(); len(d) > 0 {
			t.Errorf("seed %d: damage after the power loss: %v", seed, d)
		}
		if got := l.EndOffset(); got < 8 || got > 20 {
			t.Errorf("seed %d: log end %d after the power loss, want 8 to 20", seed, got)
		}
		l.Close()
	}
}

// TestCheckpointsOfABatchWaitForItsCommit: a log closed in a SyncBatch
// records its recovery point at its end only once the batch committed,
// so that Checkpoints written before (another log's truncation, the
// periodic write) never claim data the batch had not synced yet: what a
// power loss before the commit tore is cut, never recorded as damage.
func TestCheckpointsOfABatchWaitForItsCommit(t *testing.T) {
	for seed := range uint64(12) {
		fsys, root := crashfs.New(crashfs.Torn, seed), "/data"
		c, l := tenBatches(t, fsys, root)
		batch := NewSyncBatch(fsys, root)
		batch.Add(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(); err != nil { // before the commit
			t.Fatal(err)
		}
		crashed := fsys.Crash()
		if err := batch.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			fsys *crashfs.FS
			min  int64
		}{{"before the commit", crashed, 0}, {"after the commit and write", fsys.Crash(), 20}} {
			l := openCkptLog(t, tc.fsys, root, "t-0", openCkpts(t, tc.fsys, root))
			if d := l.Damaged(); len(d) > 0 {
				t.Errorf("seed %d, %s: damage after a power loss: %v", seed, tc.name, d)
			}
			if got := l.EndOffset(); got < tc.min || got > 20 {
				t.Errorf("seed %d, %s: log end %d after a power loss, want %d to 20", seed, tc.name, got, tc.min)
			}
			l.Close()
		}
	}
}

// TestCheckpointsAdoptTheOldFiles: a log whose directory holds the
// per-log checkpoint files of an earlier mq takes their values, and the
// files go once the Checkpoints file holds them.
func TestCheckpointsAdoptTheOldFiles(t *testing.T) {
	root := t.TempDir()
	l := openCkptLog(t, nil, root, "t-0", nil) // no Checkpoints: files of its own
	if err := l.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := l.Append(simpleBatch(t, uint64(i), 2, 10, 1000), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.CheckpointHighWatermark(7); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, f := range []string{recoveryPointFile, leaderEpochFile, highWatermarkFile} {
		p := filepath.Join(root, "t-0", f)
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		old = append(old, p)
	}
	var c *Checkpoints
	check := func(l *Log, what string) {
		t.Helper()
		if e, _ := c.get("t-0"); e.recoveryPoint != 8 {
			t.Errorf("%s: recovery point %d, want 8", what, e.recoveryPoint)
		}
		if got := l.HighWatermarkCheckpoint(); got != 7 {
			t.Errorf("%s: high-water mark %d, want 7", what, got)
		}
		if got, want := l.LeaderEpochs(), []EpochEntry{{Epoch: 3, StartOffset: 0}}; !slices.Equal(got, want) {
			t.Errorf("%s: leader epochs %v, want %v", what, got, want)
		}
	}
	c = openCkpts(t, nil, root)
	l = openCkptLog(t, nil, root, "t-0", c)
	check(l, "from the old files")
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after the checkpoints were written: %v", filepath.Base(p), err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCkpts(t, nil, root)
	l = openCkptLog(t, nil, root, "t-0", c)
	defer l.Close()
	check(l, "from the checkpoints")
}

// TestCheckpointsNameTheOwner: a log opened with an owner writes it with
// its entry, and the next process reads it back before opening the log.
func TestCheckpointsNameTheOwner(t *testing.T) {
	root := t.TempDir()
	c := openCkpts(t, nil, root)
	l, err := Open(filepath.Join(root, "t-0"), testConfig(), Options{Checkpoints: c, Owner: "topic-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	c = openCkpts(t, nil, root)
	if owner, ok := c.Owner("t-0"); !ok || owner != "topic-a" {
		t.Fatalf("owner %q (%v), want topic-a", owner, ok)
	}
	if owner, ok := c.Owner("t-1"); ok {
		t.Fatalf("owner %q of a log that has no entry", owner)
	}
}

// TestCheckpointsNewLogTakesNoOldEntry: a log deleted and created again
// under the same name starts without the old log's checkpoints, even
// when the file written last still holds them.
func TestCheckpointsNewLogTakesNoOldEntry(t *testing.T) {
	root := t.TempDir()
	c, l := writtenHighWatermark(t, root, 5)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	l = openCkptLog(t, nil, root, "t-0", c)
	if got := l.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("re-created log, same process: checkpoint %d, want -1", got)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	// The next process reads the file as written before the delete.
	l = openCkptLog(t, nil, root, "t-0", openCkpts(t, nil, root))
	defer l.Close()
	if got := l.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("re-created log, next process: checkpoint %d, want -1", got)
	}
}

// TestCheckpointsDamagedFileIsIgnored: a file that does not pass its
// checksum is logged and read as holding no log.
func TestCheckpointsDamagedFileIsIgnored(t *testing.T) {
	root := t.TempDir()
	_, l := writtenHighWatermark(t, root, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "log-checkpoints")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(" 5 "), []byte(" 9 "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c, err := OpenCheckpoints(nil, path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "checksum mismatch") {
		t.Fatalf("no error logged for a damaged file: %q", logs.String())
	}
	l = openCkptLog(t, nil, root, "t-0", c)
	defer l.Close()
	if got := l.HighWatermarkCheckpoint(); got != -1 {
		t.Fatalf("damaged file: checkpoint %d, want -1", got)
	}
}

func TestCheckpointsDecode(t *testing.T) {
	logs := map[string]logCheckpoint{
		"a-0": {recoveryPoint: 3, highWatermark: 2, epochs: []EpochEntry{{0, 0}, {2, 3}}, hasEpochs: true, owner: "Y3FhZA"},
		"b-1": {recoveryPoint: -1, highWatermark: 0},
		"c-2": {recoveryPoint: 0, highWatermark: -1, hasEpochs: true},
	}
	got, err := decodeCheckpoints(encodeCheckpoints(logs))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range logs {
		if !got[name].equal(want) {
			t.Errorf("%s: decoded %+v, want %+v", name, got[name], want)
		}
	}
	if len(got) != len(logs) {
		t.Errorf("decoded %d logs, want %d", len(got), len(logs))
	}
	for _, bad := range []string{
		"",
		"mq log-checkpoints 1\n",
		"mq log-checkpoints 2\ncrc32c 00000000\n",
		"mq log-checkpoints 1\na-0 3 - -\ncrc32c 00000000\n",
	} {
		if _, err := decodeCheckpoints([]byte(bad)); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
}
