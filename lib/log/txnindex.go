package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
)

// AbortedTxn is a transaction that ended with an abort marker: a
// read_committed consumer drops the producer's batches from FirstOffset
// up to the marker at LastOffset. LastStableOffset is the log's last
// stable offset right after the marker was appended (the first offset of
// the oldest transaction still open then, or the marker's offset + 1).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// The aborted-transaction index (Kafka's .txnindex): one file per segment
// that holds an abort marker, named by the segment's base offset, with one
// 34-byte entry per marker in the segment, in offset order, big endian:
//
//	version int16 (0) | producer id int64 | first offset int64 |
//	last offset int64 | last stable offset int64
//
// An entry is appended and fsynced when its marker is appended; a crash
// may leave a partial entry at the end, which is ignored. The file is a
// cache of what the markers say: Open drops the entries at or after the
// offset from which it replays the batch headers into the producer state
// (the producer-state snapshot's, or the whole log's without a usable
// one) and makes them again from the markers, rewriting the files that
// differ; so does a truncation. A cleaning pass writes the entries of a
// group of segments into the new segment's file before the swap commits;
// entries found twice are kept once.
const (
	txnIndexExt     = ".txnindex"
	txnEntrySize    = 34
	txnIndexVersion = 0
)

var errBadTxnIndex = errors.New("log: bad transaction index entry")

func appendTxnEntry(b []byte, a AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, txnIndexVersion)
	b = be.AppendUint64(b, uint64(a.ProducerID))
	b = be.AppendUint64(b, uint64(a.FirstOffset))
	b = be.AppendUint64(b, uint64(a.LastOffset))
	return be.AppendUint64(b, uint64(a.LastStableOffset))
}

// decodeTxnIndex returns the whole entries of a .txnindex file; a partial
// entry at the end (a torn append) is left out. An entry that cannot be
// right (unknown version, negative producer id, first offset past the
// last) is an error: the caller rebuilds the index from the log.
func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	be := binary.BigEndian
	var out []AbortedTxn
	for ; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
		if v := int16(be.Uint16(b)); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: version %d", errBadTxnIndex, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(b[2:])),
			FirstOffset:      int64(be.Uint64(b[10:])),
			LastOffset:       int64(be.Uint64(b[18:])),
			LastStableOffset: int64(be.Uint64(b[26:])),
		}
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastStableOffset < 0 {
			return nil, fmt.Errorf("%w: %+v", errBadTxnIndex, a)
		}
		out = append(out, a)
	}
	return out, nil
}

// DecodeTxnIndex returns the entries of a .txnindex file's bytes (a
// remote copy's, see SegmentTxnIndex); an entry that cannot be right is
// an error.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) { return decodeTxnIndex(b) }

func txnIndexPath(dir string, base int64) string {
	return filepath.Join(dir, segmentName(base, txnIndexExt))
}

// loadTxnIndexesLocked reads the .txnindex files of the segments during
// load into l.aborted (merged, each entry once, by last offset) and
// remembers what each file holds (l.txnFiles). A file that cannot be
// read or decoded makes the producer state be rebuilt from the whole log
// (it returns false).
func (l *Log) loadTxnIndexesLocked() bool {
	l.aborted = nil
	l.txnFiles = map[int64][]byte{}
	ok := true
	for _, seg := range l.segs {
		name := segmentName(seg.base, txnIndexExt)
		if l.present != nil && !l.present[name] {
			continue
		}
		b, err := vfs.ReadFile(l.fs, l.path(name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var entries []AbortedTxn
		if err == nil {
			entries, err = decodeTxnIndex(b)
		}
		if err != nil {
			l.logger.Warn("rebuilding the aborted-transaction index", "file", name, "err", err)
			ok = false
			continue
		}
		l.txnFiles[seg.base] = b
		l.aborted = append(l.aborted, entries...)
	}
	l.sortAbortedLocked()
	return ok
}

func (l *Log) sortAbortedLocked() {
	slices.SortFunc(l.aborted, func(a, b AbortedTxn) int {
		switch {
		case a.LastOffset != b.LastOffset:
			return cmpInt64(a.LastOffset, b.LastOffset)
		case a.ProducerID != b.ProducerID:
			return cmpInt64(a.ProducerID, b.ProducerID)
		}
		return cmpInt64(a.FirstOffset, b.FirstOffset)
	})
	l.aborted = slices.Compact(l.aborted)
}

// dropAbortedFromLocked forgets the aborted transactions whose marker is at or
// after from.
func (l *Log) dropAbortedFromLocked(from int64) {
	i, _ := slices.BinarySearchFunc(l.aborted, from, func(a AbortedTxn, o int64) int { return cmpInt64(a.LastOffset, o) })
	l.aborted = slices.Clone(l.aborted[:i])
}

// dropAbortedRangeLocked forgets the aborted transactions whose marker is
// in [from, to): a segment deleted.
func (l *Log) dropAbortedRangeLocked(from, to int64) {
	l.aborted = slices.DeleteFunc(slices.Clone(l.aborted), func(a AbortedTxn) bool { return a.LastOffset >= from && a.LastOffset < to })
	delete(l.txnFiles, from)
}

// txnEntriesLocked encodes the entries whose marker is in segment i.
func (l *Log) txnEntriesLocked(i int) []byte {
	from, to := l.segs[i].base, int64(math.MaxInt64)
	if i+1 < len(l.segs) {
		to = l.segs[i+1].base
	}
	var b []byte
	for _, a := range l.aborted {
		if a.LastOffset >= from && a.LastOffset < to {
			b = appendTxnEntry(b, a)
		}
	}
	return b
}

// writeTxnIndexesLocked makes every segment's .txnindex hold its entries
// of l.aborted: a file that differs is replaced atomically, one left with
// no entry removed.
func (l *Log) writeTxnIndexesLocked() error {
	for i, seg := range l.segs {
		want := l.txnEntriesLocked(i)
		have, exists := l.txnFiles[seg.base]
		if bytes.Equal(want, have) && (exists || len(want) == 0) {
			continue
		}
		path := txnIndexPath(l.dir, seg.base)
		if len(want) == 0 {
			if err := l.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", segmentName(seg.base, txnIndexExt), err)
			}
			delete(l.txnFiles, seg.base)
			continue
		}
		if err := vfs.WriteFileAtomic(l.fs, path, want, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", segmentName(seg.base, txnIndexExt), err)
		}
		l.txnFiles[seg.base] = want
	}
	return nil
}

// addAbortedLocked records a transaction an abort marker just appended to
// the active segment ended, and appends its entry to the segment's
// .txnindex, fsynced.
func (l *Log) addAbortedLocked(a AbortedTxn) error {
	l.aborted = append(l.aborted, a)
	seg := l.active()
	have, exists := l.txnFiles[seg.base]
	entry := appendTxnEntry(nil, a)
	f, err := l.fs.OpenFile(txnIndexPath(l.dir, seg.base), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", segmentName(seg.base, txnIndexExt), err)
	}
	n, err := f.WriteAt(entry, int64(len(have)))
	if err == nil && n != len(entry) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !exists {
		err = vfs.SyncDir(l.fs, l.dir) // the new file's entry
	}
	if err != nil {
		// The marker is in the log: the next Open or truncation rebuilds
		// the entry from it.
		return fmt.Errorf("write %s: %w", segmentName(seg.base, txnIndexExt), err)
	}
	l.txnFiles[seg.base] = append(slices.Clip(have), entry...)
	return nil
}

// controlAt returns the control type and coordinator epoch of the control
// batch with header h at pos of f (noControl for a batch that is not a
// well-formed control batch).
func controlAt(f io.ReaderAt, pos int64, h *record.Header) (int16, int32) {
	if !h.Control() {
		return noControl, -1
	}
	b := make([]byte, h.Size())
	if _, err := f.ReadAt(b, pos); err != nil {
		return noControl, -1
	}
	return controlOf(b)
}

// controlOf is controlAt for a batch in memory.
func controlOf(batch []byte) (int16, int32) {
	typ, ce, err := record.ControlType(batch)
	if err != nil {
		return noControl, -1
	}
	return typ, ce
}

// LastStableOffset is the last stable offset of a replica whose
// high-water mark is hw: the first offset of the oldest transaction still
// open, when below hw, else hw. A read_committed consumer reads below it.
func (l *Log) LastStableOffset(hw int64) int64 {
	if fu := l.firstUnstable.Load(); fu >= 0 && fu < hw {
		return fu
	}
	return hw
}

// AbortedTxns appends to dst the aborted transactions a read_committed
// read of [from, upto) must know: those ending at or after from and
// beginning before upto, by marker offset.
func (l *Log) AbortedTxns(dst []AbortedTxn, from, upto int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(l.aborted, from, func(a AbortedTxn, o int64) int { return cmpInt64(a.LastOffset, o) })
	for _, a := range l.aborted[i:] {
		if a.FirstOffset < upto {
			dst = append(dst, a)
		}
		// Every transaction ending later began at or after the last
		// stable offset this one left.
		if a.LastStableOffset >= upto {
			break
		}
	}
	return dst
}

// ProducerInfo is one producer's state on this log (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32 // -1: none
	LastTimestamp    int64 // -1: none
	CoordinatorEpoch int32 // -1: no marker yet
	TxnStartOffset   int64 // -1: no open transaction
}

// Producers returns the state of every producer the log knows, by
// producer id.
func (l *Log) Producers() []ProducerInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerInfo, 0, len(l.producers.m))
	for pid, e := range l.producers.m {
		p := ProducerInfo{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastTS,
			CoordinatorEpoch: e.coordEpoch, TxnStartOffset: -1}
		if e.txnOpen {
			p.TxnStartOffset = e.txnFirst
		}
		if e.n > 0 {
			p.LastSequence = e.newest().lastSeq
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmpInt64(a.ProducerID, b.ProducerID) })
	return out
}

// OngoingTxn reports whether producer pid has an open transaction here,
// begun in epoch. A transaction open in an older epoch is not the
// producer's in epoch: a transaction.version 2 producer starts every
// transaction with a new epoch, possibly before the marker of the one
// before reached this partition.
func (l *Log) OngoingTxn(pid int64, epoch int16) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.ongoingTxnIn(pid, epoch)
}

// AppendMarker appends a transaction marker (a control batch) for m at
// the log end in leaderEpoch, as a partition leader does for
// WriteTxnMarkers: a marker from an older producer epoch is
// ErrInvalidProducerEpoch, one from an older coordinator epoch
// ErrCoordinatorFenced, and nothing is appended (Append checks a control
// batch so, atomically with the write). Under FlushAlways it returns once
// the marker is fsynced.
func (l *Log) AppendMarker(m record.Marker, leaderEpoch int32) (AppendResult, error) {
	return l.Append(record.BuildMarker(m, l.clock.Now().UnixMilli()), leaderEpoch)
}

// MarkTxnVerified records that the transaction coordinator confirmed
// producer pid, in epoch, in an ongoing transaction that includes this
// partition (KIP-890): its next transactional batch may open the
// transaction here, unless a marker for the producer comes first. From
// the first call on, the log refuses a transactional batch that would
// open a transaction without such a confirmation (ErrInvalidTxnState), so
// a marker appended between a leader's verification and its append
// cannot leave a transaction open that the coordinator does not know.
func (l *Log) MarkTxnVerified(pid int64, epoch int16) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.txnVerified == nil {
		l.txnVerified = map[int64]int16{}
	}
	l.txnVerified[pid] = epoch
	l.txnVerifying = true
}

// checkVerifiedLocked refuses a transactional batch that would open a
// transaction its producer was not confirmed in (see MarkTxnVerified).
func (l *Log) checkVerifiedLocked(h *record.Header) error {
	if !l.txnVerifying || !h.Transactional() || l.producers.ongoingTxnIn(h.ProducerID, h.ProducerEpoch) {
		return nil
	}
	if epoch, ok := l.txnVerified[h.ProducerID]; !ok || epoch != h.ProducerEpoch {
		return fmt.Errorf("%w: producer %d epoch %d is in no verified transaction here", ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch)
	}
	return nil
}
