package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mqproject/mq/lib/vfs"
)

// TestFaultsFireOnMatchingFilesAsArmed: each kind of fault fails the
// calls it names, on the files its suffix matches, as many times as
// armed, writing what it lets through; other files and later calls are
// untouched.
func TestFaultsFireOnMatchingFilesAsArmed(t *testing.T) {
	dir := t.TempDir()
	fs := New(nil)
	open := func(name string) vfs.File {
		t.Helper()
		f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	contents := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	seg, idx := open("a.log"), open("a.index")

	fs.FailNextWrite(".log")
	if n, err := idx.WriteAt([]byte("i"), 0); n != 1 || err != nil {
		t.Fatalf("write to a file the fault does not match: %d, %v", n, err)
	}
	if n, err := seg.WriteAt([]byte("abc"), 0); n != 0 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("failing write: %d, %v; want 0, EIO", n, err)
	}
	if n, err := seg.WriteAt([]byte("abc"), 0); n != 3 || err != nil {
		t.Fatalf("write after the fault fired: %d, %v", n, err)
	}

	fs.ShortNextWrite(".log", 2)
	if n, err := seg.WriteAt([]byte("xyz"), 3); n != 2 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("short write: %d, %v; want 2, EIO", n, err)
	}
	if got := contents("a.log"); got != "abcxy" {
		t.Fatalf("after a short write the file holds %q, want %q", got, "abcxy")
	}

	fs.NoSpaceAfter(".log", 4)
	if n, err := seg.WriteAt([]byte("123"), 5); n != 3 || err != nil {
		t.Fatalf("write within the space left: %d, %v", n, err)
	}
	if n, err := seg.WriteAt([]byte("45"), 8); n != 1 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the space left: %d, %v; want 1, ENOSPC", n, err)
	}
	if n, err := seg.WriteAt([]byte("45"), 9); n != 0 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a full disk: %d, %v; want 0, ENOSPC", n, err)
	}
	fs.Clear()
	if n, err := seg.WriteAt([]byte("45"), 8); n != 2 || err != nil {
		t.Fatalf("write after Clear: %d, %v", n, err)
	}

	fs.FailNextSync(".log")
	if err := idx.Sync(); err != nil {
		t.Fatalf("fsync of a file the fault does not match: %v", err)
	}
	if err := seg.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("failing fsync: %v, want EIO", err)
	}
	if err := seg.Sync(); err != nil {
		t.Fatalf("fsync after the fault fired: %v", err)
	}

	fs.FailNextTruncate(".log")
	if err := seg.Truncate(1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("failing truncate: %v, want EIO", err)
	}
	if got := contents("a.log"); got != "abcxy12345" {
		t.Fatalf("a failed truncate changed the file to %q", got)
	}

	fs.FailOpens(".index", 2, syscall.EMFILE)
	for range 2 {
		if _, err := fs.OpenFile(filepath.Join(dir, "a.index"), os.O_RDWR, 0); !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("failing open: %v, want EMFILE", err)
		}
	}
	if f, err := fs.OpenFile(filepath.Join(dir, "a.index"), os.O_RDWR, 0); err != nil {
		t.Fatalf("open after the faults fired: %v", err)
	} else {
		f.Close()
	}
	if seg.OS() != nil {
		t.Error("a file of a faultfs.FS lends its *os.File, which would bypass the faults")
	}
	wantTotal, _ := vfs.VolumeBytes(nil, dir)
	if total, _ := vfs.VolumeBytes(fs, dir); total != wantTotal {
		t.Errorf("volume of %d bytes through the faultfs.FS, %d without", total, wantTotal)
	}
}
