package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
)

// maxOpenSegments bounds how many closed segments of one log keep their
// indexes in memory and a reference on their data file; the least recently
// used is dropped first. The descriptors themselves are bounded across logs
// by Files.
const maxOpenSegments = 32

// recoveryBufSize is the read size of the recovery scan.
const recoveryBufSize = 1 << 20

// recoveryBufs are the recovery scans' buffers: a broker recovering
// thousands of logs after a crash allocates (and clears) one per worker,
// not one per log. A scan of less than smallScanSize takes one of
// smallScanBufs instead: most logs of a broker with many partitions have
// little past their recovery point, and 128 workers clearing 1 MiB each
// cost more than the scans.
var (
	recoveryBufs  = sync.Pool{New: func() any { return new([recoveryBufSize]byte) }}
	smallScanBufs = sync.Pool{New: func() any { return new([smallScanSize]byte) }}
)

const smallScanSize = 64 << 10

// scanBuffer returns a pooled read buffer for a scan of n bytes, and the
// function that gives it back.
func scanBuffer(n int64) ([]byte, func()) {
	if n <= smallScanSize {
		b := smallScanBufs.Get().(*[smallScanSize]byte)
		return b[:], func() { smallScanBufs.Put(b) }
	}
	b := recoveryBufs.Get().(*[recoveryBufSize]byte)
	return b[:], func() { recoveryBufs.Put(b) }
}

// Log is one partition's log in one directory. See the package
// documentation for which methods may be called concurrently.
type Log struct {
	dir   string
	fs    vfs.FS
	files *Files
	// segFiles are the log's segment files (Files.mu guards it).
	segFiles fileSet
	clock    clock.Clock
	logger   *slog.Logger

	// mu guards everything below it. Appends, truncation, retention and
	// checkpoints hold it exclusively; reads hold it shared while they look
	// up positions, and do their I/O without it.
	//
	// Lock order (a lock is only taken while holding those before it):
	// flusherMu, then flushMu (stopping the flusher waits for its Flush),
	// then loadMu, then mu, then sync.mu and health.mu (both leaves; a
	// failed fsync under mu marks the log failing). No file I/O happens
	// under sync.mu or health.mu.
	mu            sync.RWMutex
	cfg           Config
	segs          []*segment // by base offset; the last is the active segment
	openClosed    []*segment // closed segments that are open
	logStart      int64
	end           int64 // log end offset
	recoveryPoint int64 // everything below is fsynced
	ckptRecovery  int64 // recovery point in the checkpoint file; -1 unknown, noCheckpoint none
	ckptLogStart  int64 // log start in the checkpoint file; -1 unknown, noCheckpoint none
	epochs        epochCache
	producers     producerState
	failed        error  // non-nil: appends fail (ErrFailed)
	health        health // storage incidents of appends (health.go)
	counters      *StorageCounters
	closed        bool   // Close was called
	writeSeq      uint64 // number of writes to segment files, for group commit
	truncGen      uint64 // bumped by every truncation
	maxTS         int64  // largest timestamp in the log, when maxTSValid
	maxTSBase     int64  // base offset of the batch holding maxTS
	maxTSValid    bool
	remoteEnd     int64        // offset after the last one recorded remotely (SetRemoteEnd); -1: none
	scannedEnd    int64        // during load: offset after the last recovered batch
	damage        []Damage     // damaged ranges, by offset (damage.go)
	loadedEpochs  *epochCache  // during load: the checkpointed leader-epoch history
	cleaner       cleanerState // the cleaner checkpoint (cleanstate.go)
	spike         epochSpike   // during load: see checkEpochLocked
	// durableCkpt are the checkpoint files this process knows durable,
	// with their contents (shutdown.go): writing one again is skipped.
	durableCkpt map[string][]byte
	clean       *CleanShutdown // Options.Clean, during load
	closedClean *CleanShutdown // set by a Close that flushed everything
	synced      bool           // Options.Synced, during load
	// During load: the files of the directory (a checkpoint or index
	// file it does not list is not opened), and the checkpoints read, by
	// name.
	present map[string]bool
	loaded  map[string][]byte
	// snapOffset is the log end offset the producer-state file was
	// written at, -1 when there is none: the next Open reads the batch
	// headers after it.
	snapOffset int64
	// batch is Options.Batch until its Commit (syncbatch.go).
	batch atomic.Pointer[SyncBatch]
	// scannedAtOpen is set when Open ran the recovery scan (for tests).
	scannedAtOpen bool
	// walkedFrom is, during load, the offset from which the recovery
	// scan or the clean start's walk rebuilt the leader-epoch history
	// (MaxInt64: neither did).
	walkedFrom int64

	// aborted are the aborted transactions of the log, by marker offset,
	// and txnFiles what each segment's .txnindex holds, by base offset
	// (txnindex.go). firstUnstable is the first offset of the oldest
	// open transaction (-1: none), written under mu, read without it.
	aborted       []AbortedTxn
	txnFiles      map[int64][]byte
	firstUnstable atomic.Int64
	// txnVerified are the producers a coordinator confirmed in an ongoing
	// transaction (MarkTxnVerified), with their epoch, until their next
	// marker; once txnVerifying is set, a transactional batch that would
	// open a transaction needs its producer there.
	txnVerified  map[int64]int16
	txnVerifying bool

	// hwMu serializes high-water mark checkpoints (hw.go); taken before mu,
	// and by Delete so that no checkpoint is written into a directory
	// being removed.
	hwMu           sync.Mutex
	hwAtOpen       int64 // the checkpointed high-water mark Open found, -1 if none
	hwCheckpointed int64 // the value in the file now, -1 if none
	// ckpts is Options.Checkpoints: the recovery point, leader-epoch
	// history and high-water mark are kept there, under the directory's
	// name, instead of in files of the log's own (checkpoints.go).
	ckpts *Checkpoints
	owner string // Options.Owner

	cleanMu     sync.Mutex // one cleaning pass at a time; taken before mu
	loadMu      sync.Mutex // serializes opening closed segments from readers
	useClock    atomic.Int64
	damageFound atomic.Uint64 // damaged ranges found since Open

	sync    syncer
	flushMu sync.Mutex // one Flush at a time

	flusherMu   sync.Mutex
	flusherStop chan struct{}
	flusherDone chan struct{}

	// Under FlushOS and FlushInterval a rolled segment is fsynced in the
	// background (syncRolled). rolledSync is closed when the latest such
	// fsync is done, and every one waits for the one before, so the
	// recovery point only moves over fsynced segments; rolledPending are
	// the files still waiting (mu). rolledWG counts the goroutines.
	rolledSync    chan struct{}
	rolledPending []*SegmentFile
	rolledWG      sync.WaitGroup
}

// AppendResult is what Append did.
type AppendResult struct {
	BaseOffset, LastOffset int64
	// LogAppendTime is the time stamped into the batch with
	// Config.LogAppendTime, -1 otherwise.
	LogAppendTime int64
	// Duplicate reports a retry of a batch already in the log: nothing was
	// written, and BaseOffset and LastOffset are the original ones.
	Duplicate      bool
	LogStartOffset int64
	// LeaderEpoch is the leader epoch Append was called in; for a
	// Duplicate too, whose batch this log holds.
	LeaderEpoch int32
}

// Open opens the log in dir, creating the directory when missing, and
// recovers it: segments after the recovery point are checked batch by batch
// and a torn or corrupt tail is truncated.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	l := &Log{dir: dir, fs: opts.FS, files: opts.Files, clock: opts.Clock, logger: opts.Logger, cfg: cfg.normalized(), counters: opts.Counters, clean: opts.Clean, synced: opts.Synced, ckpts: opts.Checkpoints, owner: opts.Owner, remoteEnd: -1}
	if l.fs == nil {
		l.fs = vfs.OS
	}
	if l.files == nil {
		l.files = defaultFiles()
	}
	l.segFiles = make(fileSet)
	l.firstUnstable.Store(-1)
	if l.clock == nil {
		l.clock = clock.Real()
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	l.logger = l.logger.With("log", filepath.Base(dir))
	l.sync.cond.L = &l.sync.mu
	opts.Batch.join(l)
	existed, err := l.makeDir(opts.DirDurable || opts.Clean != nil || opts.Synced || l.batched())
	if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	if !existed && l.ckpts != nil {
		// A new log: whatever the checkpoints hold under its name was
		// another's.
		l.ckpts.Forget(filepath.Base(dir))
	}
	l.mu.Lock()
	err = l.load()
	l.clean = nil
	if err != nil {
		l.closeFilesLocked()
	}
	l.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	l.restartFlusher()
	return l, nil
}

// makeDir creates the log directory durably, and reports whether it
// existed. When durable is set, the directory's entry is known durable if
// it exists (a clean shutdown recorded the log, or the caller fsynced the
// parent), and the fsync of its parent is skipped.
func (l *Log) makeDir(durable bool) (existed bool, err error) {
	fi, err := l.fs.Stat(l.dir)
	existed = err == nil && fi.IsDir()
	if durable && existed {
		return true, nil
	}
	return existed, vfs.MkdirAllDurable(l.fs, l.dir, 0o755)
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// load reads the directory and recovers the log. Called with mu held.
func (l *Log) load() error {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	if changed, err := l.finishSwapsLocked(entries); err != nil {
		return err
	} else if changed {
		if entries, err = l.fs.ReadDir(l.dir); err != nil {
			return err
		}
	}
	var bases []int64
	hasLog := make(map[int64]bool)
	var indexFiles []string
	l.present, l.loaded = map[string]bool{}, map[string][]byte{}
	defer func() { l.present, l.loaded = nil, nil }()
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, vfs.TempSuffix) {
			_ = l.fs.Remove(l.path(name))
			continue
		}
		l.present[name] = true
		base, ext, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		if ext == logExt {
			bases = append(bases, base)
			hasLog[base] = true
		} else {
			indexFiles = append(indexFiles, name)
		}
	}
	slices.Sort(bases)
	for _, name := range indexFiles {
		if base, _, _ := parseSegmentName(name); !hasLog[base] {
			l.logger.Info("removing index without segment", "file", name)
			_ = l.fs.Remove(l.path(name))
		}
	}

	ls, lsErr := l.readOffsetCheckpoint(logStartFile, "log-start")
	switch {
	case lsErr == nil:
		l.ckptLogStart = ls
	case errors.Is(lsErr, os.ErrNotExist):
		l.ckptLogStart = noCheckpoint
	default:
		l.ckptLogStart = -1
	}
	rp, rpErr, epErr := l.loadCheckpointsLocked()
	defer func() { l.loadedEpochs = nil }()

	if len(bases) == 0 {
		start := int64(0)
		if lsErr == nil {
			start = ls
		}
		// A new log: its segment file is all it needs. The checkpoints
		// hold their defaults until they change (the recovery point and
		// log start at the first segment's base, no epochs, no producers,
		// no closed segments), so none is written.
		if _, err := l.createSegmentLocked(start); err != nil {
			return err
		}
		l.logStart, l.end, l.recoveryPoint = start, start, start
		l.ckptRecovery = -1
		if rpErr == nil {
			l.ckptRecovery = rp
		}
		l.epochs.truncateFrom(start)
		l.producers = newProducerState()
		l.aborted, l.txnFiles = nil, map[int64][]byte{}
		l.snapOffset = -1
		l.loadCleanerLocked()
		return nil
	}

	if lsErr != nil || ls < bases[0] {
		ls = bases[0]
	}
	for len(bases) > 1 && bases[1] <= ls {
		l.logger.Info("removing segment below the log start offset", "segment", segmentName(bases[0], logExt), "log_start_offset", ls)
		l.removeSegmentFiles(bases[0])
		bases = bases[1:]
	}
	for _, base := range bases {
		fi, err := l.fs.Stat(l.path(segmentName(base, logExt)))
		if err != nil {
			return err
		}
		l.segs = append(l.segs, &segment{base: base, size: fi.Size(), maxTS: -1, rollTS: -1})
	}

	l.loadDamageLocked()
	l.ckptRecovery = -1
	switch {
	case l.ckpts != nil && errors.Is(rpErr, os.ErrNotExist):
		// A log without an entry has fsynced nothing the Checkpoints
		// know of (see Checkpoints): nothing is trusted.
		rp, rpErr = l.segs[0].base, nil
	case rpErr == nil:
		l.ckptRecovery = rp
	case errors.Is(rpErr, os.ErrNotExist):
		l.ckptRecovery = noCheckpoint
	}
	l.walkedFrom = math.MaxInt64
	// Recover from the segment holding the recovery point; without a
	// checkpoint, everything. The segments before it were fsynced whole:
	// they are only compared with what they were sealed as.
	k := 0
	if rpErr == nil {
		for k+1 < len(l.segs) && l.segs[k+1].base <= rp {
			k++
		}
	} else {
		rp = -1
	}
	if err := l.checkSealedLocked(k); err != nil {
		return err
	}
	clean := k == len(l.segs)-1 && l.trustCleanLocked(l.clean, rp, rpErr, epErr)
	if !clean {
		if err := l.recoverLocked(k, rp); err != nil {
			return err
		}
	}
	act := l.active()
	for _, seg := range l.segs[:len(l.segs)-1] {
		if seg.file != nil {
			l.openClosed = append(l.openClosed, seg)
		}
	}
	l.evictLocked()
	l.end = l.scannedEnd
	if act.size == 0 {
		l.end = act.base
	}
	if ls > l.end {
		ls = l.end
	}
	l.logStart = ls
	l.recoveryPoint = l.end
	l.dropDamageLocked(func(d Damage) bool { return d.To > l.logStart && d.From < l.end })

	// Without a leader-epoch checkpoint the history is what the scan (or
	// the clean start's walk) found, when it covered the whole log: the
	// checkpoint is written before the first recovery point that needs it
	// (checkpointRecoveryLocked).
	if epErr != nil && (!errors.Is(epErr, os.ErrNotExist) || l.walkedFrom > l.segs[0].base && l.end > l.segs[0].base) {
		l.logger.Warn("rebuilding leader-epoch history from the log", "err", epErr)
		l.epochs = epochCache{}
		if err := l.walkHeadersLocked(l.segs[0].base, func(h *record.Header) {
			l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		}); err != nil {
			return err
		}
	}
	if clean {
		// A leader that has appended nothing yet recorded its epoch at
		// the log end (BeginEpoch), and the clean Close fsynced it.
		l.epochs.truncateFrom(l.end + 1)
	} else {
		l.epochs.truncateFrom(l.end)
	}
	// A crash between the log-start and leader-epoch checkpoints leaves
	// epochs below the log start.
	l.epochs.truncateBefore(l.logStart)
	if err := l.loadProducerStateLocked(); err != nil {
		return err
	}
	if act.size > 0 {
		// The first batch's timestamp stands in for when the segment got
		// it; never in the future.
		act.rollTS = l.clock.Now().UnixMilli()
		if h, err := readHeader(act.file, 0); err == nil && h.MaxTimestamp >= 0 {
			act.rollTS = min(act.rollTS, h.MaxTimestamp)
		}
	}
	l.loadCleanerLocked()
	if clean || l.synced {
		// What the files hold is durable: a checkpoint read with the
		// contents it would be written with is not written again.
		l.durableCkpt = maps.Clone(l.loaded)
	}
	return l.checkpointLoadedLocked()
}

// recoverLocked is the recovery scan of load: segments from k on, the
// one holding the recovery point rp (-1: none) first.
func (l *Log) recoverLocked(k int, rp int64) error {
	l.scannedAtOpen = true
	// durableTo says below which offset segment i's batches were
	// fsynced: the recovery point; without one, the end of each closed
	// segment (a roll fsyncs it), and nothing of the active one.
	durableTo := func(i int) int64 {
		switch {
		case rp >= 0:
			return rp
		case i+1 < len(l.segs):
			return l.segs[i+1].base
		}
		return -1
	}
	for i := k; i < len(l.segs); i++ {
		from := int64(-1)
		if i == k {
			from = rp
		}
		torn, err := l.recoverSegment(i, from, durableTo(i), i == k)
		if err != nil {
			return err
		}
		// A power loss can cut a rolled segment's unsynced tail at a batch
		// boundary while the next segment exists: that one, not durable
		// either, would leave a gap. Below the recovery point such a gap
		// is damage (see checkSealedLocked); past it, a torn tail.
		if !torn && i+1 < len(l.segs) && l.scannedEnd != l.segs[i+1].base {
			if l.scannedEnd < durableTo(i) {
				l.recordDamageLocked(Damage{From: l.scannedEnd, To: l.segs[i+1].base, Segment: segmentName(l.scannedEnd, logExt),
					Reason: "offsets missing between two segments"})
			} else {
				l.logger.Warn("segment ends before the next one starts", "segment", segmentName(l.segs[i].base, logExt),
					"end_offset", l.scannedEnd, "next_segment", segmentName(l.segs[i+1].base, logExt))
				torn = true
			}
		}
		if torn && i+1 < len(l.segs) {
			// The last first: a crash in between leaves the log's
			// first segments, never a gap (which sealed-segments would
			// report as missing segments).
			for _, seg := range slices.Backward(l.segs[i+1:]) {
				l.logger.Warn("deleting segment after a torn one: it holds no good batch", "segment", segmentName(seg.base, logExt), "bytes", seg.size)
				l.removeSegmentFiles(seg.base)
			}
			l.segs = l.segs[:i+1]
			break
		}
	}
	// The scanned batches past the checkpoint may be in the page cache
	// only (the process died, not the machine): the recovery point is
	// about to pass them. After a syncfs (Options.Synced) they are not.
	if l.scannedEnd > rp && !l.synced {
		for _, seg := range l.segs[k:] {
			if err := seg.file.Sync(); err != nil {
				return fmt.Errorf("recover %s: %w", segmentName(seg.base, logExt), err)
			}
		}
	}
	return nil
}

// readCheckpointLocked reads the checkpoint file name during load. One
// the directory does not list is not opened; one read is remembered
// (l.loaded).
func (l *Log) readCheckpointLocked(name string) ([]byte, error) {
	if l.present != nil && !l.present[name] {
		return nil, fmt.Errorf("%s: %w", name, os.ErrNotExist)
	}
	b, err := vfs.ReadFile(l.fs, l.path(name))
	if err == nil && l.loaded != nil {
		l.loaded[name] = b
	}
	return b, err
}

// readIndexesLocked reads a segment's index files during recovery; one
// the directory does not list, or that cannot be read, is empty.
func (l *Log) readIndexesLocked(indexPath, timeIndexPath string) (idx, tidx []byte) {
	read := func(path string) []byte {
		if l.present != nil && !l.present[filepath.Base(path)] {
			return nil
		}
		b, _ := vfs.ReadFile(l.fs, path)
		return b
	}
	return read(indexPath), read(timeIndexPath)
}

func (l *Log) readOffsetCheckpoint(file, kind string) (int64, error) {
	b, err := l.readCheckpointLocked(file)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("cannot read checkpoint", "file", file, "err", err)
		}
		return 0, err
	}
	off, err := decodeOffsetCheckpoint(kind, b)
	if err != nil {
		l.logger.Warn("ignoring checkpoint", "file", file, "err", err)
	}
	return off, err
}

// recoverSegment opens segment i, checks its batches from the recovery
// point rp (from the start when rp < 0) and rebuilds its indexes. A bad
// batch below durableTo (what was fsynced) is damage: recorded, and the
// good batches after it are kept. A bad batch past it is a torn
// tail (a crash cut the writes no fsync had covered yet): the segment is
// cut there, recoverSegment reports it, and the caller deletes the
// segments after it. The segment is left open with its
// indexes in memory.
func (l *Log) recoverSegment(i int, rp, durableTo int64, first bool) (torn bool, err error) {
	seg := l.segs[i]
	nextBase := int64(math.MaxInt64)
	if i+1 < len(l.segs) {
		nextBase = l.segs[i+1].base
	}
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, seg.base)
	sf, err := l.files.get(l.segFiles, l.fs, logPath)
	if err != nil {
		return false, err
	}
	f := sf
	defer func() {
		if err != nil {
			sf.release()
		}
	}()
	idx, tidx := l.readIndexesLocked(indexPath, timeIndexPath)

	scanFrom, next, keepIdx, keepTidx := walkStart(f, seg, idx, tidx, rp)
	if first {
		// The history after the first scanned batch is rebuilt by the scan.
		l.epochs.truncateFrom(next)
		l.walkedFrom = next
	}
	seg.idx = append([]byte(nil), keepIdx...)
	seg.tidx = append([]byte(nil), keepTidx...)
	seg.resetIndexState()
	interval := l.cfg.IndexIntervalBytes
	buf, put := scanBuffer(seg.size - scanFrom)
	defer put()
	index := func(pos int64, h *record.Header) error {
		// The CRC does not cover the leader epoch. Below the recovery
		// point the checkpointed history holds; past it, epochs must not
		// decrease, and one batch whose epoch the next batch contradicts
		// was flipped.
		if h.BaseOffset < rp && l.loadedEpochs != nil && l.loadedEpochs.impossible(h.PartitionLeaderEpoch, h.BaseOffset) {
			return fmt.Errorf("%w: %d", errImpossibleEpoch, h.PartitionLeaderEpoch)
		}
		if err := l.checkEpochLocked(seg, pos, h); err != nil {
			return err
		}
		seg.indexBatch(h, pos, interval)
		l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		return nil
	}
	pos, dataEnd := scanFrom, seg.size
	for {
		pos, next = l.skipKnownLocked(seg, pos, next)
		l.scannedEnd = next
		if pos >= seg.size {
			break
		}
		res := scanSegment(f, seg.base, pos, seg.size, next, true, buf, index)
		if errors.Is(res.stopErr, errImpossibleEpoch) {
			res.badErr = res.stopErr
		}
		seg.checked.add(checkedRange{start: pos, end: res.end, first: next, next: res.next})
		if res.ioErr != nil {
			return false, fmt.Errorf("recover %s: %w", segmentName(seg.base, logExt), res.ioErr)
		}
		l.scannedEnd = res.next
		if res.badErr == nil {
			break
		}
		limit, limitOffset := seg.size, nextBase
		if kl, ko := l.locateBoundsLocked(seg, res.end); kl < seg.size {
			limit, limitOffset = kl, ko
		}
		d, resume, resumeOffset, err := locateDamage(f, seg.base, res.end, limit, res.next, limitOffset, res.badErr)
		if err != nil {
			return false, fmt.Errorf("recover %s: %w", segmentName(seg.base, logExt), err)
		}
		// Below the recovery point everything was fsynced: a bad batch
		// there is damage even at the very end of the log, never a torn
		// write, and its offsets reach the recovery point at least. Past
		// it nothing was known durable: the log ends at the first bad
		// batch, as after any power loss.
		if res.next < durableTo {
			if nextBase == math.MaxInt64 && resume >= seg.size {
				d.To = max(durableTo, res.next+1)
			}
			l.recordDamageLocked(d)
			pos, next = resume, resumeOffset
			if resume < seg.size {
				continue
			}
			l.scannedEnd = d.To
			break
		}
		torn = true
		l.logger.Warn("truncating corrupt or torn segment tail",
			"segment", segmentName(seg.base, logExt), "position", res.end,
			"dropped_bytes", seg.size-res.end, "err", res.badErr)
		if err := f.Truncate(res.end); err != nil {
			return false, err
		}
		if err := f.Sync(); err != nil {
			return false, err
		}
		dataEnd = res.end
		break
	}
	seg.size = dataEnd
	// An index file holding a prefix of the rebuilt entries is right as
	// far as it goes: the next flush appends the rest. One holding other
	// entries (past a torn tail, or wrong) is replaced now.
	seg.idxFlushed, seg.tidxFlushed = len(idx), len(tidx)
	if !bytes.HasPrefix(seg.idx, idx) {
		if err := writeWholeFile(l.fs, indexPath, seg.idx); err != nil {
			return false, err
		}
		seg.idxFlushed = len(seg.idx)
	}
	if !bytes.HasPrefix(seg.tidx, tidx) {
		if err := writeWholeFile(l.fs, timeIndexPath, seg.tidx); err != nil {
			return false, err
		}
		seg.tidxFlushed = len(seg.tidx)
	}
	if i < len(l.segs)-1 {
		// A closed segment's index files are whole, as sealed.
		if err := l.flushIndexesLocked(seg, true); err != nil {
			return false, err
		}
	}
	seg.file = sf
	seg.lastUse.Store(l.useClock.Add(1))
	return torn, nil
}

// epochSpike is the batch that started the newest epoch during a recovery
// scan, until a later batch confirms its epoch.
type epochSpike struct {
	set        bool
	seg        int64 // base offset of its segment
	pos, size  int64
	base, last int64
}

// checkEpochLocked checks the leader epoch of a batch recovery scanned at
// pos of seg, against the history so far (see recoverSegment): a negative
// epoch is a bad batch (errImpossibleEpoch). One below the newest, when the
// newest epoch began with the last batch scanned before this one and this
// one's epoch lies between that one's and the epoch before, shows that
// batch's epoch was flipped (epochs never go down along a log written by a
// replica): it is recorded as damage and its epoch forgotten.
func (l *Log) checkEpochLocked(seg *segment, pos int64, h *record.Header) error {
	e, latest := h.PartitionLeaderEpoch, l.epochs.latest()
	prev := l.spike
	l.spike = epochSpike{}
	switch {
	case e < 0 && latest >= 0:
		return fmt.Errorf("%w: %d", errImpossibleEpoch, e)
	case e > latest:
		l.spike = epochSpike{set: true, seg: seg.base, pos: pos, size: int64(h.Size()), base: h.BaseOffset, last: h.LastOffset()}
		return nil
	case e == latest:
		return nil
	}
	n := len(l.epochs.entries)
	if prev.set && n >= 1 && l.epochs.entries[n-1].StartOffset == prev.base && (n == 1 || l.epochs.entries[n-2].Epoch <= e) {
		l.epochs.entries = l.epochs.entries[:n-1]
		l.recordDamageLocked(Damage{From: prev.base, To: prev.last + 1, Segment: segmentName(prev.seg, logExt),
			Position: prev.pos, Length: prev.size, Reason: fmt.Sprintf("%v: %d", errImpossibleEpoch, latest)})
		if e > l.epochs.latest() {
			l.spike = epochSpike{set: true, seg: seg.base, pos: pos, size: int64(h.Size()), base: h.BaseOffset, last: h.LastOffset()}
		}
		return nil
	}
	// An older epoch than the newest is let through, as epochCache.impossible
	// does; the newest stays unconfirmed.
	l.spike = prev
	return nil
}

// readHeader reads the batch header at pos.
func readHeader(f io.ReaderAt, pos int64) (record.Header, error) {
	var b [record.HeaderSize]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return record.Header{}, err
	}
	return record.ParseHeader(b[:])
}

// writeWholeFile replaces the contents of path with data and fsyncs it.
func writeWholeFile(fsys vfs.FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	n, err := f.WriteAt(data, 0)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadProducerStateLocked loads the producer-state snapshot and replays the
// batch headers after it; without a usable snapshot it rebuilds the state
// from the whole log.
//
// A snapshot it rejects is replaced by one of the rebuilt state at once.
// One past the log end describes batches the log lost (its tail, after
// the snapshot was taken): left in place, it would be taken for this
// log's once the log grew past its offset again with other batches, and
// its producers' lost sequences answered as duplicates at offsets that
// hold other records.
func (l *Log) loadProducerStateLocked() error {
	from := l.segs[0].base
	l.producers = newProducerState()
	l.snapOffset = -1
	rejected := false
	indexed := true
	if l.txnFiles == nil {
		indexed = l.loadTxnIndexesLocked()
	}
	b, err := l.readCheckpointLocked(producerStateFile)
	if err == nil && !indexed {
		// The aborted transactions before the snapshot would be missing.
		rejected = true
	} else if err == nil {
		ps, off, derr := decodeProducerSnapshot(b)
		switch {
		case derr != nil:
			l.logger.Warn("ignoring producer-state snapshot", "err", derr)
			rejected = true
		case off > l.end:
			l.logger.Info("producer-state snapshot is past the log end; rebuilding", "snapshot_offset", off, "log_end_offset", l.end)
			rejected = true
		default:
			l.producers = ps
			l.snapOffset = off
			from = max(off, from)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		l.logger.Warn("cannot read producer-state snapshot", "err", err)
	}
	// The aborted transactions past from are made again from their
	// markers, and those of deleted segments forgotten.
	l.dropAbortedFromLocked(from)
	l.aborted = slices.DeleteFunc(l.aborted, func(a AbortedTxn) bool { return a.LastOffset < l.segs[0].base })
	if from < l.end {
		if err := l.walkBatchesLocked(from, func(h *record.Header, f io.ReaderAt, pos int64) {
			if h.ProducerID < 0 {
				return
			}
			typ, ce := controlAt(f, pos, h)
			if ab, ok := l.producers.update(h, typ, ce); ok {
				l.aborted = append(l.aborted, ab)
			}
		}); err != nil {
			return err
		}
	}
	l.sortAbortedLocked()
	l.firstUnstable.Store(l.producers.firstUnstable())
	if err := l.writeTxnIndexesLocked(); err != nil {
		return err
	}
	l.producers.evictBelow(l.logStart)
	if rejected {
		delete(l.loaded, producerStateFile) // not what the file holds from here on
		return l.snapshotProducersLocked()
	}
	return nil
}

// walkHeadersLocked calls fn with the header of every batch whose last
// offset is ≥ from, in order. Called with mu held exclusively.
func (l *Log) walkHeadersLocked(from int64, fn func(h *record.Header)) error {
	return l.walkBatchesLocked(from, func(h *record.Header, _ io.ReaderAt, _ int64) { fn(h) })
}

// walkBatchesLocked is walkHeadersLocked with each batch's file and
// position, for callers that read a batch's records (markers).
func (l *Log) walkBatchesLocked(from int64, fn func(h *record.Header, f io.ReaderAt, pos int64)) error {
	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	buf := *bufp
	for i := l.segIndexLocked(from); i < len(l.segs); i++ {
		seg := l.segs[i]
		if err := l.openSegmentLocked(seg); err != nil {
			return err
		}
		pos, next := int64(0), seg.base
		if from > seg.base {
			rel, p := offsetFloor(seg.idx, relOffset(from-seg.base))
			pos, next = p, seg.base+int64(rel)
		}
		// Walk the parts between damaged ranges; damage met on the way
		// (in bytes never checked) is recorded and walked around.
		for _, part := range l.undamagedLocked(seg, seg.size) {
			if part.end <= pos {
				continue
			}
			if part.start > pos {
				pos, next = part.start, part.next
			}
			for pos < part.end {
				res := scanSegment(seg.file, seg.base, pos, part.end, next, true, buf, func(p int64, h *record.Header) error {
					if h.LastOffset() >= from {
						fn(h, seg.file, p)
					}
					return nil
				})
				if res.ioErr != nil {
					return res.ioErr
				}
				if res.badErr == nil {
					break
				}
				limit, nextBase := l.locateBoundsLocked(seg, res.end)
				d, resume, resumeOffset, err := locateDamage(seg.file, seg.base, res.end, limit, res.next, nextBase, res.badErr)
				if err != nil {
					return err
				}
				l.recordDamageLocked(d)
				pos, next = resume, resumeOffset
			}
		}
	}
	return nil
}

// relOffset clamps a relative offset to the uint32 range.
func relOffset(d int64) uint32 {
	if d < 0 {
		return 0
	}
	if d > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(d)
}

// segIndexLocked returns the index of the segment holding offset: the last
// one whose base is ≤ offset (0 when offset is below every base).
func (l *Log) segIndexLocked(offset int64) int {
	i, found := slices.BinarySearchFunc(l.segs, offset, func(s *segment, o int64) int {
		switch {
		case s.base < o:
			return -1
		case s.base > o:
			return 1
		}
		return 0
	})
	if found {
		return i
	}
	if i > 0 {
		return i - 1
	}
	return 0
}

// createSegmentLocked creates an empty segment at base and makes it the
// active one. Its index files are created when entries are first written
// to them, or when it is sealed (sealIndexesLocked): an active segment's
// missing index is an empty one.
func (l *Log) createSegmentLocked(base int64) (*segment, error) {
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	// Files of an earlier segment at this base (a log cut back to it, or
	// restarted there) would be taken for this one's.
	for _, p := range []string{indexPath, timeIndexPath, txnIndexPath(l.dir, base)} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("create segment %d: %w", base, err)
		}
	}
	sf, err := l.files.create(l.segFiles, l.fs, logPath, func() (vfs.File, error) {
		return l.fs.OpenFile(logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	// In a batch, its Commit makes the new entries durable.
	if !l.batched() {
		if err := vfs.SyncDir(l.fs, l.dir); err != nil {
			sf.release()
			return nil, fmt.Errorf("create segment %d: %w", base, err)
		}
	}
	seg := &segment{base: base, file: sf, maxTS: -1, rollTS: -1, maxTSKnown: true}
	seg.lastUse.Store(l.useClock.Add(1))
	l.segs = append(l.segs, seg)
	return seg, nil
}

// removeSegmentFiles unlinks a segment's files, data first so that a crash
// in between leaves only index files, which Open removes.
func (l *Log) removeSegmentFiles(base int64) {
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	l.files.retire(l.segFiles, logPath) // Regions may still read it
	for _, p := range []string{logPath, indexPath, timeIndexPath, txnIndexPath(l.dir, base)} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("cannot remove segment file", "file", filepath.Base(p), "err", err)
		}
	}
}

// deleteSegmentLocked removes seg (not the active one) from the log. Its
// data file stays open for the Regions still holding it.
func (l *Log) deleteSegmentLocked(seg *segment) {
	to := int64(math.MaxInt64)
	if i := slices.Index(l.segs, seg); i >= 0 && i+1 < len(l.segs) {
		to = l.segs[i+1].base
	}
	l.dropAbortedRangeLocked(seg.base, to)
	seg.deleted = true
	seg.tail = nil
	l.segs = slices.DeleteFunc(l.segs, func(s *segment) bool { return s == seg })
	l.openClosed = slices.DeleteFunc(l.openClosed, func(s *segment) bool { return s == seg })
	if seg.file != nil {
		seg.file.release()
		seg.file, seg.idx, seg.tidx = nil, nil, nil
	}
	l.removeSegmentFiles(seg.base)
	l.maxTSValid = false
}

// loadSegmentFiles opens a closed segment's data file and reads its indexes,
// rebuilding them from the data when they are missing or inconsistent. It
// does not touch the Log's guarded state.
func (l *Log) loadSegmentFiles(base, size int64, interval int32) (*SegmentFile, []byte, []byte, error) {
	logPath, indexPath, timeIndexPath := segmentPaths(l.dir, base)
	f, err := l.files.get(l.segFiles, l.fs, logPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	idx, ierr := vfs.ReadFile(l.fs, indexPath)
	tidx, terr := vfs.ReadFile(l.fs, timeIndexPath)
	var why error
	switch {
	case ierr != nil:
		why = ierr
	case terr != nil:
		why = terr
	default:
		why = checkIndexes(idx, tidx, size)
	}
	if why != nil && size > 0 {
		l.logger.Warn("rebuilding segment indexes", "segment", segmentName(base, logExt), "err", why)
		tmp := &segment{base: base, maxTS: -1}
		res := scanSegment(f, base, 0, size, base, false, make([]byte, 8<<10), func(pos int64, h *record.Header) error {
			tmp.indexBatch(h, pos, interval)
			return nil
		})
		if res.ioErr != nil {
			f.release()
			return nil, nil, nil, res.ioErr
		}
		if res.badErr != nil {
			l.logger.Warn("segment has a bad batch", "segment", segmentName(base, logExt), "position", res.end, "err", res.badErr)
		}
		idx, tidx = tmp.idx, tmp.tidx
		if err := writeWholeFile(l.fs, indexPath, idx); err != nil {
			l.logger.Warn("cannot write rebuilt index", "segment", segmentName(base, logExt), "err", err)
		}
		if err := writeWholeFile(l.fs, timeIndexPath, tidx); err != nil {
			l.logger.Warn("cannot write rebuilt time index", "segment", segmentName(base, logExt), "err", err)
		}
	} else if why != nil {
		idx, tidx = nil, nil
	}
	return f, idx, tidx, nil
}

// openSegmentLocked makes sure seg is open. Called with mu held exclusively.
func (l *Log) openSegmentLocked(seg *segment) error {
	if seg.file != nil {
		seg.lastUse.Store(l.useClock.Add(1))
		return nil
	}
	sf, idx, tidx, err := l.loadSegmentFiles(seg.base, seg.size, l.cfg.IndexIntervalBytes)
	if err != nil {
		return err
	}
	l.installLocked(seg, sf, idx, tidx)
	return nil
}

func (l *Log) installLocked(seg *segment, sf *SegmentFile, idx, tidx []byte) {
	seg.file, seg.idx, seg.tidx = sf, idx, tidx
	seg.idxFlushed, seg.tidxFlushed = len(idx), len(tidx)
	seg.resetIndexState()
	seg.lastUse.Store(l.useClock.Add(1))
	l.openClosed = append(l.openClosed, seg)
	l.evictLocked()
}

// evictLocked closes the least recently used closed segments over the
// limit.
func (l *Log) evictLocked() {
	for len(l.openClosed) > maxOpenSegments {
		victim := -1
		for i, s := range l.openClosed {
			if s == l.active() {
				continue
			}
			if victim < 0 || s.lastUse.Load() < l.openClosed[victim].lastUse.Load() {
				victim = i
			}
		}
		if victim < 0 {
			return
		}
		s := l.openClosed[victim]
		l.openClosed = slices.Delete(l.openClosed, victim, victim+1)
		s.file.release()
		s.file, s.idx, s.tidx = nil, nil, nil
	}
}

// acquire returns seg's open data file with a reference for the caller and
// its indexes, opening the segment when needed. Called without mu.
func (l *Log) acquire(seg *segment) (*SegmentFile, []byte, []byte, error) {
	if sf, idx, tidx, ok, err := l.tryAcquire(seg); ok || err != nil {
		return sf, idx, tidx, err
	}
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if sf, idx, tidx, ok, err := l.tryAcquire(seg); ok || err != nil {
		return sf, idx, tidx, err
	}
	l.mu.RLock()
	size, interval := seg.size, l.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	sf, idx, tidx, err := l.loadSegmentFiles(seg.base, size, interval)
	if err != nil {
		return nil, nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		sf.release()
		return nil, nil, nil, ErrClosed
	case seg.deleted:
		sf.release()
		return nil, nil, nil, fmt.Errorf("%w: segment %d deleted", ErrOffsetOutOfRange, seg.base)
	case seg.file != nil:
		sf.release()
	default:
		l.installLocked(seg, sf, idx, tidx)
	}
	seg.file.acquire()
	return seg.file, seg.idx, seg.tidx, nil
}

func (l *Log) tryAcquire(seg *segment) (*SegmentFile, []byte, []byte, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, nil, nil, false, ErrClosed
	}
	if seg.deleted {
		return nil, nil, nil, false, fmt.Errorf("%w: segment %d deleted", ErrOffsetOutOfRange, seg.base)
	}
	if seg.file == nil {
		return nil, nil, nil, false, nil
	}
	seg.file.acquire()
	seg.lastUse.Store(l.useClock.Add(1))
	return seg.file, seg.idx, seg.tidx, true, nil
}

func (l *Log) closeFilesLocked() {
	for _, seg := range l.segs {
		if seg.file != nil {
			seg.file.release()
			seg.file, seg.idx, seg.tidx = nil, nil, nil
		}
	}
	l.openClosed = nil
	// Regions, and background fsyncs of rolled segments, may still hold
	// files: keep them open, nothing opens them by name any more.
	l.files.retireAll(l.segFiles)
}

func (l *Log) writableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// Append appends one batch, already checked with record.Validate, at the
// log end offset. It patches the batch in place: base offset, partition
// leader epoch and, with Config.LogAppendTime, the max timestamp and CRC.
// An idempotent batch is checked against its producer's state atomically
// with the append; a retry of one of the producer's last 5 batches writes
// nothing and reports Duplicate. Under FlushAlways Append returns once the
// batch is fsynced. On error nothing was appended.
func (l *Log) Append(batch []byte, leaderEpoch int32) (AppendResult, error) {
	res, err := l.appendLeader(batch, leaderEpoch)
	l.observeAppend(err)
	return res, err
}

func (l *Log) appendLeader(batch []byte, leaderEpoch int32) (AppendResult, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return AppendResult{}, fmt.Errorf("log: append: %w", err)
	}
	if h.Size() != len(batch) {
		return AppendResult{}, fmt.Errorf("log: append: %w: header says %d bytes, have %d", record.ErrBadLength, h.Size(), len(batch))
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	if h.Control() {
		if typ, ce := controlOf(batch); typ == record.ControlAbort || typ == record.ControlCommit {
			if err := l.producers.checkMarker(&record.Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, CoordinatorEpoch: ce}); err != nil {
				l.mu.Unlock()
				return AppendResult{}, err
			}
		}
	} else if h.ProducerID >= 0 && h.BaseSequence >= 0 {
		dup, err := l.producers.check(&h)
		if err == nil && dup == nil {
			err = l.checkVerifiedLocked(&h)
		}
		if err != nil {
			l.mu.Unlock()
			return AppendResult{}, err
		}
		if dup != nil {
			res := AppendResult{BaseOffset: dup.baseOffset, LastOffset: dup.lastOffs, LogAppendTime: -1, Duplicate: true, LogStartOffset: l.logStart, LeaderEpoch: leaderEpoch}
			var seq uint64
			if dup.lastOffs >= l.recoveryPoint {
				seq = l.writeSeq
			}
			always := l.cfg.FlushPolicy == FlushAlways
			l.mu.Unlock()
			if always && seq > 0 {
				if err := l.waitDurable(seq); err != nil {
					return AppendResult{}, err
				}
			}
			return res, nil
		}
	}
	now := l.clock.Now().UnixMilli()
	base := l.end
	record.SetBaseOffset(batch, base)
	record.SetPartitionLeaderEpoch(batch, leaderEpoch)
	h.BaseOffset, h.PartitionLeaderEpoch = base, leaderEpoch
	appendTime := int64(-1)
	if l.cfg.LogAppendTime {
		record.SetLogAppendTime(batch, now)
		h.MaxTimestamp, appendTime = now, now
	}
	l.assignEpochLocked(leaderEpoch, base)
	seq, err := l.appendLocked(batch, &h, now)
	if err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	res := AppendResult{BaseOffset: base, LastOffset: h.LastOffset(), LogAppendTime: appendTime, LogStartOffset: l.logStart, LeaderEpoch: leaderEpoch}
	always := l.cfg.FlushPolicy == FlushAlways
	l.mu.Unlock()
	if always {
		if err := l.waitDurable(seq); err != nil {
			return AppendResult{}, err
		}
	}
	return res, nil
}

// AppendAsFollower appends a batch whose offsets were assigned by the
// leader; its base offset must be the log end offset (else
// ErrOffsetMismatch). The batch's partition leader epoch feeds the
// leader-epoch history and its producer fields the producer state, without
// the idempotence checks.
func (l *Log) AppendAsFollower(batch []byte) error {
	seq, err := l.appendFollower(batch)
	if err == nil && seq > 0 {
		err = l.waitDurable(seq)
	}
	l.observeAppend(err)
	return err
}

// AppendAsFollowerUnsynced is AppendAsFollower without the wait for the
// fsync under FlushAlways: a follower appends the many batches of one
// fetch response this way, then calls SyncFollowerAppends once before
// it fetches (and so reports) past them. An fsync each would hold a
// follower catching up behind a leader whose producers share theirs.
func (l *Log) AppendAsFollowerUnsynced(batch []byte) error {
	_, err := l.appendFollower(batch)
	l.observeAppend(err)
	return err
}

// SyncFollowerAppends returns, under FlushAlways, once every write made
// so far is fsynced, or with the error that lost one; under the other
// policies at once.
func (l *Log) SyncFollowerAppends() error {
	l.mu.RLock()
	seq, always := l.writeSeq, l.cfg.FlushPolicy == FlushAlways
	l.mu.RUnlock()
	if !always || seq == 0 {
		return nil
	}
	err := l.waitDurable(seq)
	l.observeAppend(err)
	return err
}

// appendFollower appends batch and returns, under FlushAlways, the
// sequence of its write to wait for (0 under the other policies).
func (l *Log) appendFollower(batch []byte) (uint64, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("log: append: %w", err)
	}
	if h.Size() != len(batch) {
		return 0, fmt.Errorf("log: append: %w: header says %d bytes, have %d", record.ErrBadLength, h.Size(), len(batch))
	}
	if h.LastOffsetDelta < 0 {
		return 0, fmt.Errorf("log: append: %w: last offset delta %d", record.ErrBadCount, h.LastOffsetDelta)
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if h.BaseOffset != l.end {
		end := l.end
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: batch at %d, log end %d", ErrOffsetMismatch, h.BaseOffset, end)
	}
	l.assignEpochLocked(h.PartitionLeaderEpoch, h.BaseOffset)
	seq, err := l.appendLocked(batch, &h, l.clock.Now().UnixMilli())
	always := l.cfg.FlushPolicy == FlushAlways
	l.mu.Unlock()
	if err != nil || !always {
		return 0, err
	}
	return seq, nil
}

// assignEpochLocked records a new leader epoch starting at offset. The
// history is checkpointed before the recovery point passes the epoch's
// start (checkpointRecoveryLocked): until then a recovery scan rebuilds it
// from the batches, which carry their epoch, and an epoch begun with no
// batch yet (BeginEpoch) is begun again by the leader after a restart.
func (l *Log) assignEpochLocked(epoch int32, offset int64) {
	l.epochs.assign(epoch, offset)
}

// appendLocked writes batch (offsets assigned, header h) to the active
// segment, rolling first when needed, and returns the write's sequence
// number. On error nothing is visible and the file is restored.
func (l *Log) appendLocked(batch []byte, h *record.Header, now int64) (uint64, error) {
	seg := l.active()
	if seg.size > 0 && (seg.size+int64(len(batch)) > l.cfg.SegmentBytes ||
		(seg.rollTS >= 0 && now-seg.rollTS > l.cfg.SegmentMS) ||
		h.LastOffset()-seg.base > math.MaxUint32) {
		if err := l.rollLocked(); err != nil {
			return 0, err
		}
		seg.tail = nil // reads of a closed segment use its index
		seg = l.active()
	}
	pos := seg.size
	if pos == 0 {
		seg.rollTS = now
	}
	n, err := seg.file.WriteAt(batch, pos)
	if err == nil && n != len(batch) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if terr := seg.file.Truncate(pos); terr != nil {
			l.failed = fmt.Errorf("%w: cannot undo a failed write to %s: %w", ErrFailed, segmentName(seg.base, logExt), terr)
			l.logger.Error("log failed", "err", l.failed)
		}
		return 0, fmt.Errorf("log: append at offset %d: %w", h.BaseOffset, err)
	}
	seg.size = pos + int64(n)
	seg.checked.add(checkedRange{start: pos, end: seg.size, first: h.BaseOffset, next: h.LastOffset() + 1})
	seg.indexBatch(h, pos, l.cfg.IndexIntervalBytes)
	seg.addTail(h, pos)
	l.end = h.LastOffset() + 1
	if err := l.updateProducersLocked(h, batch); err != nil {
		// The batch is in the log; its index entry is rebuilt from it by
		// the next Open. Reads go on; appends stop until then, so that no
		// read_committed reader is served past an abort it cannot see.
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		l.logger.Error("log failed", "err", l.failed)
	}
	if l.maxTSValid && h.MaxTimestamp > l.maxTS {
		l.maxTS, l.maxTSBase = h.MaxTimestamp, h.BaseOffset
	}
	l.writeSeq++
	return l.writeSeq, nil
}

// updateProducersLocked records an appended batch (held in batch, or
// when nil read from the log) in the producer state, and an aborted
// transaction it ends in the aborted-transaction index.
func (l *Log) updateProducersLocked(h *record.Header, batch []byte) error {
	if h.ProducerID < 0 {
		return nil
	}
	typ, ce := int16(noControl), int32(-1)
	if h.Control() {
		typ, ce = controlOf(batch)
	}
	ab, ok := l.producers.update(h, typ, ce)
	if h.Control() {
		delete(l.txnVerified, h.ProducerID)
	}
	if h.Transactional() {
		l.firstUnstable.Store(l.producers.firstUnstable())
	}
	if ok {
		return l.addAbortedLocked(ab)
	}
	return nil
}

// rollLocked closes the active segment (fsync, indexes) and starts a new
// one at the log end offset. Under FlushAlways the old segment is fsynced
// here, since appends waiting for durability count on it; under the other
// policies, as in Kafka, the fsync happens in the background so that the
// append that rolls does not wait for a whole segment to reach the disk.
func (l *Log) rollLocked() error {
	if l.cfg.FlushPolicy != FlushAlways {
		return l.rollAsyncLocked()
	}
	old := l.active()
	if err := old.file.Sync(); err != nil {
		return l.syncFailedLocked(fmt.Errorf("roll %s: %w", segmentName(old.base, logExt), err))
	}
	l.markDurableLocked(l.end, l.writeSeq)
	old.sealIndexes()
	if err := l.flushIndexesLocked(old, true); err != nil {
		return err
	}
	if _, err := l.createSegmentLocked(l.end); err != nil {
		return err
	}
	old.sealedSize = old.size
	if err := l.checkpointSealedLocked(); err != nil {
		return err
	}
	l.logger.Debug("rolled segment", "segment", segmentName(l.end, logExt))
	l.openClosed = append(l.openClosed, old)
	l.evictLocked()
	if err := l.checkpointRecoveryLocked(); err != nil {
		return err
	}
	return l.snapshotProducersLocked()
}

// sealIndexes makes the next flushIndexesLocked of a segment being
// sealed write its index files even when they have no entries: a closed
// segment without them is taken for one whose indexes were lost, and
// rebuilt from its data.
func (s *segment) sealIndexes() {
	if len(s.idx) == 0 {
		s.idxFlushed = -1
	}
	if len(s.tidx) == 0 {
		s.tidxFlushed = -1
	}
}

// flushIndexesLocked writes the in-memory index entries not yet in seg's
// index files, with fsync when sync is set.
func (l *Log) flushIndexesLocked(seg *segment, sync bool) error {
	_, indexPath, timeIndexPath := segmentPaths(l.dir, seg.base)
	write := func(path string, data []byte, flushed *int) error {
		if *flushed == len(data) {
			return nil
		}
		if *flushed < 0 { // rewrite the whole file
			*flushed = 0
		}
		f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		n, err := f.WriteAt(data[*flushed:], int64(*flushed))
		if err == nil && n != len(data)-*flushed {
			err = io.ErrShortWrite
		}
		if err == nil {
			err = f.Truncate(int64(len(data)))
		}
		if err == nil && sync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
		*flushed = len(data)
		return nil
	}
	if err := write(indexPath, seg.idx, &seg.idxFlushed); err != nil {
		return err
	}
	return write(timeIndexPath, seg.tidx, &seg.tidxFlushed)
}

// noCheckpoint is ckptRecovery for a log without a recovery point
// checkpoint. A new log writes none until the recovery point moves, or
// it rolls: Open treats a log with one segment and no checkpoint as
// having nothing durable (recovery scans all of it), as it would with one
// at the segment's base, and a closed segment without one as fsynced
// whole (a roll fsyncs it), so the file must exist before the first roll.
const noCheckpoint = -2

// checkpointRecoveryLocked writes the recovery point, after the
// leader-epoch history: the history in its checkpoint covers every batch
// below the recovery point in its checkpoint, which recovery does not read.
func (l *Log) checkpointRecoveryLocked() error {
	if l.ckpts != nil {
		return l.publishLocked()
	}
	if l.recoveryPoint == l.ckptRecovery || l.ckptRecovery == noCheckpoint && len(l.segs) == 1 && l.recoveryPoint == l.segs[0].base {
		return nil
	}
	if err := l.checkpointEpochsLocked(); err != nil {
		return err
	}
	if err := l.writeCheckpointLocked(recoveryPointFile, encodeOffsetCheckpoint("recovery-point", l.recoveryPoint)); err != nil {
		return err
	}
	l.ckptRecovery = l.recoveryPoint
	return nil
}

// checkpointLogStartLocked writes the log start offset, unless the
// checkpoint already gives it: Open takes the first segment's base when
// there is none, or when it holds an offset below that base (retention
// deleted the segments below), so a log whose start is its first
// segment's base needs no file.
func (l *Log) checkpointLogStartLocked() error {
	if l.ckptLogStart != -1 && max(l.ckptLogStart, l.segs[0].base) == l.logStart {
		return nil
	}
	if err := l.writeCheckpointLocked(logStartFile, encodeOffsetCheckpoint("log-start", l.logStart)); err != nil {
		l.ckptLogStart = -1
		return err
	}
	l.ckptLogStart = l.logStart
	return nil
}

func (l *Log) checkpointEpochsLocked() error {
	if l.ckpts != nil {
		return l.publishLocked()
	}
	return l.writeCheckpointLocked(leaderEpochFile, encodeEpochCheckpoint(l.epochs.entries))
}

func (l *Log) snapshotProducersLocked() error {
	if err := l.writeCheckpointLocked(producerStateFile, l.producers.encode(l.end)); err != nil {
		return err
	}
	l.snapOffset = l.end
	return nil
}

// checkpointAllLocked fsyncs and writes every checkpoint for a log whose
// data is all durable (those this process wrote with the same contents
// already are left as they are).
func (l *Log) checkpointAllLocked() error {
	l.ckptRecovery = -1
	return errors.Join(l.checkpointRecoveryLocked(), l.checkpointLogStartLocked(),
		l.checkpointEpochsLocked(), l.snapshotProducersLocked(), l.checkpointSealedLocked())
}
