package faultfs

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/mqproject/mq/lib/vfs"
)

// Op is the file operation a Fault applies to.
type Op int

const (
	// OpWrite makes WriteAt fail.
	OpWrite Op = iota + 1
	// OpSync makes Sync fail.
	OpSync
	// OpTruncate makes Truncate fail.
	OpTruncate
	// OpOpen makes OpenFile fail (the file is not opened).
	OpOpen
)

// Fault describes an injected failure. The zero Err means syscall.EIO.
type Fault struct {
	Op Op
	// Suffix restricts the fault to files whose name ends with it (".log"
	// for segment data, ".index", "recovery-point-offset-checkpoint.tmp"…);
	// empty matches every file.
	Suffix string
	Err    error
	// After lets this many more bytes be written (over all matching
	// writes) before the fault fires; the write that crosses the limit
	// writes up to it and returns the error (a short write). 0 fails the
	// next write with nothing written. Ignored for OpSync.
	After int64
	// Times is how many failing calls the fault makes before it disarms;
	// 0 keeps it armed until Clear.
	Times int
}

// FS wraps a vfs.FS and injects failures of writes, fsyncs, truncations
// and opens on command; everything else goes to the wrapped FS. It is
// safe for concurrent use. Files it opens report a nil OS(), so a log on
// an FS cannot lend its segments' *os.File (SegmentFile.AcquireFile
// fails): read them with ReadAt.
type FS struct {
	fs     vfs.FS
	mu     sync.Mutex
	faults []*Fault
}

// New wraps fs (nil: vfs.OS).
func New(fs vfs.FS) *FS {
	if fs == nil {
		fs = vfs.OS
	}
	return &FS{fs: fs}
}

// Inject arms a fault.
func (f *FS) Inject(ft Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &ft)
}

// Clear disarms every fault.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// FailNextWrite makes the next write to a file ending in suffix fail with
// nothing written.
func (f *FS) FailNextWrite(suffix string) {
	f.Inject(Fault{Op: OpWrite, Suffix: suffix, Times: 1})
}

// ShortNextWrite makes the next write to a file ending in suffix write n
// bytes and fail.
func (f *FS) ShortNextWrite(suffix string, n int) {
	f.Inject(Fault{Op: OpWrite, Suffix: suffix, After: int64(n), Times: 1})
}

// FailNextTruncate makes the next truncation of a file ending in suffix fail.
func (f *FS) FailNextTruncate(suffix string) {
	f.Inject(Fault{Op: OpTruncate, Suffix: suffix, Times: 1})
}

// FailNextSync makes the next fsync of a file ending in suffix fail.
func (f *FS) FailNextSync(suffix string) {
	f.Inject(Fault{Op: OpSync, Suffix: suffix, Times: 1})
}

// NoSpaceAfter makes writes to files ending in suffix fail with ENOSPC once
// n more bytes have been written, until Clear.
func (f *FS) NoSpaceAfter(suffix string, n int64) {
	f.Inject(Fault{Op: OpWrite, Suffix: suffix, After: n, Err: syscall.ENOSPC})
}

// writeFault returns how many of want bytes may be written and the error to
// return after them (nil: no fault).
func (f *FS) writeFault(name string, want int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	allowed := want
	var err error
	for i, ft := range f.faults {
		if ft == nil || ft.Op != OpWrite || !strings.HasSuffix(name, ft.Suffix) {
			continue
		}
		if ft.After >= int64(allowed) {
			ft.After -= int64(allowed)
			continue
		}
		allowed = int(ft.After)
		ft.After = 0
		err = f.fireLocked(i)
	}
	f.compact()
	return allowed, err
}

// opFault returns the error of an armed fault for op on name, if any.
func (f *FS) opFault(op Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	for i, ft := range f.faults {
		if ft == nil || ft.Op != op || !strings.HasSuffix(name, ft.Suffix) {
			continue
		}
		err = f.fireLocked(i)
	}
	f.compact()
	return err
}

// fireLocked counts a failing call of the fault at i, disarming it after
// its last one, and returns its error.
func (f *FS) fireLocked(i int) error {
	ft := f.faults[i]
	if ft.Times > 0 {
		ft.Times--
		if ft.Times == 0 {
			f.faults[i] = nil
		}
	}
	if ft.Err != nil {
		return ft.Err
	}
	return syscall.EIO
}

func (f *FS) compact() {
	live := f.faults[:0]
	for _, ft := range f.faults {
		if ft != nil {
			live = append(live, ft)
		}
	}
	f.faults = live
}

// FailOpens makes the next n opens of a file ending in suffix fail with
// err (nil: EIO).
func (f *FS) FailOpens(suffix string, n int, err error) {
	f.Inject(Fault{Op: OpOpen, Suffix: suffix, Times: n, Err: err})
}

// OpenFile opens a file whose writes and syncs go through the faults.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := f.opFault(OpOpen, name); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *FS) Remove(name string) error                     { return f.fs.Remove(name) }
func (f *FS) Rename(oldpath, newpath string) error         { return f.fs.Rename(oldpath, newpath) }
func (f *FS) ReadDir(name string) ([]os.DirEntry, error)   { return f.fs.ReadDir(name) }
func (f *FS) MkdirAll(path string, perm os.FileMode) error { return f.fs.MkdirAll(path, perm) }
func (f *FS) Stat(name string) (os.FileInfo, error)        { return f.fs.Stat(name) }

// VolumeBytes asks the wrapped FS (vfs.VolumeSizer).
func (f *FS) VolumeBytes(path string) (total, usable int64) { return vfs.VolumeBytes(f.fs, path) }

type faultFile struct {
	vfs.File
	fs   *FS
	name string
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	allowed, ferr := f.fs.writeFault(f.name, len(p))
	if ferr == nil {
		return f.File.WriteAt(p, off)
	}
	n := 0
	if allowed > 0 {
		var err error
		n, err = f.File.WriteAt(p[:allowed], off)
		if err != nil {
			return n, err
		}
	}
	return n, &os.PathError{Op: "write", Path: f.name, Err: ferr}
}

func (f *faultFile) Sync() error {
	if err := f.fs.opFault(OpSync, f.name); err != nil {
		return &os.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.opFault(OpTruncate, f.name); err != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	return f.File.Truncate(size)
}

func (f *faultFile) OS() *os.File { return nil }
