package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/mqproject/mq/lib/vfs"
)

// A cleaning pass replaces a group of segments [a, E) with one segment
// based at a, in this order:
//
//  1. it writes a.log.cleaned, a.index.cleaned and a.timeindex.cleaned and
//     fsyncs them;
//  2. it renames them to *.swap, the data file last, and fsyncs the
//     directory: once a.log.swap is durable the swap is committed;
//  3. it writes sealed-segments as it is after the swap;
//  4. it removes the other segments of the group, data file first;
//  5. it renames the *.swap files over a's files, the data file last, and
//     fsyncs the directory.
//
// Open finishes a committed swap: for each a.log.swap it reads the end
// offset E of its batches (fsynced before the commit, so whole), removes
// the segments based in (a, E), rewrites sealed-segments for [a, E), and
// does step 5 (an index whose .swap is gone is removed, to be rebuilt).
// Every step of that can run again after a crash. *.cleaned files, and
// *.swap index files without a .log.swap, belong to a pass that did not
// commit: Open removes them, and the old segments are whole.
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// commitGroup swaps a group's cleaned segment in. It reports false, and
// discards the cleaned files, when the segments changed since the pass
// planned (truncation, retention, Close). An error after the commit point
// puts the log in the failed state; reopening it finishes the swap.
func (l *Log) commitGroup(p *cleanPlan, g []int, out *groupOutput) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := -1
	if !l.closed && l.truncGen == p.gen {
		first = slices.Index(l.segs, p.segs[g[0]])
	}
	ok := first >= 0 && first+len(g) < len(l.segs)
	for k, i := range g {
		if !ok {
			break
		}
		seg := p.segs[i]
		ok = l.segs[first+k] == seg && !seg.deleted && seg.size == p.sizes[i]
	}
	if !ok {
		_ = out.f.Close()
		l.removeCleaned(out.base)
		return false, nil
	}
	// The group's aborted transactions go to the new segment's index
	// before the swap commits: the first segment's file, whose name the
	// new segment takes, then holds them all, and Open keeps each entry
	// once whichever files it finds.
	groupEnd := int64(math.MaxInt64)
	if k := first + len(g); k < len(l.segs) {
		groupEnd = l.segs[k].base
	}
	var entries []byte
	for _, a := range l.aborted {
		if a.LastOffset >= out.base && a.LastOffset < groupEnd {
			entries = appendTxnEntry(entries, a)
		}
	}
	if len(entries) > 0 && !bytes.Equal(entries, l.txnFiles[out.base]) {
		if err := vfs.WriteFileAtomic(l.fs, txnIndexPath(l.dir, out.base), entries, 0o644); err != nil {
			_ = out.f.Close()
			l.removeCleaned(out.base)
			return false, fmt.Errorf("log: clean: %w", err)
		}
		l.txnFiles[out.base] = entries
	}
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, out.base)
	var err error
	for _, path := range []string{indexPath, timeIndexPath, logPath} {
		if err == nil {
			err = l.fs.Rename(path+cleanedSuffix, path+swapSuffix)
		}
	}
	if err == nil {
		err = vfs.SyncDir(l.fs, l.dir)
	}
	if err != nil {
		// Not committed: a.log.swap may be there, but Open removes
		// nothing old unless it finds a whole swap and the old segments
		// are still what it replaces, which they are.
		_ = out.f.Close()
		l.removeCleaned(out.base)
		for _, path := range []string{indexPath, timeIndexPath, logPath} {
			_ = l.fs.Remove(path + swapSuffix)
		}
		return false, fmt.Errorf("log: clean: commit %s: %w", segmentName(out.base, logExt), err)
	}

	// Committed: the log now has the new segment in memory, served from
	// the open file whatever its name.
	old := l.segs[first : first+len(g)]
	seg := &segment{base: out.base, size: out.size, maxTS: -1, rollTS: -1, sealedSize: out.size}
	seg.checked.add(checkedRange{start: 0, end: out.size, first: out.base, next: out.next})
	var oldBases []int64
	for _, s := range old {
		s.deleted = true
		s.tail = nil
		l.openClosed = slices.DeleteFunc(l.openClosed, func(o *segment) bool { return o == s })
		if s.file != nil {
			s.file.release()
			s.file, s.idx, s.tidx = nil, nil, nil
		}
		if s.base != out.base {
			oldBases = append(oldBases, s.base)
		}
	}
	l.segs = slices.Replace(l.segs, first, first+len(g), seg)
	// In use until the renames below give the file its name: closed
	// before, it could not be opened again.
	sf := l.files.adopt(l.segFiles, l.fs, logPath, out.f)
	l.installLocked(seg, sf, out.idx, out.tidx)
	l.maxTSValid = false

	err = l.checkpointSealedLocked()
	for _, b := range oldBases {
		l.removeSegmentFiles(b)
		delete(l.txnFiles, b)
	}
	for _, path := range []string{indexPath, timeIndexPath, logPath} {
		if err == nil {
			err = l.fs.Rename(path+swapSuffix, path)
		}
	}
	if err == nil {
		err = vfs.SyncDir(l.fs, l.dir)
	}
	if err != nil {
		l.files.retire(l.segFiles, logPath) // the name is not the file's: keep it open
	}
	sf.done()
	if err != nil {
		if l.failed == nil {
			l.failed = fmt.Errorf("%w: clean: swap %s: %w", ErrFailed, segmentName(out.base, logExt), err)
			l.logger.Error("log failed", "err", l.failed)
		}
		return false, l.failed
	}
	l.logger.Debug("cleaned segments", "segment", segmentName(out.base, logExt), "segments", len(g), "bytes", out.size)
	return true, nil
}

// finishSwapsLocked completes the swaps a crash interrupted and removes
// the files of passes that did not commit, before load lists the segments.
func (l *Log) finishSwapsLocked(entries []os.DirEntry) (changed bool, err error) {
	var swaps []int64
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	for name := range names {
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			l.logger.Info("removing the file of an unfinished cleaning pass", "file", name)
			_ = l.fs.Remove(l.path(name))
			changed = true
		case strings.HasSuffix(name, logExt+swapSuffix):
			if base, ext, ok := parseSegmentName(strings.TrimSuffix(name, swapSuffix)); ok && ext == logExt {
				swaps = append(swaps, base)
			}
		}
	}
	for name := range names {
		if !strings.HasSuffix(name, swapSuffix) || strings.HasSuffix(name, logExt+swapSuffix) {
			continue
		}
		if base, _, ok := parseSegmentName(strings.TrimSuffix(name, swapSuffix)); ok && names[segmentName(base, logExt)+swapSuffix] {
			continue
		}
		l.logger.Info("removing the file of an unfinished cleaning pass", "file", name)
		_ = l.fs.Remove(l.path(name))
		changed = true
	}
	slices.Sort(swaps)
	for _, base := range swaps {
		if err := l.finishSwapLocked(base, names); err != nil {
			return true, fmt.Errorf("finish cleaning %s: %w", segmentName(base, logExt), err)
		}
	}
	return changed || len(swaps) > 0, nil
}

func (l *Log) finishSwapLocked(base int64, names map[string]bool) error {
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	f, err := l.fs.OpenFile(logPath+swapSuffix, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	size := fi.Size()
	res := scanSegment(f, base, 0, size, base, true, make([]byte, 1<<20), nil)
	_ = f.Close()
	if res.ioErr != nil {
		return res.ioErr
	}
	if res.badErr != nil || res.end != size {
		// Never the case after an fsync and a committed rename; keep
		// everything as it is rather than guess.
		return fmt.Errorf("cleaned segment is not whole at position %d: %v", res.end, res.badErr)
	}
	end := res.next
	if end == base || !names[segmentName(end, logExt)] {
		// The segment after the group is never cleaned, so it is there.
		return fmt.Errorf("cleaned segment ends at offset %d, where no segment starts", end)
	}
	l.logger.Info("finishing an interrupted cleaning pass", "segment", segmentName(base, logExt), "end_offset", end)
	for name := range names {
		b, ext, ok := parseSegmentName(name)
		if ok && ext == logExt && b > base && b < end {
			l.removeSegmentFiles(b)
		}
	}
	if err := l.fixSealedLocked(base, size, end); err != nil {
		return err
	}
	for _, path := range []string{indexPath, timeIndexPath} {
		err := l.fs.Rename(path+swapSuffix, path)
		if errors.Is(err, os.ErrNotExist) {
			err = l.fs.Remove(path)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	l.files.retire(l.segFiles, logPath)
	if err := l.fs.Rename(logPath+swapSuffix, logPath); err != nil {
		return err
	}
	return vfs.SyncDir(l.fs, l.dir)
}

// fixSealedLocked makes the sealed-segments file say that the segments in
// [base, end) are one segment of size bytes.
func (l *Log) fixSealedLocked(base, size, end int64) error {
	b, err := vfs.ReadFile(l.fs, l.path(sealedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sealed, err := decodeSealed(b)
	if err != nil {
		return nil // ignored by load, with a warning
	}
	out := make([]sealedSegment, 0, len(sealed))
	added := false
	for _, s := range sealed {
		if s.base >= base && s.base < end {
			if !added {
				out = append(out, sealedSegment{base: base, size: size, next: end})
				added = true
			}
			continue
		}
		if !added && s.base > base {
			out = append(out, sealedSegment{base: base, size: size, next: end})
			added = true
		}
		out = append(out, s)
	}
	if !added {
		out = append(out, sealedSegment{base: base, size: size, next: end})
	}
	return vfs.WriteFileAtomic(l.fs, l.path(sealedFile), encodeSealed(out), 0o644)
}
