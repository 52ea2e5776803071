package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mqproject/mq/lib/vfs"
)

// Mode says what of the state not yet made durable survives a crash.
type Mode int

const (
	// Strict loses every write, truncation and directory change that
	// no fsync made durable.
	Strict Mode = iota
	// Torn keeps, of each file's and each directory's changes since
	// its last fsync, a random prefix (none, all, or some), and may tear
	// the first write it does not keep: a random part of it reaches the
	// file, possibly followed by zeros up to the write's end (the size
	// reached the disk, the data did not). Each crash draws anew from the
	// FS's seed.
	Torn
)

func (m Mode) String() string {
	switch m {
	case Strict:
		return "strict"
	case Torn:
		return "torn"
	}
	return fmt.Sprintf("crashfs.Mode(%d)", int(m))
}

// FS is an in-memory vfs.FS that keeps apart what is written and what is
// durable, as a disk behind a page cache does, so that tests can cut the
// power: Crash returns the file system a machine would find on reboot.
//
//   - WriteAt and Truncate change a file at once for every reader; the
//     file's Sync makes its contents durable.
//   - Creating a file (O_CREATE), Rename, Remove and MkdirAll change the
//     directory at once; the changes are durable once the directory itself
//     is fsynced (opened with OpenFile(dir, os.O_RDONLY, 0), then Sync). A
//     file whose data is synced but whose directory entry is not is lost.
//   - The root directory always exists.
//
// Every method is safe for concurrent use, Crash included: a crash while
// other goroutines write takes the state between two file system
// operations, and the FS goes on working (it is the dead machine's page
// cache, which nobody will read again); the rebooted one is another FS.
// Files report a nil OS(), so a log on an FS cannot lend its segments'
// *os.File: read them with Log.ReadBytes.
//
// Paths are slash separated; a relative path is taken from the root.
type FS struct {
	mu      sync.Mutex
	mode    Mode
	rng     *rand.Rand
	root    *memNode
	ops     int64 // mutating operations so far
	crashAt int64 // ops count at which the armed crash happens; -1: none
	crashed *FS   // the armed crash's result
	limit   int64 // bytes of file data allowed, 0: unlimited
	used    int64 // bytes of data in files with a name
}

// memNode is a file or a directory. Guarded by FS.mu.
type memNode struct {
	dir     bool
	perm    os.FileMode
	modTime time.Time
	linked  bool // has a name (counts towards FS.used)

	data    []byte   // file contents as read
	durable []byte   // file contents after a crash
	pending []fileOp // changes from durable to data, oldest first

	entries    map[string]*memNode // directory entries as listed
	durEntries map[string]*memNode // directory entries after a crash
	dirPending []dirOp             // changes from durEntries to entries
}

// fileOp is a write (data non-nil) or a truncation to size.
type fileOp struct {
	off  int64
	data []byte
	size int64
}

func (op fileOp) apply(b []byte) []byte {
	if op.data == nil {
		return resize(b, op.size)
	}
	if end := op.off + int64(len(op.data)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[op.off:], op.data)
	return b
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

// dirOp is one atomic change of a directory: names set to nodes, nil
// removing the name.
type dirOp []dirChange

type dirChange struct {
	name string
	node *memNode
}

func newDir(perm os.FileMode) *memNode {
	return &memNode{dir: true, perm: perm, modTime: time.Now(), linked: true,
		entries: map[string]*memNode{}, durEntries: map[string]*memNode{}}
}

// New returns an empty FS; seed drives Torn's choices.
func New(mode Mode, seed uint64) *FS {
	return &FS{mode: mode, rng: rand.New(rand.NewPCG(seed, 0x63726173)), root: newDir(0o755), crashAt: -1}
}

// Crash returns the file system after a power loss now: only what was
// durable, or with Torn some of the rest. Each call is a separate
// crash, so in Strict mode it also makes a copy of a quiescent FS
// whose files and directories are all synced.
func (c *FS) Crash() *FS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rebootLocked()
}

// CrashAfter arms a crash right after n more mutating operations (writes,
// truncations, fsyncs, file creations, renames, removals, MkdirAll), that
// is before the next one starts; Crashed returns its result. It replaces
// a crash armed before, and n < 0 disarms.
func (c *FS) CrashAfter(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed = nil
	c.crashAt = -1
	if n >= 0 {
		c.crashAt = c.ops + n
	}
}

// Crashed returns the file system after the crash CrashAfter armed, nil
// while it has not happened.
func (c *FS) Crashed() *FS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

// Ops returns the number of mutating operations so far.
func (c *FS) Ops() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// SetSizeLimit makes writes and truncations that would make the file data
// of all named files exceed n bytes fail with ENOSPC (a write does what
// fits first); 0 removes the limit. The limit survives a crash.
func (c *FS) SetSizeLimit(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = n
}

// opLocked counts a mutating operation about to start, crashing first when
// the armed crash is due.
func (c *FS) opLocked() {
	if c.ops == c.crashAt && c.crashed == nil {
		c.crashed = c.rebootLocked()
	}
	c.ops++
}

func (c *FS) rebootLocked() *FS {
	n := &FS{mode: c.mode, rng: rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64())), crashAt: -1, limit: c.limit}
	n.root = c.rebootNode(c.root, n, map[*memNode]*memNode{})
	return n
}

// keep returns how many of n unsynced changes survive a crash.
func (c *FS) keep(n int) (kept int, tear bool) {
	if c.mode == Strict || n == 0 {
		return 0, false
	}
	switch c.rng.IntN(4) {
	case 0:
		return 0, false
	case 1:
		return n, false
	}
	return c.rng.IntN(n + 1), c.rng.IntN(2) == 0
}

// rebootNode returns the node as found after a crash, in the rebooted
// file system to.
func (c *FS) rebootNode(nd *memNode, to *FS, done map[*memNode]*memNode) *memNode {
	if r := done[nd]; r != nil {
		return r
	}
	if !nd.dir {
		b := slices.Clone(nd.durable)
		k, tear := c.keep(len(nd.pending))
		for _, op := range nd.pending[:k] {
			b = op.apply(b)
		}
		if tear && k < len(nd.pending) && len(nd.pending[k].data) > 0 {
			op := nd.pending[k]
			cut := c.rng.IntN(len(op.data))
			part := op.data[:cut]
			if c.rng.IntN(2) == 0 {
				part = append(slices.Clone(part), make([]byte, len(op.data)-cut)...)
			}
			if len(part) > 0 {
				b = fileOp{off: op.off, data: part}.apply(b)
			}
		}
		r := &memNode{perm: nd.perm, modTime: nd.modTime, linked: true, data: b, durable: slices.Clone(b)}
		to.used += int64(len(b))
		done[nd] = r
		return r
	}
	entries := make(map[string]*memNode, len(nd.durEntries))
	for name, child := range nd.durEntries {
		entries[name] = child
	}
	k, _ := c.keep(len(nd.dirPending))
	for _, op := range nd.dirPending[:k] {
		for _, ch := range op {
			if ch.node == nil {
				delete(entries, ch.name)
			} else {
				entries[ch.name] = ch.node
			}
		}
	}
	r := newDir(nd.perm)
	r.modTime = nd.modTime
	done[nd] = r
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	slices.Sort(names) // the draws in a fixed order: a seed replays
	for _, name := range names {
		child := c.rebootNode(entries[name], to, done)
		r.entries[name], r.durEntries[name] = child, child
	}
	return r
}

// splitPath returns the components of a cleaned path, none for the root.
func splitPath(name string) []string {
	p := filepath.ToSlash(filepath.Clean("/" + name))
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// lookupLocked returns the node at name, nil when there is none.
func (c *FS) lookupLocked(name string) (*memNode, error) {
	nd := c.root
	for _, part := range splitPath(name) {
		if !nd.dir {
			return nil, syscall.ENOTDIR
		}
		if nd = nd.entries[part]; nd == nil {
			return nil, syscall.ENOENT
		}
	}
	return nd, nil
}

// parentLocked returns the directory holding name and name's last
// component.
func (c *FS) parentLocked(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", syscall.EINVAL // the root
	}
	dir, err := c.lookupLocked(strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", syscall.ENOTDIR
	}
	return dir, parts[len(parts)-1], nil
}

// changeDirLocked applies an atomic directory change; the caller accounts
// for the nodes it links and unlinks.
func (c *FS) changeDirLocked(dir *memNode, op dirOp) {
	for _, ch := range op {
		if ch.node == nil {
			delete(dir.entries, ch.name)
		} else {
			dir.entries[ch.name] = ch.node
		}
	}
	dir.dirPending = append(dir.dirPending, op)
	dir.modTime = time.Now()
}

func (c *FS) unlinkLocked(nd *memNode) {
	if nd.linked {
		nd.linked = false
		c.used -= int64(len(nd.data))
	}
}

// OpenFile opens a file or, read only, a directory (to Sync it). Supported
// flags: O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL, O_TRUNC.
func (c *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(err error) (vfs.File, error) { return nil, &os.PathError{Op: "open", Path: name, Err: err} }
	if flag&^(os.O_RDONLY|os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC) != 0 {
		return fail(syscall.EINVAL)
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	nd, err := c.lookupLocked(name)
	switch {
	case errors.Is(err, syscall.ENOENT) && flag&os.O_CREATE != 0:
		dir, base, err := c.parentLocked(name)
		if err != nil {
			return fail(err)
		}
		c.opLocked()
		nd = &memNode{perm: perm.Perm(), modTime: time.Now(), linked: true}
		c.changeDirLocked(dir, dirOp{{base, nd}})
	case err != nil:
		return fail(err)
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return fail(syscall.EEXIST)
	case nd.dir && acc != os.O_RDONLY:
		return fail(syscall.EISDIR)
	case flag&os.O_TRUNC != 0 && acc != os.O_RDONLY && !nd.dir:
		c.opLocked()
		c.truncateLocked(nd, 0)
	}
	return &memFile{fs: c, node: nd, name: name, read: acc != os.O_WRONLY, write: acc != os.O_RDONLY}, nil
}

// Remove removes a file or an empty directory.
func (c *FS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(err error) error { return &os.PathError{Op: "remove", Path: name, Err: err} }
	dir, base, err := c.parentLocked(name)
	if err != nil {
		return fail(err)
	}
	nd := dir.entries[base]
	switch {
	case nd == nil:
		return fail(syscall.ENOENT)
	case nd.dir && len(nd.entries) > 0:
		return fail(syscall.ENOTEMPTY)
	}
	c.opLocked()
	c.changeDirLocked(dir, dirOp{{base, nil}})
	c.unlinkLocked(nd)
	return nil
}

// Rename renames a file or directory, replacing a file at newpath.
func (c *FS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err} }
	odir, obase, err := c.parentLocked(oldpath)
	if err != nil {
		return fail(err)
	}
	ndir, nbase, err := c.parentLocked(newpath)
	if err != nil {
		return fail(err)
	}
	nd := odir.entries[obase]
	if nd == nil {
		return fail(syscall.ENOENT)
	}
	target := ndir.entries[nbase]
	switch {
	case target == nd:
		return nil
	case target != nil && target.dir:
		return fail(syscall.EEXIST)
	case target != nil && nd.dir:
		return fail(syscall.ENOTDIR)
	}
	c.opLocked()
	if target != nil {
		c.unlinkLocked(target)
	}
	if odir == ndir {
		c.changeDirLocked(odir, dirOp{{nbase, nd}, {obase, nil}})
		return nil
	}
	// Two directories, each durable on its own fsync.
	c.changeDirLocked(ndir, dirOp{{nbase, nd}})
	c.changeDirLocked(odir, dirOp{{obase, nil}})
	return nil
}

// ReadDir lists a directory, sorted by name.
func (c *FS) ReadDir(name string) ([]os.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.lookupLocked(name)
	if err == nil && !nd.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]os.DirEntry, 0, len(nd.entries))
	for n, child := range nd.entries {
		out = append(out, fs.FileInfoToDirEntry(child.info(n)))
	}
	slices.SortFunc(out, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// MkdirAll creates path and the missing directories above it.
func (c *FS) MkdirAll(path string, perm os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.root
	for _, part := range splitPath(path) {
		next := nd.entries[part]
		if next == nil {
			c.opLocked()
			next = newDir(perm.Perm())
			c.changeDirLocked(nd, dirOp{{part, next}})
		} else if !next.dir {
			return &os.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
		}
		nd = next
	}
	return nil
}

// Stat describes the file or directory at name.
func (c *FS) Stat(name string) (os.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.lookupLocked(name)
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	return nd.info(filepath.Base(name)), nil
}

// truncateLocked sets a file's size, counting the space.
func (c *FS) truncateLocked(nd *memNode, size int64) {
	if nd.linked {
		c.used += size - int64(len(nd.data))
	}
	nd.data = resize(nd.data, size)
	nd.pending = append(nd.pending, fileOp{size: size})
	nd.modTime = time.Now()
}

func (nd *memNode) info(name string) os.FileInfo {
	fi := memInfo{name: name, mode: nd.perm, modTime: nd.modTime}
	if nd.dir {
		fi.mode |= os.ModeDir
	} else {
		fi.size = int64(len(nd.data))
	}
	return fi
}

type memInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func (fi memInfo) Name() string       { return fi.name }
func (fi memInfo) Size() int64        { return fi.size }
func (fi memInfo) Mode() os.FileMode  { return fi.mode }
func (fi memInfo) ModTime() time.Time { return fi.modTime }
func (fi memInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memInfo) Sys() any           { return nil }

// memFile is an open file or directory of an FS. It keeps working
// after its name is removed, like an open file descriptor.
type memFile struct {
	fs          *FS
	node        *memNode
	name        string
	read, write bool
	closed      bool // guarded by fs.mu
}

func (f *memFile) check(op string, need bool) error {
	switch {
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case f.node.dir && op != "sync" && op != "stat" && op != "close":
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	case !need:
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", f.read); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	c := f.fs
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("write", f.write); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EINVAL}
	}
	c.opLocked()
	nd := f.node
	n, err := len(p), error(nil)
	if grow := off + int64(n) - int64(len(nd.data)); nd.linked && c.limit > 0 && grow > 0 && c.used+grow > c.limit {
		n = max(0, n-int(c.used+grow-c.limit))
		err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	if n > 0 {
		op := fileOp{off: off, data: slices.Clone(p[:n])}
		before := int64(len(nd.data))
		nd.data = op.apply(nd.data)
		if nd.linked {
			c.used += int64(len(nd.data)) - before
		}
		nd.pending = append(nd.pending, op)
		nd.modTime = time.Now()
	}
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	c := f.fs
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("truncate", f.write); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	c.opLocked()
	if grow := size - int64(len(f.node.data)); f.node.linked && c.limit > 0 && grow > 0 && c.used+grow > c.limit {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.ENOSPC}
	}
	c.truncateLocked(f.node, size)
	return nil
}

// Sync makes the file's contents durable; for a directory, its entries.
func (f *memFile) Sync() error {
	c := f.fs
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := f.check("sync", true); err != nil {
		return err
	}
	c.opLocked()
	nd := f.node
	if nd.dir {
		clear(nd.durEntries)
		for name, child := range nd.entries {
			nd.durEntries[name] = child
		}
		nd.dirPending = nil
		return nil
	}
	for _, op := range nd.pending {
		nd.durable = op.apply(nd.durable)
	}
	nd.pending = nil
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", true); err != nil {
		return nil, err
	}
	return f.node.info(filepath.Base(f.name)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", true); err != nil {
		return err
	}
	f.closed = true
	return nil
}

func (f *memFile) OS() *os.File { return nil }

// SyncFileSystem makes everything durable, as syncfs(2) does: every
// file's contents and every directory's entries (FS is a
// vfs.FileSystemSyncer).
func (c *FS) SyncFileSystem(string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opLocked()
	syncNode(c.root, map[*memNode]bool{})
	return nil
}

func syncNode(nd *memNode, seen map[*memNode]bool) {
	if seen[nd] {
		return
	}
	seen[nd] = true
	if !nd.dir {
		for _, op := range nd.pending {
			nd.durable = op.apply(nd.durable)
		}
		nd.pending = nil
		return
	}
	clear(nd.durEntries)
	for name, child := range nd.entries {
		nd.durEntries[name] = child
		syncNode(child, seen)
	}
	nd.dirPending = nil
}
