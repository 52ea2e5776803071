package log

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
)

// logCapture is a slog handler recording messages and attributes.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	c.mu.Lock()
	c.lines = append(c.lines, b.String())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

func (c *logCapture) has(substr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if bytes.Contains([]byte(l), []byte(substr)) {
			return true
		}
	}
	return false
}

// recoveryFixture is a closed log of several segments and the batches in it.
type recoveryFixture struct {
	tl   *testLog
	want []appended
	segs []string // segment data file names, oldest first
}

func newRecoveryFixture(t *testing.T, crash bool) *recoveryFixture {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	tl := openTestLog(t, cfg)
	want := tl.appendN(40, 150)
	if crash {
		tl.crash()
	} else {
		if err := tl.Close(); err != nil {
			t.Fatal(err)
		}
		tl.Log = nil
	}
	f := &recoveryFixture{tl: tl, want: want, segs: segmentFiles(t, tl.dir)}
	if len(f.segs) < 4 {
		t.Fatalf("fixture has %d segments", len(f.segs))
	}
	return f
}

func (f *recoveryFixture) path(name string) string { return filepath.Join(f.tl.dir, name) }

// batchesIn returns the fixture batches stored in segment file name.
func (f *recoveryFixture) batchesIn(name string) []int {
	base, _, _ := parseSegmentName(name)
	var next int64 = 1 << 62
	for i, s := range f.segs {
		if s == name && i+1 < len(f.segs) {
			next, _, _ = parseSegmentName(f.segs[i+1])
		}
	}
	var out []int
	for i, a := range f.want {
		if a.base >= base && a.base < next {
			out = append(out, i)
		}
	}
	return out
}

func TestRecoveryKeepsEverythingBeforeTheDamage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // no clean shutdown: no recovery point at the end
		// damage changes the fixture's files and returns how many of its
		// batches must survive.
		damage  func(t *testing.T, f *recoveryFixture) int
		logLine string
	}{
		{"torn tail", true, func(t *testing.T, f *recoveryFixture) int {
			last := f.segs[len(f.segs)-1]
			in := f.batchesIn(last)
			fi, _ := os.Stat(f.path(last))
			cut := fi.Size() - int64(len(f.want[in[len(in)-1]].bytes)/2)
			if err := os.Truncate(f.path(last), cut); err != nil {
				t.Fatal(err)
			}
			return len(f.want) - 1
		}, "dropped_bytes"},
		{"garbage appended", false, func(t *testing.T, f *recoveryFixture) int {
			fh, _ := os.OpenFile(f.path(f.segs[len(f.segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
			fh.Write(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 100))
			fh.Close()
			return len(f.want)
		}, "dropped_bytes=400"},
		{"zeros appended after a crash", true, func(t *testing.T, f *recoveryFixture) int {
			fh, _ := os.OpenFile(f.path(f.segs[len(f.segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
			fh.Write(make([]byte, 4096))
			fh.Close()
			return len(f.want)
		}, "dropped_bytes=4096"},
		{"missing index of a closed segment", false, func(t *testing.T, f *recoveryFixture) int {
			base, _, _ := parseSegmentName(f.segs[1])
			os.Remove(f.path(segmentName(base, indexExt)))
			return len(f.want)
		}, ""},
		{"missing indexes of the active segment", false, func(t *testing.T, f *recoveryFixture) int {
			base, _, _ := parseSegmentName(f.segs[len(f.segs)-1])
			os.Remove(f.path(segmentName(base, indexExt)))
			os.Remove(f.path(segmentName(base, timeIndexExt)))
			return len(f.want)
		}, ""},
		{"corrupt index of a closed segment", false, func(t *testing.T, f *recoveryFixture) int {
			base, _, _ := parseSegmentName(f.segs[1])
			os.WriteFile(f.path(segmentName(base, indexExt)), []byte{0, 0, 0, 9, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2}, 0o644)
			os.WriteFile(f.path(segmentName(base, timeIndexExt)), []byte{1, 2, 3}, 0o644)
			return len(f.want)
		}, "rebuilding segment indexes"},
		{"corrupt index of the active segment", false, func(t *testing.T, f *recoveryFixture) int {
			base, _, _ := parseSegmentName(f.segs[len(f.segs)-1])
			os.WriteFile(f.path(segmentName(base, indexExt)), bytes.Repeat([]byte{0xff}, 21), 0o644)
			return len(f.want)
		}, ""},
		{"missing checkpoints", false, func(t *testing.T, f *recoveryFixture) int {
			for _, name := range []string{recoveryPointFile, logStartFile, leaderEpochFile, producerStateFile} {
				os.Remove(f.path(name))
			}
			return len(f.want)
		}, ""},
		{"corrupt checkpoint", false, func(t *testing.T, f *recoveryFixture) int {
			os.WriteFile(f.path(recoveryPointFile), []byte("mq recovery-point 1\nbanana\n"), 0o644)
			return len(f.want)
		}, "ignoring checkpoint"},
		{"bad batch past the recovery point, good ones after it", true, func(t *testing.T, f *recoveryFixture) int {
			last := f.segs[len(f.segs)-1]
			in := f.batchesIn(last)
			b, _ := os.ReadFile(f.path(last))
			var pos int
			for _, i := range in[:1] {
				pos += len(f.want[i].bytes)
			}
			b[pos+70] ^= 4 // inside the second batch of the active segment
			os.WriteFile(f.path(last), b, 0o644)
			return in[1]
		}, "dropped_bytes"},
		{"non-monotonic offsets after a crash", true, func(t *testing.T, f *recoveryFixture) int {
			// Append a copy of the last batch: valid CRC, wrong offsets.
			last := f.want[len(f.want)-1]
			fh, _ := os.OpenFile(f.path(f.segs[len(f.segs)-1]), os.O_WRONLY|os.O_APPEND, 0)
			fh.Write(last.bytes)
			fh.Close()
			return len(f.want)
		}, "offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRecoveryFixture(t, tc.crash)
			keep := tc.damage(t, f)
			capture := &logCapture{}
			f.tl.opts.Logger = slog.New(capture)
			f.tl.open()
			checkContents(t, f.tl.Log, f.want[:keep])
			if tc.logLine != "" && !capture.has(tc.logLine) {
				t.Fatalf("no log line with %q in %q", tc.logLine, capture.lines)
			}
			// The log goes on: append, reopen, all there.
			more := append(f.want[:keep:keep], f.tl.appendN(5, 100)...)
			f.tl.reopen()
			checkContents(t, f.tl.Log, more)
		})
	}
}

func TestCleanOpenReadsNoSegmentData(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	tl := openTestLog(t, cfg)
	want := tl.appendN(100, 100)
	tl.Close()
	tl.Log = nil
	// Make every closed segment unreadable: a clean open must not notice.
	segs := segmentFiles(t, tl.dir)
	for _, s := range segs[:len(segs)-1] {
		if err := os.Chmod(filepath.Join(tl.dir, s), 0); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		// root ignores permissions; count opens instead.
		for _, s := range segs[:len(segs)-1] {
			os.Chmod(filepath.Join(tl.dir, s), 0o644)
		}
		counter := &openCounter{FS: vfs.OS}
		tl.opts.FS = counter
		tl.opts.Files = NewFiles(64) // nothing closed and opened again
		tl.open()
		if n := counter.count(".log"); n != 1 {
			t.Fatalf("open opened %d segment data files, want 1", n)
		}
	} else {
		tl.open()
		for _, s := range segs[:len(segs)-1] {
			os.Chmod(filepath.Join(tl.dir, s), 0o644)
		}
	}
	checkContents(t, tl.Log, want)
}

type openCounter struct {
	vfs.FS
	mu    sync.Mutex
	names []string
}

func (c *openCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
	return c.FS.OpenFile(name, flag, perm)
}

func (c *openCounter) count(ext string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, name := range c.names {
		if filepath.Ext(name) == ext {
			n++
		}
	}
	return n
}

func TestOpenLimitsOpenSegmentFiles(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	tl := openTestLog(t, cfg)
	want := tl.appendN(3*maxOpenSegments, 200)
	tl.reopen()
	checkContents(t, tl.Log, want) // touches every segment
	tl.mu.RLock()
	open := 0
	for _, s := range tl.segs {
		if s.file != nil {
			open++
		}
	}
	tl.mu.RUnlock()
	if open > maxOpenSegments+1 {
		t.Fatalf("%d segments open, limit %d", open, maxOpenSegments+1)
	}
}
