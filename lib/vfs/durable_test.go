package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// opRecorder is OS recording, relative to root, the operations whose
// order decides what a crash leaves: file creations, fsyncs, renames,
// removals and MkdirAll. An fsync of failSync fails with EIO.
type opRecorder struct {
	FS
	root     string
	failSync string

	mu  sync.Mutex
	ops []string
}

func (r *opRecorder) record(op string, names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		rel, err := filepath.Rel(r.root, n)
		if err != nil {
			rel = n
		}
		op += " " + rel
	}
	r.ops = append(r.ops, op)
}

func (r *opRecorder) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := r.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		r.record("create", name)
	}
	return recordedFile{f, r, name}, nil
}

func (r *opRecorder) Rename(oldpath, newpath string) error {
	r.record("rename", oldpath, newpath)
	return r.FS.Rename(oldpath, newpath)
}

func (r *opRecorder) Remove(name string) error {
	r.record("remove", name)
	return r.FS.Remove(name)
}

func (r *opRecorder) MkdirAll(path string, perm os.FileMode) error {
	r.record("mkdirall", path)
	return r.FS.MkdirAll(path, perm)
}

type recordedFile struct {
	File
	r    *opRecorder
	name string
}

func (f recordedFile) Sync() error {
	f.r.record("fsync", f.name)
	if f.name == f.r.failSync {
		return &os.PathError{Op: "sync", Path: f.name, Err: syscall.EIO}
	}
	return f.File.Sync()
}

// TestDurableOperationsFsyncWhatACrashWouldLose: each helper makes, in
// order, the fsyncs its crash guarantee rests on (lib/vfs/crashfs's tests
// and lib/log's power-loss tests check the guarantees themselves).
func TestDurableOperationsFsyncWhatACrashWouldLose(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing []string // directories made before
		run      func(fs FS, root string) error
		want     []string
	}{
		{"WriteFileAtomic", nil, func(fs FS, root string) error {
			return WriteFileAtomic(fs, filepath.Join(root, "meta"), []byte("x"), 0o640)
		}, []string{"create meta.tmp", "fsync meta.tmp", "rename meta.tmp meta", "fsync ."}},
		{"MkdirAllDurable of new directories", nil, func(fs FS, root string) error {
			return MkdirAllDurable(fs, filepath.Join(root, "a", "b"), 0o750)
		}, []string{"mkdirall a/b", "fsync a", "fsync ."}},
		{"MkdirAllDurable of an existing directory", []string{"a"}, func(fs FS, root string) error {
			return MkdirAllDurable(fs, filepath.Join(root, "a"), 0o750)
		}, []string{"mkdirall a", "fsync ."}},
		{"MoveDir", []string{"a"}, func(fs FS, root string) error {
			return MoveDir(fs, filepath.Join(root, "a"), filepath.Join(root, "b"))
		}, []string{"rename a b", "fsync ."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tc.existing {
				if err := os.Mkdir(filepath.Join(root, d), 0o750); err != nil {
					t.Fatal(err)
				}
			}
			r := &opRecorder{FS: OS, root: root}
			if err := tc.run(r, root); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.ops, tc.want) {
				t.Errorf("operations %q, want %q", r.ops, tc.want)
			}
		})
	}
}

// TestWriteFileAtomicFailureKeepsTheOldContents: a write whose fsync
// fails renames nothing, removes its temporary file and says which file
// it was writing.
func TestWriteFileAtomicFailureKeepsTheOldContents(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "meta")
	if err := WriteFileAtomic(nil, path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	r := &opRecorder{FS: OS, root: root, failSync: path + TempSuffix}
	err := WriteFileAtomic(r, path, []byte("new"), 0o640)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "write meta") {
		t.Fatalf("error %v, want EIO naming the file", err)
	}
	if b, err := ReadFile(nil, path); err != nil || string(b) != "old" {
		t.Errorf("after a failed write the file holds %q (%v), want %q", b, err, "old")
	}
	if _, err := os.Stat(path + TempSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is left behind: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&^0o640 != 0 {
		t.Errorf("mode %v (%v), want 0640 less the umask", fi.Mode(), err)
	}
}

// TestWholeFileSystemCallsNeedTheirInterface: SyncFileSystem and
// VolumeBytes answer through the FS's FileSystemSyncer and VolumeSizer,
// also when wrapped by Timed, and say so when it has none.
func TestWholeFileSystemCallsNeedTheirInterface(t *testing.T) {
	dir := t.TempDir()
	hidden := onlyFS{OS}
	if err := SyncFileSystem(hidden, dir); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SyncFileSystem of an FS that cannot: %v, want ErrUnsupported", err)
	}
	if total, usable := VolumeBytes(hidden, dir); total != -1 || usable != -1 {
		t.Errorf("VolumeBytes of an FS that cannot tell: %d, %d; want -1, -1", total, usable)
	}
	if _, ok := OS.(FileSystemSyncer); ok {
		if err := SyncFileSystem(Timed(nil, func(time.Duration) {}), dir); err != nil {
			t.Errorf("SyncFileSystem of a Timed OS: %v", err)
		}
	}
	if _, ok := OS.(VolumeSizer); ok {
		total, usable := VolumeBytes(Timed(nil, func(time.Duration) {}), dir)
		if total <= 0 || usable < 0 || usable > total {
			t.Errorf("VolumeBytes of a Timed OS: total %d, usable %d", total, usable)
		}
	}
}
