// Package vfs is the file-system seam of the server's storage: the FS and
// File interfaces that lib/log, lib/partition and lib/node do their file
// I/O through, the real file system (OS), and the few durable operations
// built on them. Tests pass another FS to inject faults (lib/vfs/faultfs) or to cut
// the power (lib/vfs/crashfs). Every function here takes a nil FS for OS.
//
// # Use
//
//	fs := vfs.Timed(vfs.OS, observeFsync) // optional: time every fsync
//	err := vfs.MkdirAllDurable(fs, dir, 0o750)
//	err = vfs.WriteFileAtomic(fs, filepath.Join(dir, "meta"), data, 0o640)
//	b, err := vfs.ReadFile(fs, filepath.Join(dir, "meta"))
//
// # Crash semantics
//
// A write, truncation, file creation, rename or removal is durable only
// once an fsync covers it: a file's Sync its contents, its directory's
// Sync (SyncDir) its entry. The helpers make these fsyncs, and say what a
// crash (a power loss; a killed process loses nothing the kernel
// accepted) may leave:
//
//   - SyncDir: every entry change made in the directory before it is
//     durable once it returns.
//   - WriteFileAtomic: the target holds its old contents or the new ones,
//     never a mix, and may have a leftover path+TempSuffix beside it;
//     once it returns nil, the new ones.
//   - MkdirAllDurable: once it returns nil, the directory and every
//     directory above it exist after a crash, also when an earlier process
//     created them and died before their fsyncs.
//   - MoveDir: the directory is under its old name or its new one, with
//     its contents; once it returns nil, under the new one.
//   - SyncFileSystem: once it returns nil, everything written to the file
//     system before it, files and directory entries, is durable. Only a
//     FileSystemSyncer (OS on Linux, with syncfs(2)) can; with another FS
//     it returns errors.ErrUnsupported at once, and the caller fsyncs
//     file by file.
//
// After an error each guarantee still holds except for its "once it
// returns nil" clause.
//
// VolumeBytes tells the size and the free space of the volume holding a
// path when the FS is a VolumeSizer (OS on Linux, macOS and FreeBSD, with
// statfs(2)), -1 otherwise.
//
// # Concurrency
//
// Every FS, and every function here, is safe for concurrent use, except
// that two WriteFileAtomic calls for the same path must not overlap: they
// share its temporary file. A File's ReadAt, WriteAt, Sync, Truncate and
// Stat may be called concurrently; Close once the others have returned.
package vfs
