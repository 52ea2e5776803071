package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FileSystemSyncer is an FS that can make everything written to the file
// system holding a path durable at once, as syncfs(2) does: OS on Linux,
// a crashfs.FS always, Timed when what it wraps is one.
type FileSystemSyncer interface {
	SyncFileSystem(path string) error
}

// SyncFileSystem makes everything written to the file system of fs (nil:
// OS) holding path durable, when fs is a FileSystemSyncer; otherwise it
// returns errors.ErrUnsupported and does nothing, and the caller fsyncs
// file by file.
func SyncFileSystem(fs FS, path string) error {
	if fs == nil {
		fs = OS
	}
	s, ok := fs.(FileSystemSyncer)
	if !ok {
		return errors.ErrUnsupported
	}
	return s.SyncFileSystem(path)
}

// VolumeSizer is an FS that can tell the size of the file system holding
// a path: OS on Linux, macOS and FreeBSD, and the FSes wrapping one
// (Timed, faultfs.FS).
type VolumeSizer interface {
	VolumeBytes(path string) (total, usable int64)
}

// VolumeBytes returns the total and the usable (by an unprivileged user)
// size in bytes of the file system of fs (nil: OS) holding path, -1, -1
// when unknown or when fs is no VolumeSizer.
func VolumeBytes(fs FS, path string) (total, usable int64) {
	if fs == nil {
		fs = OS
	}
	v, ok := fs.(VolumeSizer)
	if !ok {
		return -1, -1
	}
	return v.VolumeBytes(path)
}

// TempSuffix ends the name of the temporary file WriteFileAtomic writes
// beside its target (path + TempSuffix). A crash may leave one behind: the
// next WriteFileAtomic of the same path overwrites it, and the owner of
// the directory may remove it (lib/log's Open does).
const TempSuffix = ".tmp"

// SyncDir fsyncs the directory dir of fs (nil: OS), making the entries
// created, renamed and removed in it durable.
func SyncDir(fs FS, dir string) error {
	if fs == nil {
		fs = OS
	}
	d, err := fs.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic replaces the file at path of fs (nil: OS) with data: it
// writes path+TempSuffix with permissions perm, fsyncs it, renames it
// over path and fsyncs the directory. A crash at any point leaves path
// with its old contents (or missing, if it was) or the new ones, never a
// mix; once it returns nil the new contents are durable. On error path
// holds the old contents or the new, and the temporary file is removed.
func WriteFileAtomic(fs FS, path string, data []byte, perm os.FileMode) error {
	if fs == nil {
		fs = OS
	}
	tmp := path + TempSuffix
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = SyncDir(fs, filepath.Dir(path))
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// MkdirAllDurable is MkdirAll of fs (nil: OS) whose new directories
// survive a crash once it returns: it fsyncs the parent of each directory
// it creates, and the parent of dir even when dir exists, since an
// earlier process may have created dir and died before that fsync.
// perm is that of every directory it creates.
func MkdirAllDurable(fs FS, dir string, perm os.FileMode) error {
	if fs == nil {
		fs = OS
	}
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	if len(created) == 0 {
		created = []string{filepath.Clean(dir)}
	}
	for _, d := range created {
		if err := SyncDir(fs, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// MoveDir renames the directory from to to in the same parent, on fs
// (nil: OS), and makes the rename durable with an fsync of the parent. A
// missing from is an error satisfying errors.Is(err, os.ErrNotExist).
func MoveDir(fs FS, from, to string) error {
	if fs == nil {
		fs = OS
	}
	if err := fs.Rename(from, to); err != nil {
		return err
	}
	return SyncDir(fs, filepath.Dir(to))
}

// ReadFile returns the contents of the file at path of fs (nil: OS); a
// missing file is an error satisfying errors.Is(err, os.ErrNotExist).
func ReadFile(fs FS, path string) ([]byte, error) {
	if fs == nil {
		fs = OS
	}
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b[:n], nil
}
