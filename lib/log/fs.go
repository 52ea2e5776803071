package log

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// FS is the file system a Log works on: what it needs and no more, so that
// tests can inject faults (see FaultFS) and cut the power (see CrashFS).
// A directory is fsynced by opening it with os.O_RDONLY and calling Sync.
// Implementations must be safe for concurrent use.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(path string, perm os.FileMode) error
	Stat(name string) (os.FileInfo, error)
}

// File is an open file of an FS. The log writes with WriteAt (pwrite) and
// reads with ReadAt (pread), so a File's seek offset is never used. ReadAt
// and WriteAt may be called concurrently.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	// OS returns the underlying *os.File for zero-copy reads
	// (SegmentFile.AcquireFile), or nil when there is none.
	OS() *os.File
}

// OSFS is the real file system.
var OSFS FS = osFS{}

type osFS struct{}

// OpenFile opens with open(2) and wraps the descriptor with os.NewFile,
// not with os.OpenFile: os.OpenFile offers every file it opens to the
// runtime's poller, which refuses regular files and directories, at the
// cost of four fcntl(2) calls and an epoll_ctl(2) each. A node opening
// 10,000 logs at start spent an eighth of its CPU on them.
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return osFile{os.NewFile(uintptr(fd), name)}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

type osFile struct{ *os.File }

func (f osFile) OS() *os.File { return f.File }

// TimedFS wraps fs so that every fsync of a file or directory made
// through it (segments, indexes, checkpoints) reports its duration to
// observe, which may be called concurrently. Nothing else changes: reads
// and writes go straight to fs's files, OS included, so zero-copy reads
// still work.
func TimedFS(fs FS, observe func(time.Duration)) FS {
	if fs == nil {
		fs = OSFS
	}
	return timedFS{fs, observe}
}

type timedFS struct {
	FS
	observe func(time.Duration)
}

func (t timedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{f, t.observe}, nil
}

type timedFile struct {
	File
	observe func(time.Duration)
}

func (f timedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.observe(time.Since(start))
	return err
}

// SyncFileSystem times a whole file system's sync as one fsync, when the
// wrapped FS can sync one (FileSystemSyncer).
func (t timedFS) SyncFileSystem(path string) error {
	s, ok := t.FS.(FileSystemSyncer)
	if !ok {
		return errors.ErrUnsupported
	}
	start := time.Now()
	err := s.SyncFileSystem(path)
	t.observe(time.Since(start))
	return err
}
