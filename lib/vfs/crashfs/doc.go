// Package crashfs is an in-memory vfs.FS for tests that can lose power:
// it keeps apart what was written and what an fsync made durable, and
// Crash returns the file system a machine would find on reboot.
//
//	fs := crashfs.New(crashfs.Strict, seed)
//	l, err := log.Open("/topic-0", cfg, log.Options{FS: fs})
//	... // appends, flushes
//	rebooted := fs.Crash()           // or fs.CrashAfter(n), then fs.Crashed()
//	l2, err := log.Open("/topic-0", cfg, log.Options{FS: rebooted})
//
// What survives a crash follows a POSIX file system on a disk with a
// volatile cache: a file's contents are durable once the file is
// fsynced; a directory entry (a file created, renamed or removed, a
// directory made) once its directory is fsynced, so a synced file whose
// entry is not is lost; SyncFileSystem makes everything durable, as
// syncfs(2) does. In Strict mode nothing else survives. In Torn mode
// each file and directory keeps a random prefix of its changes since its
// last fsync, the first one lost maybe torn, drawn from the seed given to
// New: a test that prints its seed replays its crashes.
//
// CrashAfter(n) takes the crash between two operations, after the n-th
// mutating one, so a test can crash at every point of a sequence; Ops
// counts them. SetSizeLimit makes it a full disk.
//
// Every method of an FS and of its files is safe for concurrent use,
// Crash included; the crashed FS goes on working, and the one Crash
// returns is independent of it.
package crashfs
