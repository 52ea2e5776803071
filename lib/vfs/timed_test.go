package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// onlyFS hides every method of an FS but FS's own.
type onlyFS struct{ FS }

// TestTimedReportsFsyncsAndKeepsTheFile: a Timed FS reports the fsyncs
// of files and directories and nothing else, still lends the *os.File
// (sendfile), and syncs a whole file system exactly when what it wraps
// can.
func TestTimedReportsFsyncsAndKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	var syncs int
	fs := Timed(nil, func(d time.Duration) {
		if d < 0 {
			t.Errorf("negative fsync duration %v", d)
		}
		syncs++
	})
	f, err := fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if syncs != 0 {
		t.Fatalf("%d fsyncs reported before any fsync", syncs)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, dir); err != nil {
		t.Fatal(err)
	}
	if syncs != 2 {
		t.Errorf("%d fsyncs reported for a file's and a directory's, want 2", syncs)
	}
	if f.OS() == nil {
		t.Error("a file of a Timed OS has no *os.File: sendfile would be lost")
	}

	_, osSyncs := OS.(FileSystemSyncer)
	s, ok := fs.(FileSystemSyncer)
	if ok != osSyncs {
		t.Errorf("Timed(OS) is a FileSystemSyncer: %v, OS is: %v", ok, osSyncs)
	}
	if ok {
		if err := s.SyncFileSystem(dir); err != nil {
			t.Fatal(err)
		}
		if syncs != 3 {
			t.Errorf("a file system's sync reported as %d fsyncs, want 1", syncs-2)
		}
	}
	if _, ok := Timed(onlyFS{OS}, func(time.Duration) {}).(FileSystemSyncer); ok {
		t.Error("Timed of an FS that cannot sync a file system is a FileSystemSyncer")
	}
}
