package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/mqproject/mq/lib/record"
)

// producerBatchesKept is how many recent batches per producer are kept for
// duplicate detection (Kafka's max.in.flight.requests.per.connection bound).
const producerBatchesKept = 5

type producerBatch struct {
	firstSeq, lastSeq    int32
	baseOffset, lastOffs int64
}

type producerEntry struct {
	epoch   int16
	batches [producerBatchesKept]producerBatch // ring; newest at head
	n       int                                // valid batches
	head    int
	// coordEpoch is the coordinator epoch of the producer's last marker
	// (-1: none); txnFirst the first offset of its ongoing transaction,
	// when txnOpen; lastTS the max timestamp of its last batch.
	coordEpoch int32
	txnOpen    bool
	txnFirst   int64
	lastTS     int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordEpoch: -1, lastTS: -1}
}

// reset forgets the sequences of an entry whose epoch changed; its
// transaction and coordinator epoch stay (a marker with the bumped epoch
// ends the transaction begun in the one before).
func (e *producerEntry) reset(epoch int16) {
	*e = producerEntry{epoch: epoch, coordEpoch: e.coordEpoch, txnOpen: e.txnOpen, txnFirst: e.txnFirst, lastTS: e.lastTS}
}

func (e *producerEntry) newest() *producerBatch { return &e.batches[e.head] }

func (e *producerEntry) push(b producerBatch) {
	if e.n > 0 {
		e.head = (e.head + 1) % producerBatchesKept
	}
	e.batches[e.head] = b
	if e.n < producerBatchesKept {
		e.n++
	}
}

// producerState tracks idempotent and transactional producers: per
// producer id, the current epoch, the last batches appended and the
// first offset of its ongoing transaction. Guarded by Log.mu.
type producerState struct {
	m map[int64]*producerEntry
	// ongoing are the producers with an open transaction, with its
	// first offset: the last stable offset is the least of them.
	ongoing map[int64]int64
}

func newProducerState() producerState {
	return producerState{m: make(map[int64]*producerEntry), ongoing: make(map[int64]int64)}
}

// firstUnstable is the first offset of the oldest ongoing transaction,
// -1 when there is none.
func (ps *producerState) firstUnstable() int64 {
	first := int64(-1)
	for _, o := range ps.ongoing {
		if first < 0 || o < first {
			first = o
		}
	}
	return first
}

// nextSeq is the sequence after s; sequences wrap at MaxInt32 to 0.
func nextSeq(s int32) int32 {
	if s == 1<<31-1 {
		return 0
	}
	return s + 1
}

// check validates an idempotent batch (ProducerID >= 0, BaseSequence >= 0)
// against the state. dup is non-nil when the batch is a retry of one of the
// producer's last batches.
func (ps *producerState) check(h *record.Header) (dup *producerBatch, err error) {
	first, last := h.BaseSequence, h.LastSequence()
	e := ps.m[h.ProducerID]
	if e != nil && h.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if e != nil && e.txnOpen && !h.Transactional() {
		return nil, fmt.Errorf("%w: producer %d wrote a non-transactional batch in its transaction begun at %d", ErrInvalidTxnState, h.ProducerID, e.txnFirst)
	}
	if e == nil || e.n == 0 {
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d is unknown and the batch starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, first)
		}
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return nil, nil
	}
	for i := 0; i < e.n; i++ {
		b := &e.batches[i]
		if b.firstSeq == first && b.lastSeq == last {
			return b, nil
		}
	}
	if want := nextSeq(e.newest().lastSeq); first != want {
		return nil, fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, want, first)
	}
	return nil, nil
}

// checkMarker checks a transaction marker for the producer against the
// state: a marker from an older producer epoch is ErrInvalidProducerEpoch,
// one from an older coordinator epoch ErrCoordinatorFenced.
func (ps *producerState) checkMarker(m *record.Marker) error {
	e := ps.m[m.ProducerID]
	if e == nil {
		return nil
	}
	if m.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker for producer %d epoch %d, current %d", ErrInvalidProducerEpoch, m.ProducerID, m.ProducerEpoch, e.epoch)
	}
	if m.CoordinatorEpoch < e.coordEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, last %d", ErrCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// ongoingTxnIn reports whether producer pid has an open transaction in
// epoch, its current one.
func (ps *producerState) ongoingTxnIn(pid int64, epoch int16) bool {
	e := ps.m[pid]
	return e != nil && e.txnOpen && e.epoch == epoch
}

// noControl is update's control for a batch that is not a marker.
const noControl = -1

// update records an appended batch (offsets assigned). Batches without a
// producer id are ignored. For a control batch, control is its control
// record type (record.ControlAbort or ControlCommit; another type ends no
// transaction) and coordEpoch the marker's coordinator epoch; it returns
// the transaction an abort marker ended (ok false for any other batch).
func (ps *producerState) update(h *record.Header, control int16, coordEpoch int32) (ab AbortedTxn, ok bool) {
	if h.ProducerID < 0 {
		return ab, false
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch > e.epoch || h.ProducerEpoch != e.epoch && !h.Control() {
		e.reset(h.ProducerEpoch)
	}
	e.lastTS = h.MaxTimestamp
	if h.Control() {
		if control != record.ControlAbort && control != record.ControlCommit {
			return ab, false
		}
		e.coordEpoch = max(e.coordEpoch, coordEpoch)
		first, open := e.txnFirst, e.txnOpen
		e.txnOpen, e.txnFirst = false, 0
		delete(ps.ongoing, h.ProducerID)
		if !open || control != record.ControlAbort {
			return ab, false
		}
		lso := ps.firstUnstable()
		if lso < 0 {
			lso = h.BaseOffset + 1
		}
		return AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso}, true
	}
	if h.Transactional() && !e.txnOpen {
		e.txnOpen, e.txnFirst = true, h.BaseOffset
		ps.ongoing[h.ProducerID] = h.BaseOffset
	}
	if h.BaseSequence >= 0 {
		e.push(producerBatch{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), baseOffset: h.BaseOffset, lastOffs: h.LastOffset()})
	}
	return ab, false
}

// evictBelow forgets producers whose last batch ends below start, unless
// their transaction is still open.
func (ps *producerState) evictBelow(start int64) {
	for pid, e := range ps.m {
		if !e.txnOpen && (e.n == 0 || e.newest().lastOffs < start) {
			delete(ps.m, pid)
		}
	}
}

// Producer-state snapshot (file "producer-state"), big endian:
//
//	magic "MQPS" | version uint8 = 2 | offset int64 | count uint32
//	count × ( producer id int64 | epoch int16 | coordinator epoch int32 |
//	          transaction first offset int64 | last timestamp int64 | n uint8 |
//	          n × ( first seq int32 | last seq int32 | base offset int64 | last offset int64 ) )
//	crc32c uint32 of everything before it
//
// offset is the log end offset the snapshot is valid at: recovery loads it
// and replays the batch headers from offset to the end. Batches are listed
// oldest first. Version 1 has no coordinator epoch, transaction first
// offset or timestamp (written before transactions: none open).
const (
	snapshotMagic   = "MQPS"
	snapshotVersion = 2
)

var errBadSnapshot = errors.New("bad producer-state snapshot")

func (ps *producerState) encode(offset int64) []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid := range ps.m {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	be := binary.BigEndian
	b := make([]byte, 0, 17+len(pids)*(31+producerBatchesKept*24)+4)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = be.AppendUint64(b, uint64(offset))
	b = be.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := ps.m[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint32(b, uint32(e.coordEpoch))
		txnFirst := int64(-1)
		if e.txnOpen {
			txnFirst = e.txnFirst
		}
		b = be.AppendUint64(b, uint64(txnFirst))
		b = be.AppendUint64(b, uint64(e.lastTS))
		b = append(b, byte(e.n))
		for i := e.n - 1; i >= 0; i-- {
			bt := &e.batches[(e.head-i+producerBatchesKept)%producerBatchesKept]
			b = be.AppendUint32(b, uint32(bt.firstSeq))
			b = be.AppendUint32(b, uint32(bt.lastSeq))
			b = be.AppendUint64(b, uint64(bt.baseOffset))
			b = be.AppendUint64(b, uint64(bt.lastOffs))
		}
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeProducerSnapshot(b []byte) (producerState, int64, error) {
	be := binary.BigEndian
	ps := newProducerState()
	if len(b) < 21 || string(b[:4]) != snapshotMagic {
		return ps, 0, fmt.Errorf("%w: bad magic or size", errBadSnapshot)
	}
	version := b[4]
	if version != 1 && version != snapshotVersion {
		return ps, 0, fmt.Errorf("%w: version %d", errBadSnapshot, b[4])
	}
	fixed := 11 // producer id, epoch, n
	if version >= 2 {
		fixed += 20 // coordinator epoch, transaction first offset, last timestamp
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != be.Uint32(b[len(b)-4:]) {
		return ps, 0, fmt.Errorf("%w: crc mismatch", errBadSnapshot)
	}
	offset := int64(be.Uint64(body[5:]))
	count := be.Uint32(body[13:])
	p := body[17:]
	for range count {
		if len(p) < fixed {
			return ps, 0, fmt.Errorf("%w: truncated", errBadSnapshot)
		}
		pid := int64(be.Uint64(p))
		e := newProducerEntry(int16(be.Uint16(p[8:])))
		if version >= 2 {
			e.coordEpoch = int32(be.Uint32(p[10:]))
			e.txnFirst = int64(be.Uint64(p[14:]))
			e.lastTS = int64(be.Uint64(p[22:]))
			if e.txnFirst < -1 {
				return ps, 0, fmt.Errorf("%w: transaction first offset %d", errBadSnapshot, e.txnFirst)
			}
			e.txnOpen = e.txnFirst >= 0
			e.txnFirst = max(e.txnFirst, 0)
		}
		n := int(p[fixed-1])
		p = p[fixed:]
		if n > producerBatchesKept || len(p) < n*24 {
			return ps, 0, fmt.Errorf("%w: truncated", errBadSnapshot)
		}
		for range n {
			e.push(producerBatch{
				firstSeq:   int32(be.Uint32(p)),
				lastSeq:    int32(be.Uint32(p[4:])),
				baseOffset: int64(be.Uint64(p[8:])),
				lastOffs:   int64(be.Uint64(p[16:])),
			})
			p = p[24:]
		}
		if _, dup := ps.m[pid]; dup {
			return ps, 0, fmt.Errorf("%w: producer %d twice", errBadSnapshot, pid)
		}
		ps.m[pid] = e
		if e.txnOpen {
			if e.txnFirst >= offset {
				return ps, 0, fmt.Errorf("%w: transaction at %d past the snapshot's offset %d", errBadSnapshot, e.txnFirst, offset)
			}
			ps.ongoing[pid] = e.txnFirst
		}
	}
	if len(p) != 0 || offset < 0 {
		return ps, 0, fmt.Errorf("%w: trailing bytes", errBadSnapshot)
	}
	return ps, offset, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
