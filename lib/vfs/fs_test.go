package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOSOpenFileKeepsOSOpenFileSemantics: the real file system opens
// with open(2) rather than os.OpenFile, and must still answer as
// os.OpenFile would: errors that errors.Is recognises, the path in them,
// the permissions asked for, descriptors closed on exec (mqd's children
// must not inherit segment files), and files and directories that read,
// write and sync.
func TestOSOpenFileKeepsOSOpenFileSemantics(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "00000000000000000000.log")

	_, err := OS.OpenFile(name, os.O_RDWR, 0)
	var pe *fs.PathError
	if !errors.Is(err, os.ErrNotExist) || !errors.As(err, &pe) || pe.Path != name || pe.Op != "open" {
		t.Fatalf("opening a missing file: %v, want a *fs.PathError for %s that is os.ErrNotExist", err, name)
	}

	f, err := OS.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := OS.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640); !errors.Is(err, os.ErrExist) {
		t.Errorf("O_EXCL on an existing file: %v, want os.ErrExist", err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm()&^0o640 != 0 || fi.Mode().Perm()&0o600 != 0o600 {
		t.Errorf("created with mode %v (%v), want 0640 less the umask", fi.Mode(), err)
	}
	flags, err := unix.FcntlInt(f.OS().Fd(), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor flags %#x (%v): not closed on exec", flags, err)
	}
	if _, err := f.WriteAt([]byte("batch"), 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 3); err != nil || string(buf) != "batch" {
		t.Errorf("read back %q (%v)", buf, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 8 || fi.Name() != filepath.Base(name) {
		t.Errorf("Stat of the open file: %v (%v)", fi, err)
	}

	d, err := OS.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Errorf("fsync of a directory: %v", err)
	}
}
