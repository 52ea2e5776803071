package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
)

// BuildOptions are the batch-level fields of a batch to build. The zero
// value builds an uncompressed batch at offset 0 from a producer that is
// neither idempotent nor transactional.
type BuildOptions struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	// BaseTimestamp is the batch's first timestamp in milliseconds; each
	// record's TimestampDelta is relative to it. MaxTimestamp is computed
	// from the records.
	BaseTimestamp int64

	// Idempotent says the producer fields below are meaningful. When it is
	// false ProducerID, ProducerEpoch and BaseSequence are written as -1,
	// Kafka's "no producer".
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32

	// Transactional marks the batch as part of a transaction; it requires
	// Idempotent. Control marks it as holding control records (transaction
	// markers), whose encoding is the caller's job.
	Transactional bool
	Control       bool
	// LogAppendTime marks the timestamps as set by the broker. Readers
	// then take MaxTimestamp as every record's timestamp; to stamp a time
	// other than the records' maximum, call SetLogAppendTime on the result.
	LogAppendTime bool

	// KeepOffsetDeltas writes each record's OffsetDelta as given (they must
	// be non-negative and increasing) instead of numbering the records
	// 0, 1, 2…, as compaction needs. LastOffsetDelta is then the larger of
	// the last record's delta and the LastOffsetDelta field, so a compacted
	// batch keeps covering the offsets of the records it dropped, and the
	// batch may hold no records at all.
	KeepOffsetDeltas bool
	LastOffsetDelta  int32
}

// BuildOptionsFrom returns the options that rebuild a batch with header h,
// keeping the records' offset deltas and the batch's last offset delta.
// For a batch stamped with the log append time, call SetLogAppendTime(b,
// h.MaxTimestamp) on the rebuilt batch to keep its timestamp.
func BuildOptionsFrom(h Header) BuildOptions {
	return BuildOptions{
		BaseOffset:           h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Codec:                h.Codec(),
		BaseTimestamp:        h.BaseTimestamp,
		Idempotent:           h.ProducerID >= 0,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		BaseSequence:         h.BaseSequence,
		Transactional:        h.Transactional(),
		Control:              h.Control(),
		LogAppendTime:        h.LogAppendTime(),
		KeepOffsetDeltas:     true,
		LastOffsetDelta:      h.LastOffsetDelta,
	}
}

var errBuild = errors.New("record: cannot build batch")

// Build returns a new batch holding records. See AppendBatch.
func Build(opts BuildOptions, records []Record) ([]byte, error) {
	return AppendBatch(nil, opts, records)
}

// AppendBatch appends a RecordBatch v2 holding records to dst: header with
// correct length, LastOffsetDelta, MaxTimestamp, record count and CRC32C,
// then the records, compressed with opts.Codec. Unless
// opts.KeepOffsetDeltas is set, records' OffsetDelta fields are ignored and
// there must be at least one record. On error dst is returned unchanged
// in length.
func AppendBatch(dst []byte, opts BuildOptions, records []Record) ([]byte, error) {
	if opts.Codec < CodecNone || opts.Codec > CodecZstd {
		return dst, fmt.Errorf("%w: %d", ErrBadCodec, int8(opts.Codec))
	}
	if len(records) == 0 && !opts.KeepOffsetDeltas {
		return dst, fmt.Errorf("%w: no records", errBuild)
	}
	if len(records) > math.MaxInt32 {
		return dst, fmt.Errorf("%w: %d records", errBuild, len(records))
	}
	if opts.Transactional && !opts.Idempotent {
		return dst, fmt.Errorf("%w: transactional batch without a producer", errBuild)
	}

	lastOffsetDelta := int32(len(records) - 1)
	if opts.KeepOffsetDeltas {
		prev := int32(-1)
		for i := range records {
			if d := records[i].OffsetDelta; d <= prev {
				return dst, fmt.Errorf("%w: record %d offset delta %d after %d", errBuild, i, d, prev)
			}
			prev = records[i].OffsetDelta
		}
		lastOffsetDelta = max(prev, opts.LastOffsetDelta)
		if lastOffsetDelta < 0 {
			return dst, fmt.Errorf("%w: empty batch needs a last offset delta", errBuild)
		}
	}

	start := len(dst)
	dst = grow(dst, HeaderSize)[:start+HeaderSize]
	maxTimestamp := opts.BaseTimestamp
	var err error
	if opts.Codec == CodecNone {
		dst, maxTimestamp, err = appendRecords(dst, &opts, records)
	} else {
		scratch := scratchBuffers.Get().(*[]byte)
		*scratch, maxTimestamp, err = appendRecords((*scratch)[:0], &opts, records)
		if err == nil {
			dst, err = Compress(opts.Codec, dst, *scratch)
		}
		putScratch(scratch)
	}
	if err != nil {
		return dst[:start], err
	}
	batch := dst[start:]
	if len(batch)-LengthPrefixSize > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: batch of %d bytes", ErrTooLarge, len(batch))
	}

	attrs := uint16(opts.Codec)
	if opts.LogAppendTime {
		attrs |= timestampTypeBit
	}
	if opts.Transactional {
		attrs |= transactionalBit
	}
	if opts.Control {
		attrs |= controlBit
	}
	producerID, producerEpoch, baseSequence := int64(-1), int16(-1), int32(-1)
	if opts.Idempotent {
		producerID, producerEpoch, baseSequence = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}
	be := binary.BigEndian
	be.PutUint64(batch[baseOffsetOff:], uint64(opts.BaseOffset))
	be.PutUint32(batch[lengthOff:], uint32(len(batch)-LengthPrefixSize))
	be.PutUint32(batch[leaderEpochOff:], uint32(opts.PartitionLeaderEpoch))
	batch[magicOff] = Magic
	be.PutUint16(batch[attributesOff:], attrs)
	be.PutUint32(batch[lastOffsetDeltaOff:], uint32(lastOffsetDelta))
	be.PutUint64(batch[baseTimestampOff:], uint64(opts.BaseTimestamp))
	be.PutUint64(batch[maxTimestampOff:], uint64(maxTimestamp))
	be.PutUint64(batch[producerIDOff:], uint64(producerID))
	be.PutUint16(batch[producerEpochOff:], uint16(producerEpoch))
	be.PutUint32(batch[baseSequenceOff:], uint32(baseSequence))
	be.PutUint32(batch[recordCountOff:], uint32(len(records)))
	be.PutUint32(batch[crcOff:], crc32.Checksum(batch[attributesOff:], castagnoli))
	return dst, nil
}

// appendRecords appends the encoding of records to dst and returns it with
// the largest record timestamp (opts.BaseTimestamp when there are none).
func appendRecords(dst []byte, opts *BuildOptions, records []Record) ([]byte, int64, error) {
	maxTimestamp := opts.BaseTimestamp
	for i := range records {
		r := &records[i]
		offsetDelta := int32(i)
		if opts.KeepOffsetDeltas {
			offsetDelta = r.OffsetDelta
		}
		if i == 0 || opts.BaseTimestamp+r.TimestampDelta > maxTimestamp {
			maxTimestamp = opts.BaseTimestamp + r.TimestampDelta
		}
		size := bodySize(r, offsetDelta)
		if size > math.MaxInt32 {
			return dst, 0, fmt.Errorf("%w: record %d of %d bytes", ErrTooLarge, i, size)
		}
		dst = grow(dst, varintLen(int64(size))+size)
		dst = appendVarint(dst, int64(size))
		dst = append(dst, byte(r.Attributes))
		dst = appendVarint(dst, r.TimestampDelta)
		dst = appendVarint(dst, int64(offsetDelta))
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = appendVarint(dst, int64(len(r.Headers)))
		for j := range r.Headers {
			dst = appendVarint(dst, int64(len(r.Headers[j].Key)))
			dst = append(dst, r.Headers[j].Key...)
			dst = appendBytes(dst, r.Headers[j].Value)
		}
	}
	return dst, maxTimestamp, nil
}

// bodySize is the encoded size of r with offsetDelta, without the length
// varint that precedes it.
func bodySize(r *Record, offsetDelta int32) int {
	size := 1 + varintLen(r.TimestampDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for j := range r.Headers {
		size += varintLen(int64(len(r.Headers[j].Key))) + len(r.Headers[j].Key) + bytesLen(r.Headers[j].Value)
	}
	return size
}

// Size is the encoded size of r in a batch, its length varint included.
func (r *Record) Size() int {
	n := bodySize(r, r.OffsetDelta)
	return varintLen(int64(n)) + n
}

// MaxValueLen is the length of the longest value a record with key and
// headers (and zero offset and timestamp deltas) can have in a batch of
// its own that is at most limit bytes: what max.message.bytes (a limit on
// the whole batch, Kafka's message.max.bytes) leaves for a value after the
// batch header and the record's framing. It is -1 when not even an empty
// value fits.
func MaxValueLen(limit int, key []byte, headers []RecordHeader) int {
	r := Record{Key: key, Headers: headers, Value: []byte{}}
	fixed := bodySize(&r, 0) - 1 // without the value's length varint
	size := func(v int) int {
		body := fixed + varintLen(int64(v)) + v
		return HeaderSize + varintLen(int64(body)) + body
	}
	// size grows with v, by at least one byte per byte: start from the
	// smallest framing and step down the few bytes larger varints take.
	v := limit - HeaderSize - fixed - 2
	for v >= 0 && size(v) > limit {
		v--
	}
	return max(v, -1)
}

// bytesLen is the encoded size of a nullable byte string.
func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

func putScratch(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	scratchBuffers.Put(b)
}
