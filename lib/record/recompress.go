package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Recompress appends to dst the batch with its records section compressed
// with codec instead of its own, as a broker does for a topic whose
// compression.type is a codec. A batch compresses its records as one
// block and no record depends on the codec, so the records are kept byte
// for byte: offset deltas, timestamps, keys, values and headers. So is
// the header but for the codec bits of the attributes, the length and the
// CRC, which are recomputed: base offset, leader epoch, timestamps,
// producer id, epoch and sequence, the timestamp type and the other
// attribute bits stay as they were. CodecNone writes the records
// uncompressed.
//
// The records section is decompressed (at most limit bytes, as for
// Records) and checked to hold exactly the NumRecords well-formed records
// the header declares, failing with an error wrapping ErrCorrupt,
// ErrBadCount or ErrTooLarge otherwise, so that what is rewritten reads
// back. Like Records it checks structure, not the CRC: run Validate first
// on bytes from outside. dst must not overlap batch. On error dst is
// returned unchanged in length. Recompress is safe for concurrent use.
func Recompress(dst, batch []byte, codec Codec, limit int) ([]byte, error) {
	if codec < CodecNone || codec > CodecZstd {
		return dst, fmt.Errorf("%w: %d", ErrBadCodec, int8(codec))
	}
	h, err := ParseHeader(batch)
	if err != nil {
		return dst, err
	}
	if err := checkBatchStructure(batch, &h); err != nil {
		return dst, err
	}
	records := batch[HeaderSize:h.Size()]
	if h.Codec() != CodecNone {
		buf := getBuffer()
		defer putBuffer(buf)
		*buf, err = Decompress(h.Codec(), (*buf)[:0], records, limit)
		if err != nil {
			return dst, fmt.Errorf("decompress records: %w", err)
		}
		records = *buf
	}
	if err := checkRecords(&h, records); err != nil {
		return dst, err
	}

	start := len(dst)
	dst = append(dst, batch[:HeaderSize]...)
	if dst, err = Compress(codec, dst, records); err != nil {
		return dst[:start], err
	}
	out := dst[start:]
	if len(out)-LengthPrefixSize > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: batch of %d bytes", ErrTooLarge, len(out))
	}
	be := binary.BigEndian
	be.PutUint32(out[lengthOff:], uint32(len(out)-LengthPrefixSize))
	be.PutUint16(out[attributesOff:], uint16(h.Attributes)&^codecMask|uint16(codec))
	be.PutUint32(out[crcOff:], crc32.Checksum(out[attributesOff:], castagnoli))
	return dst, nil
}

// checkRecords parses the uncompressed records section of a batch with
// header h, as iteration would, and returns what stopped it early.
func checkRecords(h *Header, records []byte) error {
	it := iterPool.Get().(*Iter)
	defer func() {
		it.Close()
		iterPool.Put(it)
	}()
	it.h, it.data, it.off, it.read, it.err = *h, records, 0, 0, nil
	for it.Next() {
	}
	return it.Err()
}
