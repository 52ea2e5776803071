package log

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/mqproject/mq/lib/vfs"
)

// Files bounds the descriptors of segment data files that the logs sharing
// it hold open (log.max.open.files): one per broker, given to every Log it
// opens through Options.Files. A segment's file is opened on first use and
// stays open while it is used; once idle it is on an LRU list, and opening
// another file while Max are open closes the least recently used idle one.
// The next use of a closed one opens it again, by name, so a log with many
// partitions needs no descriptor per partition.
//
// A file in use is never closed: a write, an fsync, a read or a sendfile
// holds it (SegmentFile.AcquireFile) for the length of the call. When more
// than Max are in use at once, opening one more exceeds Max rather than
// wait (waiting could deadlock a caller holding another); the excess is
// closed as the files fall idle. A file whose name no longer names it (its
// segment deleted, or replaced by a cleaned one) is kept open, outside the
// list, until the last Region holding it is released: it could not be
// opened again.
//
// Indexes need no descriptor: they are read into memory when a segment is
// opened and written with open-write-close (index.go).
//
// Files is safe for concurrent use.
type Files struct {
	max int

	mu      sync.Mutex
	open    int       // descriptors open (or being opened)
	idle    fileList  // open, not in use, not retired; front most recent
	peak    int       // largest open seen
	opening sync.Cond // signalled when an open finishes

	opens, evictions atomic.Uint64
}

// NewFiles returns a Files that keeps at most max segment files open
// (max < 1 means DefaultMaxOpenFiles()).
func NewFiles(max int) *Files {
	if max < 1 {
		max = DefaultMaxOpenFiles()
	}
	fs := &Files{max: max}
	fs.opening.L = &fs.mu
	return fs
}

// DefaultMaxOpenFiles is the default of log.max.open.files: half of the
// soft RLIMIT_NOFILE of the process (the Go runtime raises it to the hard
// limit at start), at least 16. The other half is left to client
// connections, listeners and the short-lived descriptors of checkpoints,
// index writes and directory fsyncs.
func DefaultMaxOpenFiles() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 512
	}
	return int(max(min(rl.Cur/2, 1<<20), 16))
}

// defaultFiles serves the logs opened without Options.Files (tests may
// replace it before opening any).
var defaultFiles = sync.OnceValue(func() *Files { return NewFiles(0) })

// Max is the bound.
func (fs *Files) Max() int { return fs.max }

// FilesStats are counters of a Files.
type FilesStats struct {
	Open      int    // descriptors open now
	Peak      int    // most descriptors open at once so far
	Opens     uint64 // opens, first and again
	Evictions uint64 // idle descriptors closed to stay within the bound
}

// Stats returns the counters.
func (fs *Files) Stats() FilesStats {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return FilesStats{Open: fs.open, Peak: fs.peak, Opens: fs.opens.Load(), Evictions: fs.evictions.Load()}
}

// SegmentFile is a segment data file whose descriptor a Files may close
// while it is idle and open again when it is next used. Its lifetime is
// counted in references (the log's own while the segment is loaded, one per
// Region); the descriptor is counted in uses. Every field is guarded by
// Files.mu.
type SegmentFile struct {
	files *Files // nil: a file outside any Files (RegionOf), never closed by it
	set   fileSet
	fs    vfs.FS
	path  string

	f          vfs.File // nil while closed
	refs       int      // references; at 0 the descriptor is closed and the file forgotten
	uses       int      // callers doing I/O with f now
	opening    bool     // an open of f is under way without Files.mu
	retired    bool     // path no longer names this file: kept open until refs is 0
	prev, next *SegmentFile
	listed     bool // on Files.idle
}

// fileSet is one log's segment files not retired, by path, so that a
// segment opened again while Regions still hold its file shares it (and
// retiring the name reaches them). Guarded by Files.mu.
type fileSet map[string]*SegmentFile

// get returns the file at path with a reference for the caller, opening it
// when it is not open. A file of set already known (another reference
// holds it) is shared.
func (fs *Files) get(set fileSet, fsys vfs.FS, path string) (*SegmentFile, error) {
	fs.mu.Lock()
	sf := set[path]
	if sf != nil {
		sf.refs++
	} else {
		sf = &SegmentFile{files: fs, set: set, fs: fsys, path: path, refs: 1}
		set[path] = sf
	}
	fs.mu.Unlock()
	if _, err := sf.use(); err != nil {
		sf.release()
		return nil, err
	}
	sf.done()
	return sf, nil
}

// create opens a new file at path with open and registers it, with a
// reference for the caller. Room is made first, so that the bound holds
// while open runs.
func (fs *Files) create(set fileSet, fsys vfs.FS, path string, open func() (vfs.File, error)) (*SegmentFile, error) {
	fs.mu.Lock()
	fs.retireLocked(set, path)
	fs.open++
	fs.evictLocked()
	fs.mu.Unlock()
	f, err := open()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err != nil {
		fs.open--
		return nil, err
	}
	fs.opens.Add(1)
	fs.peak = max(fs.peak, fs.open)
	sf := &SegmentFile{files: fs, set: set, fs: fsys, path: path, refs: 1, f: f}
	set[path] = sf
	sf.idleLocked()
	return sf, nil
}

// adopt registers f, a file opened already that will be at path (the
// cleaner's output), with a reference and one use for the caller: it is
// not closed until done.
func (fs *Files) adopt(set fileSet, fsys vfs.FS, path string, f vfs.File) *SegmentFile {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.retireLocked(set, path)
	sf := &SegmentFile{files: fs, set: set, fs: fsys, path: path, refs: 1, uses: 1, f: f}
	set[path] = sf
	fs.open++
	fs.opens.Add(1)
	fs.peak = max(fs.peak, fs.open)
	fs.evictLocked()
	return sf
}

// retire tells fs that path is about to be removed or replaced: the file
// of set known by that name, when some reference still holds it, is
// opened if it was closed and kept open until the last reference goes.
func (fs *Files) retire(set fileSet, path string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.retireLocked(set, path)
}

// retireAll retires every file of set (the log is closed: nothing will
// open them again, and Regions may outlive the names).
func (fs *Files) retireAll(set fileSet) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for path := range set {
		fs.retireLocked(set, path)
	}
}

func (fs *Files) retireLocked(set fileSet, path string) {
	sf := set[path]
	if sf == nil {
		return
	}
	delete(set, path)
	for sf.opening {
		fs.opening.Wait()
	}
	sf.retired = true
	fs.idle.remove(sf)
	if sf.f == nil {
		// Rare: a Region of an idle file outlives its name. Open it
		// while the name is still there; a failure fails the Region's
		// read later, never returns other bytes.
		fs.open++
		fs.evictLocked()
		if f, err := sf.fs.OpenFile(path, os.O_RDWR, 0); err == nil {
			sf.f = f
			fs.opens.Add(1)
			fs.peak = max(fs.peak, fs.open)
		} else {
			fs.open--
		}
	}
}

// evictLocked closes idle files, least recently used first, while more
// than max are open.
func (fs *Files) evictLocked() {
	for fs.open > fs.max {
		victim := fs.idle.back()
		if victim == nil {
			return
		}
		fs.idle.remove(victim)
		_ = victim.f.Close()
		victim.f = nil
		fs.open--
		fs.evictions.Add(1)
	}
}

// errFileReleased is the error of using a SegmentFile with no reference.
var errFileReleased = errors.New("log: segment file released")

// use returns the open file for one I/O call, opening it again when Files
// closed it; call done after.
func (sf *SegmentFile) use() (vfs.File, error) {
	fs := sf.files
	if fs == nil {
		return sf.f, nil
	}
	fs.mu.Lock()
	for sf.opening {
		fs.opening.Wait()
	}
	if sf.refs == 0 {
		fs.mu.Unlock()
		return nil, errFileReleased
	}
	if sf.f != nil {
		sf.uses++
		fs.idle.remove(sf)
		f := sf.f
		fs.mu.Unlock()
		return f, nil
	}
	if sf.retired {
		fs.mu.Unlock()
		return nil, fmt.Errorf("log: open %s again: %w", sf.path, os.ErrNotExist)
	}
	// Make room first, so that the bound holds while the open runs
	// without the lock.
	fs.open++
	fs.evictLocked()
	sf.opening = true
	fs.mu.Unlock()
	f, err := sf.fs.OpenFile(sf.path, os.O_RDWR, 0)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sf.opening = false
	fs.opening.Broadcast()
	if err != nil {
		fs.open--
		return nil, fmt.Errorf("log: open segment file: %w", err)
	}
	fs.opens.Add(1)
	fs.peak = max(fs.peak, fs.open)
	sf.f = f
	sf.uses++
	return f, nil
}

// done ends one use.
func (sf *SegmentFile) done() {
	fs := sf.files
	if fs == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sf.uses--
	sf.idleLocked()
}

// idleLocked files sf as idle, or closes it, once nothing uses it.
func (sf *SegmentFile) idleLocked() {
	fs := sf.files
	if sf.uses > 0 || sf.f == nil {
		return
	}
	if sf.refs == 0 {
		_ = sf.f.Close()
		sf.f = nil
		fs.open--
		return
	}
	if !sf.retired {
		fs.idle.pushFront(sf)
	}
	fs.evictLocked()
}

// acquire adds a reference.
func (sf *SegmentFile) acquire() {
	if fs := sf.files; fs != nil {
		fs.mu.Lock()
		sf.refs++
		fs.mu.Unlock()
	}
}

// release drops a reference; the last one closes the descriptor (once no
// call uses it) and forgets the file.
func (sf *SegmentFile) release() {
	fs := sf.files
	if fs == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sf.refs--
	if sf.refs > 0 {
		return
	}
	if sf.set[sf.path] == sf {
		delete(sf.set, sf.path)
	}
	fs.idle.remove(sf)
	sf.idleLocked()
}

// AcquireFile returns the open *os.File for one read of it (a sendfile, a
// pread), opening it again when it was closed while idle. Call ReleaseFile
// once done; until then it stays open. It fails when the file system has
// no *os.File (a faultfs.FS) or the file cannot be opened.
func (sf *SegmentFile) AcquireFile() (*os.File, error) {
	f, err := sf.use()
	if err != nil {
		return nil, err
	}
	osf := f.OS()
	if osf == nil {
		sf.done()
		return nil, errors.New("log: segment file has no *os.File")
	}
	return osf, nil
}

// ReleaseFile ends the use AcquireFile began.
func (sf *SegmentFile) ReleaseFile() { sf.done() }

// ReadAt reads from the file (pread), opening it when needed.
func (sf *SegmentFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := sf.use()
	if err != nil {
		return 0, err
	}
	defer sf.done()
	return f.ReadAt(p, off)
}

// WriteAt writes to the file (pwrite), opening it when needed.
func (sf *SegmentFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := sf.use()
	if err != nil {
		return 0, err
	}
	defer sf.done()
	return f.WriteAt(p, off)
}

// Sync fsyncs the file. A descriptor closed while idle and opened again
// still reports a write-back error no descriptor has seen (Linux keeps it
// with the file, not the descriptor, since 4.13).
func (sf *SegmentFile) Sync() error {
	f, err := sf.use()
	if err != nil {
		return err
	}
	defer sf.done()
	return f.Sync()
}

// Truncate cuts the file to size.
func (sf *SegmentFile) Truncate(size int64) error {
	f, err := sf.use()
	if err != nil {
		return err
	}
	defer sf.done()
	return f.Truncate(size)
}

// fileList is an intrusive doubly linked list of SegmentFiles.
type fileList struct{ front, tail *SegmentFile }

func (l *fileList) pushFront(sf *SegmentFile) {
	if sf.listed {
		l.remove(sf)
	}
	sf.prev, sf.next, sf.listed = nil, l.front, true
	if l.front != nil {
		l.front.prev = sf
	}
	l.front = sf
	if l.tail == nil {
		l.tail = sf
	}
}

func (l *fileList) remove(sf *SegmentFile) {
	if !sf.listed {
		return
	}
	if sf.prev != nil {
		sf.prev.next = sf.next
	} else {
		l.front = sf.next
	}
	if sf.next != nil {
		sf.next.prev = sf.prev
	} else {
		l.tail = sf.prev
	}
	sf.prev, sf.next, sf.listed = nil, nil, false
}

func (l *fileList) back() *SegmentFile { return l.tail }
