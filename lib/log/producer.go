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

// producerState tracks idempotent producers: per producer id, the current
// epoch and the last batches appended. Guarded by Log.mu.
type producerState struct {
	m map[int64]*producerEntry
}

func newProducerState() producerState { return producerState{m: make(map[int64]*producerEntry)} }

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

// update records an appended batch (offsets assigned). Batches without a
// producer id or sequence are ignored.
func (ps *producerState) update(h *record.Header) {
	if h.ProducerID < 0 || h.BaseSequence < 0 {
		return
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		*e = producerEntry{epoch: h.ProducerEpoch}
	}
	e.push(producerBatch{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), baseOffset: h.BaseOffset, lastOffs: h.LastOffset()})
}

// evictBelow forgets producers whose last batch ends below start.
func (ps *producerState) evictBelow(start int64) {
	for pid, e := range ps.m {
		if e.n == 0 || e.newest().lastOffs < start {
			delete(ps.m, pid)
		}
	}
}

// Producer-state snapshot (file "producer-state"), big endian:
//
//	magic "MQPS" | version uint8 = 1 | offset int64 | count uint32
//	count × ( producer id int64 | epoch int16 | n uint8 |
//	          n × ( first seq int32 | last seq int32 | base offset int64 | last offset int64 ) )
//	crc32c uint32 of everything before it
//
// offset is the log end offset the snapshot is valid at: recovery loads it
// and replays the batch headers from offset to the end. Batches are listed
// oldest first.
const (
	snapshotMagic   = "MQPS"
	snapshotVersion = 1
)

var errBadSnapshot = errors.New("bad producer-state snapshot")

func (ps *producerState) encode(offset int64) []byte {
	pids := make([]int64, 0, len(ps.m))
	for pid := range ps.m {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	be := binary.BigEndian
	b := make([]byte, 0, 17+len(pids)*(11+producerBatchesKept*24)+4)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = be.AppendUint64(b, uint64(offset))
	b = be.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := ps.m[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
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
	if b[4] != snapshotVersion {
		return ps, 0, fmt.Errorf("%w: version %d", errBadSnapshot, b[4])
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != be.Uint32(b[len(b)-4:]) {
		return ps, 0, fmt.Errorf("%w: crc mismatch", errBadSnapshot)
	}
	offset := int64(be.Uint64(body[5:]))
	count := be.Uint32(body[13:])
	p := body[17:]
	for range count {
		if len(p) < 11 {
			return ps, 0, fmt.Errorf("%w: truncated", errBadSnapshot)
		}
		pid := int64(be.Uint64(p))
		e := &producerEntry{epoch: int16(be.Uint16(p[8:]))}
		n := int(p[10])
		p = p[11:]
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
		ps.m[pid] = e
	}
	if len(p) != 0 || offset < 0 {
		return ps, 0, fmt.Errorf("%w: trailing bytes", errBadSnapshot)
	}
	return ps, offset, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
