package log

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
)

// tmpCounter counts the checkpoint files written (each through a
// temporary file).
type tmpCounter struct {
	vfs.FS
	mu    sync.Mutex
	names []string
}

func (c *tmpCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, vfs.TempSuffix) {
		c.mu.Lock()
		c.names = append(c.names, filepath.Base(name))
		c.mu.Unlock()
	}
	return c.FS.OpenFile(name, flag, perm)
}

func (c *tmpCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// closeClean closes tl's log and returns what it recorded.
func closeClean(t *testing.T, tl *testLog) CleanShutdown {
	t.Helper()
	if _, ok := tl.CleanShutdown(); ok {
		t.Fatal("an open log reports a clean shutdown")
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	c, ok := tl.CleanShutdown()
	if !ok {
		t.Fatal("a clean Close recorded no clean shutdown")
	}
	tl.Log = nil
	return c
}

// TestCleanStartWalksFromTheLastIndexEntry: a clean start of a log whose
// active segment holds more than walkBytes reads the index files its
// Close wrote and walks only the batches after their last entry, not the
// whole segment.
func TestCleanStartWalksFromTheLastIndexEntry(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 20
	tl := openTestLog(t, cfg)
	want := tl.appendN(400, 1000)
	c := closeClean(t, tl)
	counter := &openCounter{FS: vfs.OS}
	tl.opts.FS, tl.opts.Clean = counter, &c
	tl.opts.Files = NewFiles(64)
	tl.open()
	if tl.scannedAtOpen {
		t.Fatal("open after a clean shutdown ran the recovery scan")
	}
	if n, m := counter.count(".index"), counter.count(".timeindex"); n != 1 || m != 1 {
		t.Fatalf("a clean start opened the index files %d and %d times, want once each", n, m)
	}
	if w := tl.walkedFrom; w < want[len(want)-1].last-int64(walkBytes/1000) {
		t.Fatalf("a clean start walked from offset %d of %d", w, want[len(want)-1].last+1)
	}
	checkContents(t, tl.Log, want)
}

func TestCleanShutdownLetsOpenSkipRecoveryAndCheckpoints(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4000
	counter := &tmpCounter{FS: vfs.OS}
	tl := openTestLogWith(t, cfg, Options{FS: counter})
	want := tl.appendN(60, 100)
	c := closeClean(t, tl)
	if c.EndOffset != want[len(want)-1].last+1 {
		t.Fatalf("recorded end %d, want %d", c.EndOffset, want[len(want)-1].last+1)
	}
	counter.take()

	tl.opts.Clean = &c
	tl.open()
	if tl.scannedAtOpen {
		t.Fatal("open after a clean shutdown ran the recovery scan")
	}
	if w := counter.take(); len(w) != 0 {
		t.Fatalf("open after a clean shutdown rewrote checkpoints %v", w)
	}
	checkContents(t, tl.Log, want)
	want = append(want, tl.appendN(5, 100)...)
	checkContents(t, tl.Log, want)

	// Without the record (a crash), the same files are recovered.
	tl.Close()
	tl.opts.Clean = nil
	tl.open()
	if !tl.scannedAtOpen {
		t.Fatal("open without a clean-shutdown record ran no recovery scan")
	}
	checkContents(t, tl.Log, want)
}

func TestCleanShutdownNotRecordedAfterACrash(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(5, 100)
	l := tl.Log
	tl.crash()
	if _, ok := l.CleanShutdown(); ok {
		t.Fatal("an abandoned log reports a clean shutdown")
	}
	tl.open()
	if !tl.scannedAtOpen {
		t.Fatal("open after a crash ran no recovery scan")
	}
}

// A record that the files contradict is not trusted: the log is recovered
// as after a crash, and nothing is lost or invented.
func TestCleanShutdownRecordThatLiesIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  func(t *testing.T, tl *testLog, c *CleanShutdown)
		tail bool // the active segment got bytes past the last batch
	}{
		{name: "segment longer than recorded", tail: true, lie: func(t *testing.T, tl *testLog, c *CleanShutdown) {
			appendToActive(t, tl, []byte("garbage past the recorded end"))
		}},
		{name: "segment longer by a whole batch, record adjusted to its size", tail: true, lie: func(t *testing.T, tl *testLog, c *CleanShutdown) {
			b := simpleBatch(t, 99, 2, 50, testStart.UnixMilli())
			appendToActive(t, tl, b)
			c.ActiveSize += int64(len(b))
		}},
		{name: "end offset past the batches", lie: func(t *testing.T, tl *testLog, c *CleanShutdown) {
			c.EndOffset += 3
			writeRecoveryPoint(t, tl, c.EndOffset)
		}},
		{name: "recovery point other than the recorded end", lie: func(t *testing.T, tl *testLog, c *CleanShutdown) {
			writeRecoveryPoint(t, tl, c.EndOffset-1)
		}},
		{name: "other active segment", lie: func(t *testing.T, tl *testLog, c *CleanShutdown) {
			c.ActiveBase++
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 4000
			tl := openTestLog(t, cfg)
			want := tl.appendN(30, 100)
			c := closeClean(t, tl)
			tc.lie(t, tl, &c)
			tl.opts.Clean = &c
			tl.open()
			if !tl.scannedAtOpen {
				t.Fatal("a record the files contradict was trusted: no recovery scan")
			}
			checkContents(t, tl.Log, want)
			if got := tl.EndOffset(); got != want[len(want)-1].last+1 {
				t.Fatalf("end offset %d, want %d", got, want[len(want)-1].last+1)
			}
		})
	}
}

func appendToActive(t *testing.T, tl *testLog, b []byte) {
	t.Helper()
	segs := segmentFiles(t, tl.dir)
	f, err := os.OpenFile(filepath.Join(tl.dir, segs[len(segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func writeRecoveryPoint(t *testing.T, tl *testLog, rp int64) {
	t.Helper()
	if err := vfs.WriteFileAtomic(vfs.OS, filepath.Join(tl.dir, recoveryPointFile), encodeOffsetCheckpoint("recovery-point", rp), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCleanShutdownFileIsTakenOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clean-shutdown")
	got, err := TakeCleanShutdownFile(nil, path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	want := map[string]CleanShutdown{"a-0": {EndOffset: 10, ActiveBase: 4, ActiveSize: 300}, "b-7": {}}
	if err := WriteCleanShutdownFile(nil, path, want); err != nil {
		t.Fatal(err)
	}
	got, err = TakeCleanShutdownFile(nil, path)
	if err != nil || len(got) != len(want) || got["a-0"] != want["a-0"] || got["b-7"] != want["b-7"] {
		t.Fatalf("took %v, %v; want %v", got, err, want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file is still there after it was taken: %v", err)
	}

	// A damaged file is an error, and gone too.
	if err := WriteCleanShutdownFile(nil, path, want); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[len("mq clean-shutdown 1\na-0 1")] = '9'
	os.WriteFile(path, b, 0o644)
	if got, err := TakeCleanShutdownFile(nil, path); err == nil {
		t.Fatalf("a damaged file was read: %v", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a damaged file is still there: %v", err)
	}
}

// A leader that wrote nothing keeps its epoch across a clean restart, and
// neither the open nor its BeginEpoch again writes a checkpoint.
func TestCleanShutdownKeepsTheEpochOfAnEmptyLeader(t *testing.T) {
	counter := &tmpCounter{FS: vfs.OS}
	tl := openTestLogWith(t, testConfig(), Options{FS: counter})
	if err := tl.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	c := closeClean(t, tl)
	counter.take()
	tl.opts.Clean = &c
	tl.open()
	if err := tl.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	if w := counter.take(); len(w) != 0 {
		t.Fatalf("a clean restart of an empty leader wrote checkpoints %v", w)
	}
	if e := tl.LatestEpoch(); e != 3 {
		t.Fatalf("latest epoch %d after a clean restart, want 3", e)
	}
}

// After a crash and a syncfs (Options.Synced) Open recovers as always but
// rewrites only the checkpoints recovery changed.
func TestSyncedOpenRewritesOnlyChangedCheckpoints(t *testing.T) {
	counter := &tmpCounter{FS: vfs.OS}
	tl := openTestLogWith(t, testConfig(), Options{FS: counter})
	want := tl.appendN(10, 100)
	tl.crash()
	counter.take()
	tl.opts.Synced = true
	tl.open()
	if !tl.scannedAtOpen {
		t.Fatal("open after a crash ran no recovery scan")
	}
	for _, name := range counter.take() {
		if name == logStartFile+vfs.TempSuffix || name == sealedFile+vfs.TempSuffix {
			t.Fatalf("a synced open rewrote %s, which recovery did not change", name)
		}
	}
	checkContents(t, tl.Log, want)
}
