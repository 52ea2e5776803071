package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mqproject/mq/lib/vfs"
)

// Checkpoints keeps, in one file for every log of a data directory, the
// checkpoints each log would otherwise keep in files of its own and
// rewrite often: its recovery point, its leader-epoch history and the
// replica's high-water mark. A broker hosting 10,000 partitions replaces
// one file every few seconds rather than thousands (Kafka keeps the
// recovery points and high-water marks of a log directory this way, in
// recovery-point-offset-checkpoint and replication-offset-checkpoint), and
// a new partition writes none.
//
// Logs opened with it (Options.Checkpoints) record those values in it, in
// memory; the owner writes the file (Write) periodically and after
// closing the logs. A log writes it at once only when a value goes below
// the one the file holds (a truncation): the file never lets a restarted
// log trust bytes it no longer had, nor count records it no longer had as
// committed. Between two Writes the file lags: a recovery after a crash
// scans from the older recovery point, and a replica restarts from the
// older high-water mark.
//
// The file is text:
//
//	mq log-checkpoints 1
//	DIR RECOVERY_POINT HIGH_WATERMARK EPOCHS OWNER   (one line per log)
//	crc32c HEX                                       (of every line before)
//
// DIR is the log's directory name; a value it has none of is "-"; EPOCHS
// is the leader-epoch history, "EPOCH:START_OFFSET" entries joined by
// commas; OWNER is what the log belongs to (Options.Owner: a broker's
// topic ID), so that the owner of a directory can tell it from one an
// earlier log of the same name left (Owner). A log that finds no entry, but the per-log files of an earlier
// mq, takes their values, and the files are removed once a Write wrote
// them. All methods may be called concurrently.
type Checkpoints struct {
	fs     vfs.FS
	path   string
	logger *slog.Logger

	writeMu sync.Mutex // one Write at a time; taken before mu

	mu      sync.Mutex
	logs    map[string]logCheckpoint // by log directory name
	durable map[string]logCheckpoint // what the file holds
	gen     uint64                   // bumped by every change of logs
	written uint64                   // logs as of gen written are in the file
	legacy  map[string][]string      // per-log files to remove after the next Write
}

// logCheckpoint is one log's line of a Checkpoints file.
type logCheckpoint struct {
	recoveryPoint int64 // -1: none
	highWatermark int64 // -1: none
	epochs        []EpochEntry
	hasEpochs     bool
	owner         string // Options.Owner of the log that wrote it, "" unknown
}

var noLogCheckpoint = logCheckpoint{recoveryPoint: -1, highWatermark: -1}

func (c logCheckpoint) equal(o logCheckpoint) bool {
	return c.recoveryPoint == o.recoveryPoint && c.highWatermark == o.highWatermark &&
		c.hasEpochs == o.hasEpochs && slices.Equal(c.epochs, o.epochs) && c.owner == o.owner
}

// checkpointsKind names the file in its header line.
const checkpointsKind = "log-checkpoints"

// OpenCheckpoints reads the checkpoints file at path (fsys nil: vfs.OS). A
// missing file holds no log; a damaged one is logged and read as holding
// none, so that every log is recovered from its start and every replica
// restarts from its log start.
func OpenCheckpoints(fsys vfs.FS, path string, logger *slog.Logger) (*Checkpoints, error) {
	if fsys == nil {
		fsys = vfs.OS
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Checkpoints{fs: fsys, path: path, logger: logger, logs: map[string]logCheckpoint{}, durable: map[string]logCheckpoint{}, legacy: map[string][]string{}}
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("log: %s: %w", filepath.Base(path), err)
	}
	logs, err := decodeCheckpoints(b)
	if err != nil {
		logger.Error("ignoring the log checkpoints: every log is recovered from its start, every replica restarts from its log start, and a replica that lost committed records is not detected", "file", path, "err", err)
		return c, nil
	}
	c.logs, c.durable = logs, maps.Clone(logs)
	return c, nil
}

// get returns the entry of the log name.
func (c *Checkpoints) get(name string) (logCheckpoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.logs[name]
	return e, ok
}

// update changes the entry of the log name with fn and reports whether
// the file must be written at once: the recovery point or the
// high-water mark went below the one the file holds.
func (c *Checkpoints) update(name string, fn func(e *logCheckpoint)) (lower bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.logs[name]
	if !ok {
		e = noLogCheckpoint
	}
	old := e
	fn(&e)
	if ok && e.equal(old) {
		return false
	}
	c.logs[name] = e
	c.gen++
	d, ok := c.durable[name]
	return ok && (e.recoveryPoint < d.recoveryPoint || e.highWatermark < d.highWatermark)
}

// adopt records values a log read from its own files, durable there
// already, and removes those files after the next Write.
func (c *Checkpoints) adopt(name string, e logCheckpoint, files []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs[name], c.durable[name] = e, e
	c.legacy[name] = append(c.legacy[name], files...)
	c.gen++
}

// Owner returns the owner the entry of the log name was written for
// (Options.Owner), false when there is no entry or it names none.
func (c *Checkpoints) Owner(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.logs[name]
	return e.owner, ok && e.owner != ""
}

// Forget drops the log name: the next Write leaves it out. Open and
// Delete do it for a log whose directory they create or remove; a caller
// creating log directories itself (MakeDirs) does it for those, so that a
// new log never takes an old one's checkpoints.
func (c *Checkpoints) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.logs[name]; !ok {
		return
	}
	delete(c.logs, name)
	delete(c.legacy, name)
	c.gen++
}

// Write replaces the file with every log's checkpoints, atomically and
// durably, unless nothing changed since the last Write. Callers that
// arrive during a Write share the next one.
func (c *Checkpoints) Write() error {
	c.mu.Lock()
	want := c.gen
	c.mu.Unlock()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	if c.written >= want {
		c.mu.Unlock()
		return nil
	}
	gen, logs, legacy := c.gen, maps.Clone(c.logs), c.legacy
	c.legacy = map[string][]string{}
	c.mu.Unlock()
	if err := vfs.WriteFileAtomic(c.fs, c.path, encodeCheckpoints(logs), 0o644); err != nil {
		c.mu.Lock()
		for name, files := range legacy {
			c.legacy[name] = append(c.legacy[name], files...)
		}
		c.mu.Unlock()
		return fmt.Errorf("log: %w", err)
	}
	c.mu.Lock()
	c.written, c.durable = gen, logs
	c.mu.Unlock()
	for name, files := range legacy {
		for _, p := range files {
			if err := c.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				c.logger.Warn("cannot remove a checkpoint file the log checkpoints replace", "log", name, "file", filepath.Base(p), "err", err)
			}
		}
	}
	return nil
}

func encodeCheckpoints(logs map[string]logCheckpoint) []byte {
	var b bytes.Buffer
	b.Grow(48 * (len(logs) + 2))
	fmt.Fprintf(&b, "mq %s 1\n", checkpointsKind)
	offset := func(v int64) {
		if v < 0 {
			b.WriteByte('-')
			return
		}
		b.WriteString(strconv.FormatInt(v, 10))
	}
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		e := logs[name]
		b.WriteString(name)
		b.WriteByte(' ')
		offset(e.recoveryPoint)
		b.WriteByte(' ')
		offset(e.highWatermark)
		b.WriteByte(' ')
		switch {
		case !e.hasEpochs:
			b.WriteByte('-')
		case len(e.epochs) == 0:
			b.WriteByte(',')
		}
		for i, ep := range e.epochs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(int64(ep.Epoch), 10))
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(ep.StartOffset, 10))
		}
		b.WriteByte(' ')
		if e.owner == "" {
			b.WriteByte('-')
		}
		b.WriteString(e.owner)
		b.WriteByte('\n')
	}
	return appendChecksum(b.Bytes())
}

func decodeCheckpoints(b []byte) (map[string]logCheckpoint, error) {
	sc, err := checksummedLines(b, checkpointsKind)
	if err != nil {
		return nil, err
	}
	offset := func(s string) (int64, bool) {
		if s == "-" {
			return -1, true
		}
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil && v >= 0
	}
	logs := map[string]logCheckpoint{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			return nil, fmt.Errorf("bad line %q", sc.Text())
		}
		e := noLogCheckpoint
		var ok1, ok2 bool
		e.recoveryPoint, ok1 = offset(f[1])
		e.highWatermark, ok2 = offset(f[2])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("bad line %q", sc.Text())
		}
		if f[3] != "-" {
			e.hasEpochs = true
			for _, s := range strings.Split(f[3], ",") {
				if s == "" {
					continue
				}
				es, ss, ok := strings.Cut(s, ":")
				epoch, err1 := strconv.ParseInt(es, 10, 32)
				start, err2 := strconv.ParseInt(ss, 10, 64)
				if !ok || err1 != nil || err2 != nil || epoch < 0 || start < 0 {
					return nil, fmt.Errorf("bad epoch %q in line %q", s, sc.Text())
				}
				if k := len(e.epochs); k > 0 && (int32(epoch) <= e.epochs[k-1].Epoch || start < e.epochs[k-1].StartOffset) {
					return nil, fmt.Errorf("epochs out of order in line %q", sc.Text())
				}
				e.epochs = append(e.epochs, EpochEntry{Epoch: int32(epoch), StartOffset: start})
			}
		}
		if f[4] != "-" {
			e.owner = f[4]
		}
		if _, dup := logs[f[0]]; dup {
			return nil, fmt.Errorf("log %s listed twice", f[0])
		}
		logs[f[0]] = e
	}
	return logs, sc.Err()
}

// loadCheckpointsLocked reads, during load, the recovery point, the
// leader-epoch history (into l.epochs, and l.loadedEpochs) and the
// high-water mark: from the log's files, or from its Checkpoints entry.
// A log with Checkpoints but no entry takes the values of the files of an
// earlier mq it finds, which go once the Checkpoints file holds them. A
// checkpoint missing is an error satisfying errors.Is(err,
// os.ErrNotExist).
func (l *Log) loadCheckpointsLocked() (rp int64, rpErr, epErr error) {
	l.hwAtOpen, l.hwCheckpointed = -1, -1
	name := filepath.Base(l.dir)
	if l.ckpts != nil {
		if e, ok := l.ckpts.get(name); ok {
			if files := l.ownFilesLocked(); len(files) > 0 {
				l.ckpts.adopt(name, e, files) // a crash kept them after the Checkpoints took them
			}
			return l.useCheckpointLocked(e)
		}
	}
	rp, rpErr = l.readOffsetCheckpoint(recoveryPointFile, "recovery-point")
	if b, err := l.readCheckpointLocked(leaderEpochFile); err != nil {
		epErr = err
	} else if l.epochs.entries, epErr = decodeEpochCheckpoint(b); epErr != nil {
		l.logger.Warn("ignoring leader-epoch checkpoint", "err", epErr)
	} else {
		l.loadedEpochs = &epochCache{entries: slices.Clone(l.epochs.entries)}
	}
	if hw, err := l.readOffsetCheckpoint(highWatermarkFile, "high-water-mark"); err == nil {
		l.hwAtOpen, l.hwCheckpointed = hw, hw
	}
	if l.ckpts == nil {
		return rp, rpErr, epErr
	}
	// An earlier mq's files: what could be read of them is the entry.
	e := noLogCheckpoint
	if rpErr == nil {
		e.recoveryPoint = rp
	}
	if epErr == nil {
		e.epochs, e.hasEpochs = slices.Clone(l.epochs.entries), true
	}
	e.highWatermark, e.owner = l.hwAtOpen, l.owner
	if files := l.ownFilesLocked(); len(files) > 0 {
		l.ckpts.adopt(name, e, files)
	}
	return rp, rpErr, epErr
}

// ownFilesLocked lists, during load, the log's own files of what its
// Checkpoints keep: the recovery point, leader-epoch and high-water mark
// checkpoints its directory holds.
func (l *Log) ownFilesLocked() []string {
	var files []string
	for _, f := range []string{recoveryPointFile, leaderEpochFile, highWatermarkFile} {
		if l.present[f] {
			files = append(files, l.path(f))
		}
	}
	return files
}

// useCheckpointLocked takes the values of the log's Checkpoints entry.
func (l *Log) useCheckpointLocked(e logCheckpoint) (rp int64, rpErr, epErr error) {
	rp = e.recoveryPoint
	if rp < 0 {
		rpErr = fmt.Errorf("%s: %w", checkpointsKind, os.ErrNotExist)
	}
	if e.hasEpochs {
		l.epochs.entries = slices.Clone(e.epochs)
		l.loadedEpochs = &epochCache{entries: slices.Clone(e.epochs)}
	} else {
		epErr = fmt.Errorf("%s: %w", checkpointsKind, os.ErrNotExist)
	}
	l.hwAtOpen, l.hwCheckpointed = e.highWatermark, e.highWatermark
	return rp, rpErr, epErr
}

// publishLocked records the recovery point and the leader-epoch history
// in the log's Checkpoints, in memory, and writes the file at once when
// the recovery point went below the one it holds. A log in a batch
// publishes at Commit: its data is durable only then.
func (l *Log) publishLocked() error {
	if l.batched() {
		return nil
	}
	rp, epochs, owner := l.recoveryPoint, slices.Clone(l.epochs.entries), l.owner
	if l.ckpts.update(filepath.Base(l.dir), func(e *logCheckpoint) {
		e.recoveryPoint, e.epochs, e.hasEpochs, e.owner = rp, epochs, true, owner
	}) {
		return l.ckpts.Write()
	}
	return nil
}

// publish is publishLocked for a log whose batch committed.
func (l *Log) publish() error {
	if l.ckpts == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.publishLocked()
}
