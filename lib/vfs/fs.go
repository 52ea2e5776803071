package vfs

import (
	"io"
	"os"
	"syscall"
)

// FS is the file system the server's storage works on: what it needs and
// no more, so that tests can inject faults (lib/vfs/faultfs) and cut the
// power (lib/vfs/crashfs). A directory is fsynced by opening it with
// os.O_RDONLY and calling Sync (SyncDir). Implementations must be safe for
// concurrent use.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(path string, perm os.FileMode) error
	Stat(name string) (os.FileInfo, error)
}

// File is an open file of an FS. Storage code writes with WriteAt (pwrite)
// and reads with ReadAt (pread), so a File's seek offset is never used.
// ReadAt and WriteAt may be called concurrently; the other methods may be
// called concurrently with them, Close excepted.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	// OS returns the underlying *os.File for zero-copy reads (sendfile),
	// or nil when there is none.
	OS() *os.File
}

// OS is the real file system. On Linux it is a FileSystemSyncer, on
// Linux, macOS and FreeBSD a VolumeSizer.
var OS FS = osFS{}

type osFS struct{}

// OpenFile opens with open(2) and wraps the descriptor with os.NewFile,
// not with os.OpenFile: os.OpenFile offers every file it opens to the
// runtime's poller, which refuses regular files and directories, at the
// cost of four fcntl(2) calls and an epoll_ctl(2) each, which a node
// opening thousands of logs at start would pay for every segment.
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

// FileOf returns f as a File of OS, for a file opened outside any FS.
func FileOf(f *os.File) File { return osFile{f} }

type osFile struct{ *os.File }

func (f osFile) OS() *os.File { return f.File }
