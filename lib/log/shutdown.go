package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CleanShutdown is what a Close that fsynced everything knows of the log it
// leaves, for the next Open (Options.Clean): the log end offset, which is
// the recovery point then, and the active segment's base offset and size.
// Open trusts it only when the files agree (see Options.Clean).
type CleanShutdown struct {
	EndOffset  int64
	ActiveBase int64
	ActiveSize int64
}

// CleanShutdown returns what the last Close left, and whether that Close
// fsynced the whole log and its checkpoints; false while the log is open
// or when Close failed.
func (l *Log) CleanShutdown() (CleanShutdown, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed || l.closedClean == nil {
		return CleanShutdown{}, false
	}
	return *l.closedClean, true
}

// recordCleanCloseLocked notes, at the end of a Close that flushed and
// checkpointed everything, what the next Open may trust.
func (l *Log) recordCleanCloseLocked() {
	act := l.active()
	l.closedClean = &CleanShutdown{EndOffset: l.end, ActiveBase: act.base, ActiveSize: act.size}
}

// trustCleanLocked reports whether Options.Clean agrees with what load
// found: the recovery point checkpoint at the recorded log end, the
// active segment of the recorded base and size, a readable leader-epoch
// history, and, walking the batch headers from the active segment's last
// offset index entry (at most log.index.interval.bytes and one batch),
// batches that end exactly at the recorded size and offset. A record that
// disagrees is logged and ignored: the log is recovered as after a crash.
func (l *Log) trustCleanLocked(c *CleanShutdown, rp int64, rpErr, epErr error) bool {
	if c == nil {
		return false
	}
	act := l.active()
	why := ""
	switch {
	case rpErr != nil:
		why = "no recovery point checkpoint"
	case epErr != nil:
		why = "no leader-epoch checkpoint"
	case rp != c.EndOffset:
		why = fmt.Sprintf("recovery point %d, recorded log end %d", rp, c.EndOffset)
	case act.base != c.ActiveBase || act.size != c.ActiveSize:
		why = fmt.Sprintf("active segment %s of %d bytes, recorded %s of %d bytes",
			segmentName(act.base, logExt), act.size, segmentName(c.ActiveBase, logExt), c.ActiveSize)
	case c.EndOffset < act.base || (act.size == 0) != (c.EndOffset == act.base):
		why = fmt.Sprintf("recorded log end %d does not fit segment %s", c.EndOffset, segmentName(act.base, logExt))
	}
	if why == "" {
		if err := l.checkActiveTailLocked(c); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		l.logger.Warn("clean-shutdown record does not match the files; recovering the log", "reason", why)
		return false
	}
	return true
}

// checkActiveTailLocked opens the active segment and its indexes, keeps
// the sane prefix of the indexes, and walks the headers after the last
// offset index entry to the end of the segment; they must end at
// c.EndOffset and at the segment's size. On success the segment is left
// open with its indexes in memory, as recoverSegment leaves it.
func (l *Log) checkActiveTailLocked(c *CleanShutdown) (err error) {
	seg := l.active()
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, seg.base)
	sf, err := l.files.get(l.segFiles, l.fs, logPath)
	if err != nil {
		return err
	}
	f := sf
	defer func() {
		if err != nil {
			sf.release()
		}
	}()
	idx, _ := readFile(l.fs, indexPath)
	tidx, _ := readFile(l.fs, timeIndexPath)
	maxRel := c.EndOffset - seg.base
	n := validOffsetPrefix(idx[:len(idx)/offsetEntrySize*offsetEntrySize], seg.size, maxRel)
	m := validTimePrefix(tidx[:len(tidx)/timeEntrySize*timeEntrySize], maxRel)
	pos, next := int64(0), seg.base
	if n > 0 {
		rel, p := offsetEntry(idx, n-1)
		pos, next = p, seg.base+int64(rel)
	}
	for pos < seg.size {
		h, err := readHeader(f, pos)
		if err != nil {
			return fmt.Errorf("batch header at %d of %s: %w", pos, segmentName(seg.base, logExt), err)
		}
		if h.BaseOffset != next || pos+int64(h.Size()) > seg.size {
			return fmt.Errorf("batch at %d of %s holds offset %d, expected %d", pos, segmentName(seg.base, logExt), h.BaseOffset, next)
		}
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	if next != c.EndOffset {
		return fmt.Errorf("segment %s ends at offset %d, recorded %d", segmentName(seg.base, logExt), next, c.EndOffset)
	}
	seg.idx = idx[:n*offsetEntrySize]
	seg.tidx = tidx[:m*timeEntrySize]
	seg.resetIndexState()
	seg.idxFlushed, seg.tidxFlushed = len(seg.idx), len(seg.tidx)
	if len(seg.idx) != len(idx) {
		seg.idxFlushed = -1
	}
	if len(seg.tidx) != len(tidx) {
		seg.tidxFlushed = -1
	}
	seg.file = sf
	seg.lastUse.Store(l.useClock.Add(1))
	l.scannedEnd = c.EndOffset
	return nil
}

// checkpointCleanLocked ends a load that trusted a clean shutdown: a
// clean Close fsynced every checkpoint, so only one whose contents would
// change is written again.
func (l *Log) checkpointCleanLocked() error {
	if l.durableCkpt == nil {
		l.durableCkpt = map[string][]byte{}
	}
	for _, ck := range l.checkpointContentsLocked() {
		if b, err := readFile(l.fs, l.path(ck.name)); err == nil && bytes.Equal(b, ck.data) {
			l.durableCkpt[ck.name] = ck.data
		}
	}
	return l.checkpointAllLocked()
}

// writeCheckpointLocked replaces a checkpoint file unless this process
// knows it durable with these contents already.
func (l *Log) writeCheckpointLocked(name string, data []byte) error {
	if old, ok := l.durableCkpt[name]; ok && bytes.Equal(old, data) {
		return nil
	}
	delete(l.durableCkpt, name)
	if err := l.writeAtomic(name, data); err != nil {
		return err
	}
	if l.durableCkpt == nil {
		l.durableCkpt = map[string][]byte{}
	}
	l.durableCkpt[name] = data
	return nil
}

// The clean-shutdown file of a data directory: what Close left of each
// log (WriteCleanShutdownFile), for the Opens of the next start.
//
//	mq clean-shutdown 1
//	DIR END_OFFSET ACTIVE_BASE ACTIVE_SIZE     (one line per log)
//	crc32c HEX                                 (of every line before)
const cleanShutdownKind = "clean-shutdown"

// WriteCleanShutdownFile writes logs (by directory name) to path,
// atomically and durably.
func WriteCleanShutdownFile(fsys FS, path string, logs map[string]CleanShutdown) error {
	if fsys == nil {
		fsys = OSFS
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "mq %s 1\n", cleanShutdownKind)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range logs {
			if !yield(k) {
				return
			}
		}
	}) {
		c := logs[name]
		fmt.Fprintf(&b, "%s %d %d %d\n", name, c.EndOffset, c.ActiveBase, c.ActiveSize)
	}
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return writeFileAtomic(fsys, filepath.Dir(path), filepath.Base(path), b.Bytes())
}

// TakeCleanShutdownFile reads the clean-shutdown file at path and removes
// it durably before returning, so that a crash from here on leaves no
// record to trust. A missing file is an empty map and no error; a damaged
// one is an error (and removed too).
func TakeCleanShutdownFile(fsys FS, path string) (map[string]CleanShutdown, error) {
	if fsys == nil {
		fsys = OSFS
	}
	b, err := readFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]CleanShutdown{}, nil
	}
	var logs map[string]CleanShutdown
	if err == nil {
		logs, err = decodeCleanShutdown(b)
	}
	if rerr := fsys.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return nil, rerr
	}
	if serr := syncDir(fsys, filepath.Dir(path)); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, fmt.Errorf("log: %s: %w", filepath.Base(path), err)
	}
	return logs, nil
}

func decodeCleanShutdown(b []byte) (map[string]CleanShutdown, error) {
	body, sum, ok := cutLastLine(b)
	if !ok {
		return nil, errors.New("no checksum line")
	}
	var want uint32
	if _, err := fmt.Sscanf(sum, "crc32c %x", &want); err != nil || crc32.Checksum(body, castagnoli) != want {
		return nil, errors.New("checksum mismatch")
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, math.MaxInt32)
	if !sc.Scan() || sc.Text() != "mq "+cleanShutdownKind+" 1" {
		return nil, errors.New("not a clean-shutdown file of version 1")
	}
	logs := map[string]CleanShutdown{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			return nil, fmt.Errorf("bad line %q", sc.Text())
		}
		var v [3]int64
		for i := range v {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("bad line %q", sc.Text())
			}
			v[i] = n
		}
		logs[f[0]] = CleanShutdown{EndOffset: v[0], ActiveBase: v[1], ActiveSize: v[2]}
	}
	return logs, sc.Err()
}

// cutLastLine splits b (ending in a newline) before its last line.
func cutLastLine(b []byte) (body []byte, last string, ok bool) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, "", false
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	if i < 0 {
		return nil, "", false
	}
	return b[:i+1], string(b[i+1 : len(b)-1]), true
}

// MakeDirs creates the directories names in parent, as the logs of
// several new partitions, and makes their entries durable with one fsync
// of parent; Open them with Options.DirDurable.
func MakeDirs(fsys FS, parent string, names []string) error {
	if fsys == nil {
		fsys = OSFS
	}
	if len(names) == 0 {
		return nil
	}
	if err := mkdirAllDurable(fsys, parent); err != nil {
		return err
	}
	for _, name := range names {
		if err := fsys.MkdirAll(filepath.Join(parent, name), 0o755); err != nil {
			return err
		}
	}
	return syncDir(fsys, parent)
}
