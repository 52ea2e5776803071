package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Layout of a RecordBatch v2 header. Every offset is from the start of the
// batch; the CRC covers everything from attributesOff to the end.
const (
	baseOffsetOff      = 0
	lengthOff          = 8
	leaderEpochOff     = 12
	magicOff           = 16
	crcOff             = 17
	attributesOff      = 21
	lastOffsetDeltaOff = 23
	baseTimestampOff   = 27
	maxTimestampOff    = 35
	producerIDOff      = 43
	producerEpochOff   = 51
	baseSequenceOff    = 53
	recordCountOff     = 57

	// HeaderSize is the size of a RecordBatch v2 header in bytes.
	HeaderSize = 61
	// LengthPrefixSize is the number of bytes before the batch length field
	// counts: base offset and the length itself.
	LengthPrefixSize = 12
	// Magic is the only batch format version mq accepts.
	Magic = 2
)

// Attribute bits.
const (
	codecMask        = 0x07
	timestampTypeBit = 0x08
	transactionalBit = 0x10
	controlBit       = 0x20
	deleteHorizonBit = 0x40
)

// Codec is a batch compression codec, as stored in the low attribute bits.
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Errors returned for malformed batches. They are wrapped with detail; test
// with errors.Is.
var (
	ErrTruncated = errors.New("record: batch truncated")
	ErrBadLength = errors.New("record: bad batch length")
	ErrBadMagic  = errors.New("record: unsupported magic")
	ErrBadCRC    = errors.New("record: crc mismatch")
	ErrBadCount  = errors.New("record: record count does not match offsets")
	ErrBadCodec  = errors.New("record: unknown compression codec")
	ErrCorrupt   = errors.New("record: corrupt record")
	ErrTooLarge  = errors.New("record: decompressed size over limit")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the whole batch size in bytes, length prefix included.
func (h *Header) Size() int { return LengthPrefixSize + int(h.Length) }

// LastOffset is the offset of the last record the batch covers.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the batch's compression codec.
func (h *Header) Codec() Codec { return Codec(h.Attributes & codecMask) }

// LogAppendTime reports whether the batch's timestamps were set by the broker.
func (h *Header) LogAppendTime() bool { return h.Attributes&timestampTypeBit != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (h *Header) Transactional() bool { return h.Attributes&transactionalBit != 0 }

// Control reports whether the batch holds a control record (transaction marker).
func (h *Header) Control() bool { return h.Attributes&controlBit != 0 }

// Idempotent reports whether the batch was written by an idempotent producer.
func (h *Header) Idempotent() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	// Sequences wrap at MaxInt32 like Kafka's.
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// ParseHeader decodes the header at the start of b without checking the CRC
// or that the whole batch is present. It fails only when b is shorter than a
// header, the magic is not 2, or the length cannot hold a header.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		if len(b) >= magicOff+1 && int8(b[magicOff]) != Magic {
			return h, fmt.Errorf("%w: %d", ErrBadMagic, int8(b[magicOff]))
		}
		return h, fmt.Errorf("%w: %d bytes, header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[baseOffsetOff:]))
	h.Length = int32(be.Uint32(b[lengthOff:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[leaderEpochOff:]))
	h.Magic = int8(b[magicOff])
	h.CRC = be.Uint32(b[crcOff:])
	h.Attributes = int16(be.Uint16(b[attributesOff:]))
	h.LastOffsetDelta = int32(be.Uint32(b[lastOffsetDeltaOff:]))
	h.BaseTimestamp = int64(be.Uint64(b[baseTimestampOff:]))
	h.MaxTimestamp = int64(be.Uint64(b[maxTimestampOff:]))
	h.ProducerID = int64(be.Uint64(b[producerIDOff:]))
	h.ProducerEpoch = int16(be.Uint16(b[producerEpochOff:]))
	h.BaseSequence = int32(be.Uint32(b[baseSequenceOff:]))
	h.NumRecords = int32(be.Uint32(b[recordCountOff:]))
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: %d", ErrBadMagic, h.Magic)
	}
	if h.Length < HeaderSize-LengthPrefixSize {
		return h, fmt.Errorf("%w: %d", ErrBadLength, h.Length)
	}
	return h, nil
}

// Validate checks that b is exactly one well-formed batch as a producer
// sends it: full length, magic 2, matching CRC32C, a known codec, and a
// record count that agrees with the last offset delta. It does not look
// inside the records.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: header says %d bytes, have %d", ErrBadLength, h.Size(), len(b))
	}
	if got := crc32.Checksum(b[attributesOff:], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: stored %08x, computed %08x", ErrBadCRC, h.CRC, got)
	}
	if c := h.Codec(); c > CodecZstd {
		return h, fmt.Errorf("%w: %d", ErrBadCodec, int8(c))
	}
	if h.NumRecords <= 0 || h.LastOffsetDelta != h.NumRecords-1 {
		return h, fmt.Errorf("%w: %d records, last offset delta %d", ErrBadCount, h.NumRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// CheckCRC verifies the stored CRC32C of the batch at the start of b, which
// must hold the whole batch.
func CheckCRC(b []byte) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Size() > len(b) {
		return fmt.Errorf("%w: header says %d bytes, have %d", ErrTruncated, h.Size(), len(b))
	}
	if got := crc32.Checksum(b[attributesOff:h.Size()], castagnoli); got != h.CRC {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrBadCRC, h.CRC, got)
	}
	return nil
}

// SetBaseOffset patches the base offset in place. The CRC does not cover it.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[baseOffsetOff:], uint64(offset))
}

// SetPartitionLeaderEpoch patches the partition leader epoch in place. The
// CRC does not cover it.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[leaderEpochOff:], uint32(epoch))
}

// SetLogAppendTime marks the batch as timestamped by the broker, sets its
// max timestamp to ts and recomputes the CRC, which covers both.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[attributesOff:])
	binary.BigEndian.PutUint16(b[attributesOff:], attrs|timestampTypeBit)
	binary.BigEndian.PutUint64(b[maxTimestampOff:], uint64(ts))
	UpdateCRC(b)
}

// UpdateCRC recomputes and stores the CRC32C of the batch at the start of
// b. The CRC covers the bytes up to the end the batch's length field gives,
// so b may be followed by other batches; when that length does not fit in
// b, the CRC covers all of b.
func UpdateCRC(b []byte) {
	end := len(b)
	if n := LengthPrefixSize + int(int32(binary.BigEndian.Uint32(b[lengthOff:]))); n >= HeaderSize && n <= len(b) {
		end = n
	}
	binary.BigEndian.PutUint32(b[crcOff:], crc32.Checksum(b[attributesOff:end], castagnoli))
}

// Next splits the first batch off b. It returns the batch, the rest, and an
// error when b does not start with a complete batch header and body. An
// empty b returns a nil batch and no error.
func Next(b []byte) (batch, rest []byte, h Header, err error) {
	if len(b) == 0 {
		return nil, nil, h, nil
	}
	h, err = ParseHeader(b)
	if err != nil {
		return nil, b, h, err
	}
	if h.Size() > len(b) {
		return nil, b, h, fmt.Errorf("%w: header says %d bytes, have %d", ErrTruncated, h.Size(), len(b))
	}
	return b[:h.Size():h.Size()], b[h.Size():], h, nil
}
