package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// fdCounter is an FS that counts the segment data files open through it
// now and at most, so that a test sees real descriptors, not Files' own
// bookkeeping.
type fdCounter struct {
	vfs.FS
	mu        sync.Mutex
	open, max int
}

func (c *fdCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, logExt) {
		return f, err
	}
	c.mu.Lock()
	c.open++
	c.max = max(c.max, c.open)
	c.mu.Unlock()
	return &countedFile{File: f, c: c}, nil
}

func (c *fdCounter) peak() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

type countedFile struct {
	vfs.File
	c      *fdCounter
	closed bool
}

func (f *countedFile) Close() error {
	f.c.mu.Lock()
	if !f.closed {
		f.closed = true
		f.c.open--
	}
	f.c.mu.Unlock()
	return f.File.Close()
}

// openLogs opens n logs under one directory sharing files, on fsys.
func openLogs(t *testing.T, n int, cfg Config, fsys vfs.FS, files *Files) []*Log {
	t.Helper()
	root := t.TempDir()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, Options{FS: fsys, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		logs[i] = l
	}
	return logs
}

// TestFilesBoundHoldsUnderConcurrentAppendsAndReads appends to and reads
// from many logs sharing a Files of 8 from 4 goroutines: never more than 8
// segment files are open, and every read returns what was appended.
func TestFilesBoundHoldsUnderConcurrentAppendsAndReads(t *testing.T) {
	const (
		nLogs   = 40
		bound   = 8
		workers = 4 // fewer than bound: each uses one file at a time
		rounds  = 300
	)
	seed := testSeed(t)
	counter := &fdCounter{FS: vfs.OS}
	files := NewFiles(bound)
	logs := openLogs(t, nLogs, testConfig(), counter, files)
	var mu sync.Mutex
	want := make([][]appended, nLogs) // by log, guarded by mu
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for r := range rounds {
				i := rng.IntN(nLogs)
				l := logs[i]
				if rng.IntN(2) == 0 {
					b := simpleBatch(t, uint64(w*rounds+r), 1+rng.IntN(3), 50+rng.IntN(200), testStart.UnixMilli())
					mu.Lock() // one appender per log at a time, so want stays in order
					res, err := l.Append(b, 0)
					if err == nil {
						want[i] = append(want[i], appended{base: res.BaseOffset, last: res.LastOffset, bytes: bytes.Clone(b)})
					}
					mu.Unlock()
					if err != nil {
						errs <- fmt.Errorf("append to log %d: %w", i, err)
						return
					}
					continue
				}
				mu.Lock()
				var a appended
				ok := len(want[i]) > 0
				if ok {
					a = want[i][rng.IntN(len(want[i]))]
				}
				mu.Unlock()
				if !ok {
					continue
				}
				got, err := l.ReadBytes(a.base, l.EndOffset(), 1)
				if err != nil {
					errs <- fmt.Errorf("read log %d at %d: %w", i, a.base, err)
					return
				}
				if !bytes.Equal(got, a.bytes) {
					errs <- fmt.Errorf("read log %d at %d: bytes differ", i, a.base)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := files.Stats()
	if p := counter.peak(); p > bound || st.Peak > bound {
		t.Fatalf("%d segment files were open at once (Files saw %d), bound %d", p, st.Peak, bound)
	}
	if st.Evictions == 0 {
		t.Fatalf("no descriptor was closed to stay within the bound: the test tested nothing (%+v)", st)
	}
	for i, l := range logs {
		checkContents(t, l, want[i])
	}
	t.Logf("%+v", st)
}

// TestClosedSegmentsShareTheBound reads every closed segment of a log with
// many segments through a Files of 3: the bound holds, and the reads are
// right after their files were closed and opened again.
func TestClosedSegmentsShareTheBound(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	counter := &fdCounter{FS: vfs.OS}
	files := NewFiles(3)
	l := openLogs(t, 1, cfg, counter, files)[0]
	tl := &testLog{Log: l, t: t, clock: nil}
	var want []appended
	for i := range 200 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 1+i%3, 100, testStart.UnixMilli()), 0))
	}
	if l.NumSegments() < 20 {
		t.Fatalf("%d segments, want many", l.NumSegments())
	}
	for range 2 {
		checkContents(t, l, want)
	}
	if p := counter.peak(); p > 3 {
		t.Fatalf("%d segment files open at once, bound 3", p)
	}
}

// TestRegionReadsRightBytesAfterEvictionAndDeletion holds Regions while
// their files are closed by the bound, and while retention deletes their
// segments: each still reads exactly its batches, through ReadAt and
// through the borrowed *os.File a sendfile would use.
func TestRegionReadsRightBytesAfterEvictionAndDeletion(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	files := NewFiles(2)
	logs := openLogs(t, 4, cfg, nil, files)
	var want []appended
	tl := &testLog{Log: logs[0], t: t}
	for i := range 60 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 2, 150, testStart.UnixMilli()), 0))
	}
	// A Region per batch, from every segment.
	regions := make([]Region, len(want))
	for i, a := range want {
		r, err := logs[0].Read(a.base, logs[0].EndOffset(), 1)
		if err != nil {
			t.Fatal(err)
		}
		regions[i] = r
	}
	defer func() {
		for i := range regions {
			regions[i].Release()
		}
	}()
	evictAll := func() {
		t.Helper()
		for _, l := range logs[1:] {
			if _, err := l.Append(simpleBatch(t, 9, 1, 10, testStart.UnixMilli()), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		for i := range regions {
			r := &regions[i]
			got := make([]byte, r.Len)
			if n, err := r.ReadAt(got, 0); n != len(got) || err != nil {
				t.Fatalf("%s: region %d ReadAt: %d of %d bytes, %v", when, i, n, len(got), err)
			}
			if !bytes.Equal(got, want[i].bytes) {
				t.Fatalf("%s: region %d: wrong bytes", when, i)
			}
			evictAll()
			f, err := r.File().AcquireFile()
			if err != nil {
				t.Fatalf("%s: region %d: %v", when, i, err)
			}
			clear(got)
			_, err = f.ReadAt(got, r.Pos)
			r.File().ReleaseFile()
			if err != nil || !bytes.Equal(got, want[i].bytes) {
				t.Fatalf("%s: region %d through its *os.File: %v, same bytes %v", when, i, err, bytes.Equal(got, want[i].bytes))
			}
		}
	}
	evictAll()
	check("after eviction")
	if logs[0].NumSegments() < 4 {
		t.Fatalf("%d segments, want several", logs[0].NumSegments())
	}
	// Retention removes every closed segment while their Regions live.
	evictAll()
	if err := logs[0].DeleteRecordsBefore(logs[0].EndOffset()); err != nil {
		t.Fatal(err)
	}
	evictAll()
	check("after deletion")
	// Closing the log (Delete removes the directory) keeps them readable.
	if err := logs[0].Delete(); err != nil {
		t.Fatal(err)
	}
	evictAll()
	check("after the log was deleted")
}

// TestReopenFailureIsAnError makes opening a segment file again fail: the
// append, the read and the Region fail with the error, nothing panics, and
// all is well once opening works again.
func TestReopenFailureIsAnError(t *testing.T) {
	ffs := faultfs.New(nil)
	files := NewFiles(1)
	logs := openLogs(t, 2, testConfig(), ffs, files)
	a, b := logs[0], logs[1]
	tl := &testLog{Log: a, t: t}
	want := []appended{tl.append(simpleBatch(t, 1, 2, 100, testStart.UnixMilli()), 0)}
	r, err := a.Read(0, a.EndOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	evict := func() {
		t.Helper()
		if _, err := b.Append(simpleBatch(t, 2, 1, 10, testStart.UnixMilli()), 0); err != nil {
			t.Fatal(err)
		}
	}

	evict()
	ffs.FailOpens(filepath.Base(segmentName(0, logExt)), 1, syscall.EMFILE)
	if _, err := a.ReadBytes(0, a.EndOffset(), 1<<20); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("read with the open failing: %v, want EMFILE", err)
	}

	evict()
	ffs.FailOpens(segmentName(0, logExt), 1, syscall.EMFILE)
	if _, err := r.ReadAt(make([]byte, r.Len), 0); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Region read with the open failing: %v, want EMFILE", err)
	}

	evict()
	ffs.FailOpens(segmentName(0, logExt), 1, syscall.EMFILE)
	if _, err := a.Append(simpleBatch(t, 3, 1, 10, testStart.UnixMilli()), 0); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("append with the open failing: %v, want EMFILE", err)
	}

	evict()
	ffs.FailOpens(segmentName(0, logExt), 1, syscall.EMFILE)
	if err := a.Flush(); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("flush with the open failing: %v, want EMFILE", err)
	}
	// The failed fsync under flush.policy=os fails the log, as any
	// failed fsync does; a new log over the files is whole.
	if err := a.Close(); err != nil && !errors.Is(err, ErrFailed) {
		t.Fatal(err)
	}
	got := make([]byte, r.Len)
	if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, want[0].bytes) {
		t.Fatalf("Region after the fault: %v", err)
	}
	a2, err := Open(a.dir, testConfig(), Options{FS: ffs, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	tl2 := &testLog{Log: a2, t: t}
	want = append(want, tl2.append(simpleBatch(t, 4, 1, 10, testStart.UnixMilli()), 0))
	evict()
	checkContents(t, a2, want)
}
