// Package faultfs is a vfs.FS for tests that fails on command: a write
// that fails with nothing written or part of it (a short write), a full
// disk after so many more bytes, a failing fsync, truncation or open.
//
//	fs := faultfs.New(nil)        // the real file system underneath
//	fs.NoSpaceAfter(".log", 100)  // segment writes fail with ENOSPC 100 bytes from now
//	l, err := log.Open(dir, cfg, log.Options{FS: fs})
//	...
//	fs.Clear()                    // the disk has room again
//
// A Fault names the operation, the files it applies to (by the end of
// their name), the error (EIO unless said) and how many times it fires;
// FailNextWrite, ShortNextWrite, NoSpaceAfter, FailNextSync,
// FailNextTruncate and FailOpens arm the common ones. Reads, renames,
// removals and directory operations are never failed.
//
// An FS, and every file it opens, is safe for concurrent use; Inject and
// Clear may be called while other goroutines use it.
package faultfs
