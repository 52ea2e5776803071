package vfs

import (
	"os"
	"time"
)

// Timed wraps fs (nil: OS) so that every fsync of a file or directory
// made through it reports its duration to observe, which may be called
// concurrently. Nothing else changes: reads and writes go straight to
// fs's files, OS() included, so zero-copy reads still work. The result is
// a FileSystemSyncer when fs is one, and times a whole file system's sync
// as one fsync.
func Timed(fs FS, observe func(time.Duration)) FS {
	if fs == nil {
		fs = OS
	}
	t := timedFS{fs, observe}
	if s, ok := fs.(FileSystemSyncer); ok {
		return timedSyncer{t, s}
	}
	return t
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

// VolumeBytes asks the wrapped FS (VolumeSizer).
func (t timedFS) VolumeBytes(path string) (total, usable int64) { return VolumeBytes(t.FS, path) }

// timedSyncer is a timedFS whose FS can sync a whole file system.
type timedSyncer struct {
	timedFS
	syncer FileSystemSyncer
}

func (t timedSyncer) SyncFileSystem(path string) error {
	start := time.Now()
	err := t.syncer.SyncFileSystem(path)
	t.observe(time.Since(start))
	return err
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
