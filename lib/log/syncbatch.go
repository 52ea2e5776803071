package log

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/mqproject/mq/lib/vfs"
)

// SyncBatch lets many logs opened together (Options.Batch) share two
// syncs of the whole file system instead of two fsyncs of every
// checkpoint they write: creating a partition writes five checkpoints
// and its leader epoch, and recovering one after a crash rewrites
// several. While a log is in a batch, a checkpoint is written to its
// temporary file with no fsync, and the rename into place waits for
// Commit, which
//
//  1. syncs the file system: the temporary files (and whatever else the
//     logs wrote) are durable;
//  2. renames each temporary file over its checkpoint;
//  3. syncs the file system again: the renames are durable.
//
// A crash before step 2 leaves every checkpoint as it was before the
// batch, a crash during or after it each checkpoint either old or new,
// never a renamed file whose contents are lost: what writing each with
// its own fsyncs guarantees. Nothing a log in a batch wrote is durable
// before Commit returns, so the caller must neither serve those logs nor
// report them created before, and must not use them during Commit.
// After Commit the logs write their checkpoints one by one again.
type SyncBatch struct {
	fs   vfs.FS
	sync vfs.FileSystemSyncer
	root string // a path on the file system to sync

	mu      sync.RWMutex // writes hold it shared, Commit exclusively
	done    bool         // Commit has started: write directly
	listMu  sync.Mutex   // guards renames and logs
	renames map[string]string
	logs    []*Log
}

// NewSyncBatch returns a batch for logs on fsys (nil: vfs.OS) under root,
// or nil when fsys cannot sync a whole file system (is no
// vfs.FileSystemSyncer): a nil batch in Options.Batch is no batch.
func NewSyncBatch(fsys vfs.FS, root string) *SyncBatch {
	if fsys == nil {
		fsys = vfs.OS
	}
	s, ok := fsys.(vfs.FileSystemSyncer)
	if !ok {
		return nil
	}
	return &SyncBatch{fs: fsys, sync: s, root: root, renames: map[string]string{}}
}

// Add puts an open log in the batch, as Options.Batch does at Open, so
// that its Close (and its checkpoints until Commit) fsync nothing: a
// broker closing many logs at shutdown commits once, then records the
// clean shutdown. A log must not be appended to once in a batch.
// A nil batch adds nothing.
func (b *SyncBatch) Add(l *Log) { b.join(l) }

// join puts l in the batch, unless it is nil or committed already.
func (b *SyncBatch) join(l *Log) {
	if b == nil {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.done {
		return
	}
	b.listMu.Lock()
	b.logs = append(b.logs, l)
	b.listMu.Unlock()
	l.batch.Store(b)
}

// write writes dir/name's temporary file for Commit to rename, and
// reports false when the batch is committed already (the caller writes
// the file itself).
func (b *SyncBatch) write(dir, name string, data []byte) (bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.done {
		return false, nil
	}
	path := filepath.Join(dir, name)
	tmp := path + vfs.TempSuffix
	f, err := b.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return true, fmt.Errorf("write %s: %w", name, err)
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = b.fs.Remove(tmp)
		return true, fmt.Errorf("write %s: %w", name, err)
	}
	b.listMu.Lock()
	b.renames[path] = tmp
	b.listMu.Unlock()
	return true, nil
}

// active reports whether writes still wait for Commit.
func (b *SyncBatch) active() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return !b.done
}

// Commit makes everything the batch's logs wrote durable (see
// SyncBatch) and lets them write on their own again. Calling it again,
// or on a nil batch, does nothing. On error some checkpoints may be
// the ones from before the batch: close the logs rather than serve them.
func (b *SyncBatch) Commit() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	b.mu.Unlock()
	b.listMu.Lock()
	renames, logs := b.renames, b.logs
	b.renames, b.logs = nil, nil
	b.listMu.Unlock()
	for _, l := range logs {
		l.batch.CompareAndSwap(b, nil)
	}
	if err := b.sync.SyncFileSystem(b.root); err != nil {
		for _, l := range logs {
			l.forgetDurable()
		}
		return fmt.Errorf("log: sync the file system of %s: %w", b.root, err)
	}
	var errs []error
	// The logs' data is durable: their Checkpoints may have it now.
	for _, l := range logs {
		if err := l.publish(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(renames)) {
		if err := b.fs.Rename(renames[path], path); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", filepath.Base(path), err))
		}
	}
	if err := b.sync.SyncFileSystem(b.root); err != nil {
		errs = append(errs, fmt.Errorf("log: sync the file system of %s: %w", b.root, err))
	}
	if len(errs) > 0 {
		for _, l := range logs {
			l.forgetDurable()
		}
	}
	return errors.Join(errs...)
}

// forgetDurable drops what the log knows of its checkpoints' contents on
// disk, after a batch that may not have written them: each is written
// again when next checkpointed.
func (l *Log) forgetDurable() {
	l.hwMu.Lock()
	l.hwCheckpointed = -1
	l.hwMu.Unlock()
	l.mu.Lock()
	l.durableCkpt = nil
	l.ckptRecovery, l.ckptLogStart = -1, -1
	l.mu.Unlock()
}

// writeAtomic replaces the log's checkpoint name with data: through the
// log's batch while it has one, else with its own fsyncs
// (vfs.WriteFileAtomic).
func (l *Log) writeAtomic(name string, data []byte) error {
	if b := l.batch.Load(); b != nil {
		if ok, err := b.write(l.dir, name, data); ok {
			return err
		}
	}
	return vfs.WriteFileAtomic(l.fs, l.path(name), data, 0o644)
}

// batched reports whether the log's writes wait for its batch's Commit,
// which makes them durable: its own fsyncs of new directory entries can
// be skipped.
func (l *Log) batched() bool {
	b := l.batch.Load()
	return b != nil && b.active()
}
