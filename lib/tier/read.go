package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// Index entry sizes (lib/log's formats): offset index (relative offset
// u32, position u32), time index (timestamp i64, relative offset u32).
const (
	indexEntrySize     = 8
	timeIndexEntrySize = 12
	// batchHeaderPrefix is the bytes of a batch header read to walk
	// batches: base offset, length, leader epoch, magic, CRC, attributes
	// and the last offset delta end at byte 27.
	batchHeaderPrefix = 27
	// readWindow is the least read from the store at a time.
	readWindow = 64 << 10
)

// ErrNoRemoteData: the offset is in no remote segment.
var ErrNoRemoteData = errors.New("tier: offset not in the remote log")

// Read returns whole batches of the remote segment holding offset,
// starting with the batch that holds it and stopping before maxBytes (the
// first batch is returned whole even when larger, as a local read
// does). The read gives up after Config.ReadTimeout.
func (t *Tier) Read(ctx context.Context, r *controller.RemoteLog, offset int64, maxBytes int) ([]byte, error) {
	seg, ok := r.Find(offset)
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrNoRemoteData, offset)
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.ReadTimeout)
	defer cancel()
	b, err := t.readSegment(ctx, seg, offset, maxBytes)
	if err != nil {
		t.stats.RemoteReadErrors.Add(1)
		return nil, err
	}
	t.stats.RemoteReads.Add(1)
	t.stats.RemoteReadBytes.Add(int64(len(b)))
	return b, nil
}

func (t *Tier) readSegment(ctx context.Context, seg controller.RemoteSegment, offset int64, maxBytes int) ([]byte, error) {
	idx, err := t.index(ctx, seg.Key+extIndex)
	if err != nil {
		return nil, err
	}
	pos := int64(0)
	rel := offset - seg.ObjectBase
	n := len(idx) / indexEntrySize
	// The last entry at or below rel.
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if int64(binary.BigEndian.Uint32(idx[m*indexEntrySize:])) <= rel {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 {
		pos = int64(binary.BigEndian.Uint32(idx[(lo-1)*indexEntrySize+4:]))
	}
	w := window{t: t, ctx: ctx, key: seg.Key + extLog, size: seg.Size}
	// Skip the batches before the one holding offset.
	for {
		if pos >= seg.Size {
			return nil, fmt.Errorf("%w: %d past the end of remote segment %s", ErrNoRemoteData, offset, seg.Key)
		}
		h, err := w.bytes(pos, batchHeaderPrefix)
		if err != nil {
			return nil, err
		}
		base, length, last := batchFields(h)
		if length <= 0 {
			return nil, fmt.Errorf("tier: remote segment %s: bad batch length %d at %d", seg.Key, length, pos)
		}
		if last >= offset && last >= seg.BaseOffset {
			_ = base
			break
		}
		pos += record.LengthPrefixSize + length
	}
	start, end := pos, pos
	for end < seg.Size {
		h, err := w.bytes(end, batchHeaderPrefix)
		if err != nil {
			return nil, err
		}
		_, length, _ := batchFields(h)
		if length <= 0 {
			return nil, fmt.Errorf("tier: remote segment %s: bad batch length %d at %d", seg.Key, length, end)
		}
		size := record.LengthPrefixSize + length
		if end > start && end+size-start > int64(maxBytes) {
			break
		}
		end += size
		if end-start >= int64(maxBytes) {
			break
		}
	}
	if end > seg.Size {
		return nil, fmt.Errorf("tier: remote segment %s: batch past its end", seg.Key)
	}
	b, err := w.bytes(start, int(end-start))
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// batchFields parses what a walk needs of a batch header prefix.
func batchFields(h []byte) (base, length, last int64) {
	base = int64(binary.BigEndian.Uint64(h[0:]))
	length = int64(int32(binary.BigEndian.Uint32(h[8:])))
	last = base + int64(int32(binary.BigEndian.Uint32(h[23:])))
	return base, length, last
}

// window reads an object through the Tier's range reader, a window of
// at least readWindow bytes at a time.
type window struct {
	t    *Tier
	ctx  context.Context
	key  string
	size int64
	pos  int64
	buf  []byte
}

// bytes returns n bytes of the object at pos (fewer at its end is an
// error: a batch is cut).
func (w *window) bytes(pos int64, n int) ([]byte, error) {
	if pos >= w.pos && pos+int64(n) <= w.pos+int64(len(w.buf)) {
		return w.buf[pos-w.pos : pos-w.pos+int64(n)], nil
	}
	want := min(max(int64(n), readWindow), w.size-pos)
	if want < int64(n) {
		return nil, fmt.Errorf("tier: remote object %s: %d bytes at %d past its end %d", w.key, n, pos, w.size)
	}
	buf := make([]byte, want)
	m, err := w.t.ranges(w.ctx, w.key, w.size, buf, pos)
	if err != nil && !(errors.Is(err, io.EOF) && int64(m) == want) {
		return nil, err
	}
	w.pos, w.buf = pos, buf[:m]
	return w.buf[:n], nil
}

// index returns an index object, from memory when it was read before.
func (t *Tier) index(ctx context.Context, key string) ([]byte, error) {
	t.idxMu.Lock()
	b, ok := t.indexes[key]
	t.idxMu.Unlock()
	if ok {
		return b, nil
	}
	b, err := t.store.ReadAll(ctx, key)
	if err != nil {
		return nil, err
	}
	t.idxMu.Lock()
	defer t.idxMu.Unlock()
	if _, ok := t.indexes[key]; !ok {
		if len(t.idxLRU) >= maxIndexes {
			delete(t.indexes, t.idxLRU[0])
			t.idxLRU = t.idxLRU[1:]
		}
		t.indexes[key] = b
		t.idxLRU = append(t.idxLRU, key)
	}
	return b, nil
}

// forgetIndexes drops a deleted segment's indexes from memory.
func (t *Tier) forgetIndexes(stem string) {
	t.idxMu.Lock()
	defer t.idxMu.Unlock()
	for _, k := range []string{stem + extIndex, stem + extTimeIndex, stem + extTxnIndex} {
		if _, ok := t.indexes[k]; ok {
			delete(t.indexes, k)
			t.idxLRU = slices.DeleteFunc(t.idxLRU, func(s string) bool { return s == k })
		}
	}
}

// OffsetForTimestamp answers ListOffsets by timestamp from the remote
// log: the earliest offset whose record timestamp is ≥ ts and that
// timestamp; found is false when no remote record is that recent.
func (t *Tier) OffsetForTimestamp(ctx context.Context, r *controller.RemoteLog, ts int64) (offset, timestamp int64, found bool, err error) {
	if r == nil {
		return -1, -1, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.ReadTimeout)
	defer cancel()
	for _, seg := range r.Segments {
		if seg.MaxTimestamp < ts {
			continue
		}
		if offset, timestamp, found, err = t.segmentOffsetForTimestamp(ctx, seg, ts); err != nil || found {
			return offset, timestamp, found, err
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp answers ListOffsets MAX_TIMESTAMP from the remote log:
// the largest record timestamp in it and the first offset holding it;
// found is false when the remote log has no timestamp.
func (t *Tier) MaxTimestamp(ctx context.Context, r *controller.RemoteLog) (offset, timestamp int64, found bool, err error) {
	if r == nil {
		return -1, -1, false, nil
	}
	best := -1
	for i, seg := range r.Segments {
		if seg.MaxTimestamp >= 0 && (best < 0 || seg.MaxTimestamp > r.Segments[best].MaxTimestamp) {
			best = i
		}
	}
	if best < 0 {
		return -1, -1, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.ReadTimeout)
	defer cancel()
	// The segment's first record with a timestamp at or after its max
	// holds it. (None when the max is in the offsets before BaseOffset
	// that the previous segment held, and retention deleted it.)
	return t.segmentOffsetForTimestamp(ctx, r.Segments[best], r.Segments[best].MaxTimestamp)
}

// segmentOffsetForTimestamp is OffsetForTimestamp in one segment.
func (t *Tier) segmentOffsetForTimestamp(ctx context.Context, seg controller.RemoteSegment, ts int64) (offset, timestamp int64, found bool, err error) {
	tidx, err := t.index(ctx, seg.Key+extTimeIndex)
	if err != nil {
		return -1, -1, false, err
	}
	from := seg.BaseOffset
	for i := 0; i+timeIndexEntrySize <= len(tidx); i += timeIndexEntrySize {
		if int64(binary.BigEndian.Uint64(tidx[i:])) >= ts {
			from = max(seg.ObjectBase+int64(binary.BigEndian.Uint32(tidx[i+8:])), seg.BaseOffset)
			break
		}
	}
	for from <= seg.EndOffset {
		b, err := t.readSegment(ctx, seg, from, 1)
		if err != nil {
			return -1, -1, false, err
		}
		h, err := record.ParseHeader(b)
		if err != nil {
			return -1, -1, false, fmt.Errorf("tier: remote segment %s: %w", seg.Key, err)
		}
		if h.MaxTimestamp >= ts {
			offset, timestamp = h.BaseOffset, h.MaxTimestamp
			_ = record.Iterate(b, 0, func(rec *record.Record) error {
				if rt := rec.Timestamp(&h); rt >= ts {
					offset, timestamp = rec.Offset(&h), rt
					return io.EOF
				}
				return nil
			})
			return max(offset, seg.BaseOffset), timestamp, true, nil
		}
		from = h.LastOffset() + 1
	}
	return -1, -1, false, nil
}

// AbortedTxns appends to dst the aborted transactions a read_committed
// read of the remote offsets [from, upto) must know (as log.AbortedTxns
// answers a local read): those whose abort marker is at or after from and
// that began before upto, by marker offset, from the aborted-transaction
// indexes of the remote segments from the one holding from on. complete
// is false when the remote segments ran out before an entry showed that
// no later transaction began before upto: the caller then asks the local
// log for the markers from the remote end on. The read gives up after
// Config.ReadTimeout.
func (t *Tier) AbortedTxns(ctx context.Context, r *controller.RemoteLog, dst []log.AbortedTxn, from, upto int64) (_ []log.AbortedTxn, complete bool, err error) {
	if r == nil {
		return dst, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.ReadTimeout)
	defer cancel()
	for _, seg := range r.Segments {
		if seg.EndOffset < from || !seg.TxnIndex {
			continue
		}
		b, err := t.index(ctx, seg.Key+extTxnIndex)
		if err != nil {
			t.stats.RemoteReadErrors.Add(1)
			return dst, false, err
		}
		entries, err := log.DecodeTxnIndex(b)
		if err != nil {
			return dst, false, fmt.Errorf("tier: remote segment %s: %w", seg.Key, err)
		}
		for _, a := range entries {
			// Markers before BaseOffset are the previous segment's
			// (ObjectBase), found in its index.
			if a.LastOffset < from || a.LastOffset < seg.BaseOffset {
				continue
			}
			if a.FirstOffset < upto {
				dst = append(dst, a)
			}
			// Every transaction ending later began at or after the last
			// stable offset this one left.
			if a.LastStableOffset >= upto {
				return dst, true, nil
			}
		}
	}
	return dst, false, nil
}

// LastOffset returns the last offset of the whole batches b (as Read
// returns them), -1 for none.
func LastOffset(b []byte) int64 {
	last := int64(-1)
	for len(b) >= batchHeaderPrefix {
		_, length, l := batchFields(b)
		size := record.LengthPrefixSize + length
		if length <= 0 || size > int64(len(b)) {
			break
		}
		last = l
		b = b[size:]
	}
	return last
}
