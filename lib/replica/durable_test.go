package replica

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/vfs"
)

// syncCounter counts the fsyncs of segment files (*.log).
type syncCounter struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *syncCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &countedFile{File: f, syncs: &c.syncs}, nil
}

type countedFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f *countedFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// TestFollowerMakesAResponseDurableWithOneFsync: under
// flush.policy=always a follower fsyncs the batches of one fetch response
// together, once, before AppendFromLeader returns (its next fetch reports
// them to the leader). One fsync a batch held a follower catching up
// after a full disk behind a leader whose producers share theirs, and its
// ISR never filled again (make chaos, the mixed row).
func TestFollowerMakesAResponseDurableWithOneFsync(t *testing.T) {
	fs := &syncCounter{FS: vfs.OS}
	cfg := log.DefaultConfig()
	cfg.FlushPolicy = log.FlushAlways
	l, err := log.Open(t.TempDir(), cfg, log.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Topic: "t", NodeID: self}, l)
	t.Cleanup(func() { p.Close() })
	mustBecome(t, p, 3, 2, []int32{1, 2}, []int32{1, 2})
	if err := p.TruncateFromLeader(3, -1, -1); err != nil {
		t.Fatal(err)
	}
	sizes := make([]int, 50)
	for i := range sizes {
		sizes[i] = 2
	}
	data := leaderBatches(t, 3, sizes...)
	before := fs.syncs.Load()
	if _, err := p.AppendFromLeader(3, bytes.Clone(data), 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := fs.syncs.Load() - before; got != 1 {
		t.Errorf("appending a response of %d batches took %d fsyncs, want 1", len(sizes), got)
	}
	if end := l.EndOffset(); end != 100 {
		t.Fatalf("log end %d, want 100", end)
	}
	if rp := l.RecoveryPoint(); rp != 100 {
		t.Errorf("recovery point %d after AppendFromLeader returned, want 100: the batches are not all durable", rp)
	}
}
