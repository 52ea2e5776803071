package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
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
// found: the recovery point checkpoint at the recorded log end (an empty
// log may have none), the active segment of the
// recorded base and size, a readable leader-epoch history (or none yet),
// and batch headers that, walked from the active segment's last offset
// index entry at or below the recovery point, end exactly at the recorded
// size and offset. A record that disagrees is logged and ignored: the log
// is recovered as after a crash.
func (l *Log) trustCleanLocked(c *CleanShutdown, rp int64, rpErr, epErr error) bool {
	if c == nil {
		return false
	}
	act := l.active()
	why := ""
	if errors.Is(rpErr, os.ErrNotExist) {
		rp, rpErr = act.base, nil // a log with one segment and no checkpoint (see noCheckpoint)
	}
	switch {
	case rpErr != nil:
		why = "unreadable recovery point checkpoint"
	case epErr != nil && !errors.Is(epErr, os.ErrNotExist):
		why = "unreadable leader-epoch checkpoint"
	case rp != c.EndOffset:
		why = fmt.Sprintf("recovery point %d, recorded log end %d", rp, c.EndOffset)
	case act.base != c.ActiveBase || act.size != c.ActiveSize:
		why = fmt.Sprintf("active segment %s of %d bytes, recorded %s of %d bytes",
			segmentName(act.base, logExt), act.size, segmentName(c.ActiveBase, logExt), c.ActiveSize)
	case c.EndOffset < act.base || (act.size == 0) != (c.EndOffset == act.base):
		why = fmt.Sprintf("recorded log end %d does not fit segment %s", c.EndOffset, segmentName(act.base, logExt))
	}
	if why == "" {
		if err := l.walkActiveTailLocked(c, rp); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		l.logger.Warn("clean-shutdown record does not match the files; recovering the log", "reason", why)
		return false
	}
	return true
}

// walkActiveTailLocked opens the active segment and its indexes, keeps
// the sane prefix of the indexes below from, and walks the batch headers
// (no CRC) from the last offset index entry at or below from to the end
// of the segment: they must follow each other and end at c.EndOffset and
// at the segment's size. The walk indexes the batches and rebuilds the
// leader-epoch history from the first one, as a recovery scan does, for
// what a clean Close did not checkpoint (checkpointForOpenLocked keeps it
// short). On success the segment is left open with its indexes in memory.
func (l *Log) walkActiveTailLocked(c *CleanShutdown, from int64) (err error) {
	seg := l.active()
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, seg.base)
	sf, err := l.files.get(l.segFiles, l.fs, logPath)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			sf.release()
		}
	}()
	idx, tidx := l.readIndexesLocked(indexPath, timeIndexPath)
	pos, next, keepIdx, keepTidx := walkStart(sf, seg, idx, tidx, from)
	seg.idx = append([]byte(nil), keepIdx...)
	seg.tidx = append([]byte(nil), keepTidx...)
	seg.resetIndexState()
	l.epochs.truncateFrom(next)
	l.walkedFrom = next
	interval := l.cfg.IndexIntervalBytes
	buf, put := scanBuffer(seg.size - pos)
	defer put()
	res := scanSegment(sf, seg.base, pos, seg.size, next, false, buf, func(pos int64, h *record.Header) error {
		seg.indexBatch(h, pos, interval)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		return nil
	})
	name := segmentName(seg.base, logExt)
	switch {
	case res.ioErr != nil:
		return fmt.Errorf("walk %s: %w", name, res.ioErr)
	case res.badErr != nil:
		return fmt.Errorf("batch at %d of %s: %w", res.end, name, res.badErr)
	case res.next != c.EndOffset:
		return fmt.Errorf("segment %s ends at offset %d, recorded %d", name, res.next, c.EndOffset)
	}
	// The files hold what they held: a prefix of the entries now, or
	// something else to be written whole at the next flush.
	seg.idxFlushed, seg.tidxFlushed = len(idx), len(tidx)
	if !bytes.HasPrefix(seg.idx, idx) {
		seg.idxFlushed = -1
	}
	if !bytes.HasPrefix(seg.tidx, tidx) {
		seg.tidxFlushed = -1
	}
	seg.file = sf
	seg.lastUse.Store(l.useClock.Add(1))
	l.scannedEnd = c.EndOffset
	return nil
}

// walkStart returns where a walk of seg (its data file f) must start to
// cover offset from on: the last sane offset index entry below from whose
// batch is where the entry says (else the segment's start), and the index
// entries before it, which the walk does not need to rebuild.
func walkStart(f io.ReaderAt, seg *segment, idx, tidx []byte, from int64) (pos, next int64, keepIdx, keepTidx []byte) {
	pos, next = 0, seg.base
	if from <= seg.base {
		return pos, next, nil, nil
	}
	n := validOffsetPrefix(idx[:len(idx)/offsetEntrySize*offsetEntrySize], seg.size, from-seg.base)
	if n == 0 {
		return pos, next, nil, nil
	}
	rel, p := offsetEntry(idx, n-1)
	if h, err := readHeader(f, p); err != nil || h.BaseOffset != seg.base+int64(rel) {
		return pos, next, nil, nil
	}
	m := validTimePrefix(tidx[:len(tidx)/timeEntrySize*timeEntrySize], int64(rel))
	return p, seg.base + int64(rel), idx[:(n-1)*offsetEntrySize], tidx[:m*timeEntrySize]
}

// walkBytes bounds what Open reads to rebuild what Close (and Open
// itself) left out of the checkpoints that only save work: the batch
// headers after the active segment's last offset index entry on disk,
// for its indexes, and after the producer-state snapshot. A Close writes
// those only when their absence would make the next Open read more
// (checkpointForOpenLocked), so that stopping and starting many
// partitions that took few writes since their last checkpoint writes and
// reads few files.
const walkBytes = 256 << 10

// checkpointForOpenLocked writes, for a log whose data is all durable (at
// a Close that flushed it, and at the end of Open), what the next Open
// needs: the recovery point (with the leader-epoch history below it), the
// active segment's indexes when a walk from their last entry to the end
// would be longer than walkBytes (a clean start walks from there), and
// the producer state when a walk from its snapshot would be.
func (l *Log) checkpointForOpenLocked() error {
	if l.walkFromLocked(l.end) > walkBytes {
		if err := l.flushIndexesLocked(l.active(), !l.batched()); err != nil {
			return err
		}
	}
	if err := l.checkpointRecoveryLocked(); err != nil {
		return err
	}
	if l.walkFromLocked(l.snapOffset) > walkBytes {
		return l.snapshotProducersLocked()
	}
	return nil
}

// walkFromLocked returns how many bytes of segment data the next Open
// reads to walk the log from offset (< 0: from its start) to its end:
// the active segment from its last offset index entry on disk at or below
// offset, and all of every segment between.
func (l *Log) walkFromLocked(offset int64) int64 {
	var n int64
	for i := max(l.segIndexLocked(max(offset, l.segs[0].base)), 0); i < len(l.segs); i++ {
		seg := l.segs[i]
		if seg != l.active() || offset < seg.base {
			n += seg.size
			continue
		}
		onDisk := seg.idx[:max(min(seg.idxFlushed, len(seg.idx)), 0)]
		_, pos := offsetFloor(onDisk, relOffset(offset-seg.base))
		n += seg.size - pos
	}
	return n
}

// checkpointLoadedLocked ends a load: it writes the checkpoints whose
// contents the load changed (the log start, the closed segments, the
// leader-epoch history below the recovery point checkpoint, the recovery
// point) or that the next Open would otherwise work long without
// (checkpointForOpenLocked).
func (l *Log) checkpointLoadedLocked() error {
	errs := []error{l.checkpointLogStartLocked()}
	sealed := l.sealedContentsLocked()
	if old, ok := l.loaded[sealedFile]; ok && !bytes.Equal(old, sealed) || !ok && len(l.segs) > 1 {
		errs = append(errs, l.writeCheckpointLocked(sealedFile, sealed))
	}
	var onDisk []EpochEntry
	if b, ok := l.loaded[leaderEpochFile]; ok {
		onDisk, _ = decodeEpochCheckpoint(b)
	}
	rp := max(l.ckptRecovery, l.segs[0].base)
	if !slices.Equal(epochsBelow(onDisk, rp), epochsBelow(l.epochs.entries, rp)) {
		errs = append(errs, l.checkpointEpochsLocked())
	}
	errs = append(errs, l.checkpointForOpenLocked())
	return errors.Join(errs...)
}

// epochsBelow returns the entries of a leader-epoch history that start
// below offset.
func epochsBelow(entries []EpochEntry, offset int64) []EpochEntry {
	n := 0
	for n < len(entries) && entries[n].StartOffset < offset {
		n++
	}
	return entries[:n]
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
func WriteCleanShutdownFile(fsys vfs.FS, path string, logs map[string]CleanShutdown) error {
	if fsys == nil {
		fsys = vfs.OS
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
	return vfs.WriteFileAtomic(fsys, path, appendChecksum(b.Bytes()), 0o644)
}

// TakeCleanShutdownFile reads the clean-shutdown file at path and removes
// it durably before returning, so that a crash from here on leaves no
// record to trust. A missing file is an empty map and no error; a damaged
// one is an error (and removed too).
func TakeCleanShutdownFile(fsys vfs.FS, path string) (map[string]CleanShutdown, error) {
	if fsys == nil {
		fsys = vfs.OS
	}
	b, err := vfs.ReadFile(fsys, path)
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
	if serr := vfs.SyncDir(fsys, filepath.Dir(path)); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, fmt.Errorf("log: %s: %w", filepath.Base(path), err)
	}
	return logs, nil
}

func decodeCleanShutdown(b []byte) (map[string]CleanShutdown, error) {
	sc, err := checksummedLines(b, cleanShutdownKind)
	if err != nil {
		return nil, err
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

// The files that hold a line for each of many logs (the clean-shutdown
// record, the log checkpoints) are text: "mq KIND 1", the lines, and
// "crc32c HEX", the CRC32C of every line before it.

// appendChecksum appends the checksum line of b to b.
func appendChecksum(b []byte) []byte {
	return fmt.Appendf(b, "crc32c %08x\n", crc32.Checksum(b, castagnoli))
}

// checksummedLines checks the checksum line and the header of such a file
// of kind, and returns a scanner over the lines between.
func checksummedLines(b []byte, kind string) (*bufio.Scanner, error) {
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
	if !sc.Scan() || sc.Text() != "mq "+kind+" 1" {
		return nil, fmt.Errorf("not a %s file of version 1", kind)
	}
	return sc, nil
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
func MakeDirs(fsys vfs.FS, parent string, names []string) error {
	if fsys == nil {
		fsys = vfs.OS
	}
	if len(names) == 0 {
		return nil
	}
	if err := vfs.MkdirAllDurable(fsys, parent, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		if err := fsys.MkdirAll(filepath.Join(parent, name), 0o755); err != nil {
			return err
		}
	}
	return vfs.SyncDir(fsys, parent)
}
