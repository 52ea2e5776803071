package log

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/vfs"
)

// gateFS holds every fsync of a segment data file until the gate opens.
type gateFS struct {
	vfs.FS
	gate   chan struct{}
	mu     sync.Mutex
	synced []string
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, fs: g, name: name}, nil
}

type gateFile struct {
	vfs.File
	fs   *gateFS
	name string
}

func (f *gateFile) Sync() error {
	if strings.HasSuffix(f.name, logExt) {
		<-f.fs.gate
		f.fs.mu.Lock()
		f.fs.synced = append(f.fs.synced, f.name)
		f.fs.mu.Unlock()
	}
	return f.File.Sync()
}

func TestRollUnderFlushOSDoesNotWaitForFsync(t *testing.T) {
	cfg := testConfig()
	cfg.FlushPolicy = FlushOS
	b := simpleBatch(t, 1, 1, 1000, 0)
	cfg.SegmentBytes = int64(2 * len(b))
	gfs := &gateFS{FS: vfs.OS, gate: make(chan struct{})}
	tl := openTestLogWith(t, cfg, Options{FS: gfs})

	var want []appended
	for i := range 2 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 1, 1000, 0), 0))
	}
	rolled := make(chan appended)
	go func() { rolled <- tl.append(simpleBatch(t, 2, 1, 1000, 0), 0) }()
	select {
	case a := <-rolled:
		want = append(want, a)
	case <-time.After(10 * time.Second):
		close(gfs.gate)
		t.Fatal("the append that rolled the segment waited for its fsync")
	}
	if n := tl.NumSegments(); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	tl.mu.RLock()
	rp := tl.recoveryPoint
	tl.mu.RUnlock()
	if rp != 0 {
		t.Fatalf("recovery point %d before the rolled segment's fsync, want 0", rp)
	}
	checkContents(t, tl.Log, want)

	close(gfs.gate)
	tl.waitRolled()
	tl.mu.RLock()
	rp, ckpt := tl.recoveryPoint, tl.ckptRecovery
	tl.mu.RUnlock()
	if rp != 2 || ckpt != 2 {
		t.Fatalf("recovery point %d (checkpointed %d) after the fsync, want 2", rp, ckpt)
	}
	gfs.mu.Lock()
	synced := gfs.synced
	gfs.mu.Unlock()
	if len(synced) == 0 || !strings.HasSuffix(synced[0], "00000000000000000000.log") {
		t.Fatalf("fsyncs %v, want the rolled segment first", synced)
	}
	tl.reopen()
	checkContents(t, tl.Log, want)
}

func TestCloseFsyncsRolledSegmentsStillPending(t *testing.T) {
	cfg := testConfig()
	cfg.FlushPolicy = FlushOS
	b := simpleBatch(t, 1, 1, 1000, 0)
	cfg.SegmentBytes = int64(len(b))
	gfs := &gateFS{FS: vfs.OS, gate: make(chan struct{})}
	tl := openTestLogWith(t, cfg, Options{FS: gfs})
	var want []appended
	for i := range 4 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 1, 1000, 0), 0))
	}
	closed := make(chan error)
	go func() { closed <- tl.Log.Close() }()
	close(gfs.gate) // Close fsyncs the pending segments itself, through the gate
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	tl.Log = nil
	tl.open()
	checkContents(t, tl.Log, want)
	tl.mu.RLock()
	rp := tl.recoveryPoint
	tl.mu.RUnlock()
	if rp != 4 {
		t.Fatalf("recovery point %d after a clean close, want 4", rp)
	}
}
