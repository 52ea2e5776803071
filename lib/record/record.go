package record

import (
	"fmt"
	"sync"
)

// Record is one record inside a batch (Kafka record format v2).
//
// A nil Key or Value is null on the wire (length -1), distinct from an
// empty one (length 0). Records returned by an Iter alias the iterator's
// buffer; see Iter for how long they stay valid.
type Record struct {
	Attributes     int8  // unused by Kafka so far; kept as read
	TimestampDelta int64 // milliseconds after the batch's BaseTimestamp
	OffsetDelta    int32 // offset after the batch's BaseOffset
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// RecordHeader is one application header of a record. A nil Value is null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Offset is the record's absolute offset in a batch whose header is h.
func (r *Record) Offset(h *Header) int64 { return h.BaseOffset + int64(r.OffsetDelta) }

// Timestamp is the record's timestamp in milliseconds in a batch whose
// header is h. Batches stamped with the log append time give every record
// the batch's MaxTimestamp, as Kafka does.
func (r *Record) Timestamp(h *Header) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.BaseTimestamp + r.TimestampDelta
}

// DefaultDecompressLimit is the decompressed size of a batch's records
// section that Records, Iterate and Decompress allow when given a limit of
// zero or less. It is a generous multiple of Kafka's default
// message.max.bytes (1 MiB).
const DefaultDecompressLimit = 64 << 20

// minRecordSize is the smallest encoding of a record: one byte each for
// the length, attributes, timestamp delta, offset delta, key length, value
// length and header count.
const minRecordSize = 7

// Iter iterates over the records of one batch, decompressing the records
// section first when the batch is compressed.
//
//	it, err := record.Records(batch, 0)
//	if err != nil { ... }
//	defer it.Close()
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// Iteration allocates nothing per record: the *Record returned by Record
// and its Headers slice are reused by the next call to Next, and Key, Value
// and header values alias either the batch (uncompressed) or the
// iterator's decompression buffer, which stays valid until Close or Reset.
// Header keys are strings; a key equal to the key at the same position in
// the previous record reuses that string, so repeated header names do not
// allocate. Copy what must outlive the iterator.
//
// An Iter is not safe for concurrent use. Its zero value is ready for Reset.
type Iter struct {
	h    Header
	data []byte // the records section, decompressed
	off  int    // read position in data
	read int32  // records returned so far
	err  error

	buf  *[]byte // pooled decompression buffer, nil when data aliases the batch
	rec  Record
	hdrs []RecordHeader
	keys []string // header keys of the previous records, by position
}

// Records returns an iterator over the records of batch, which must be
// exactly one batch. limit bounds the decompressed size of the records
// section (DefaultDecompressLimit when limit <= 0); a batch that
// decompresses to more fails with ErrTooLarge.
//
// Records checks the header's structure (magic, length, codec, record
// count) but not the CRC: call Validate or CheckCRC first on bytes from
// outside.
func Records(batch []byte, limit int) (*Iter, error) {
	it := new(Iter)
	if err := it.Reset(batch, limit); err != nil {
		return nil, err
	}
	return it, nil
}

// Reset makes it iterate over batch, as Records does, and releases what
// the previous batch held: records returned before Reset become invalid.
func (it *Iter) Reset(batch []byte, limit int) error {
	it.release()
	it.data, it.off, it.read, it.err = nil, 0, 0, nil
	it.rec = Record{}
	h, err := ParseHeader(batch)
	it.h = h
	if err != nil {
		it.err = err
		return err
	}
	if err := checkBatchStructure(batch, &h); err != nil {
		it.err = err
		return err
	}
	section := batch[HeaderSize:h.Size()]
	if h.Codec() == CodecNone {
		it.data = section
		return nil
	}
	it.buf = getBuffer()
	out, err := Decompress(h.Codec(), (*it.buf)[:0], section, limit)
	*it.buf = out
	if err != nil {
		it.release()
		it.err = fmt.Errorf("decompress records: %w", err)
		return it.err
	}
	it.data = out
	return nil
}

// checkBatchStructure checks what iteration relies on beyond ParseHeader:
// the batch is complete and alone, its codec known and its record count
// plausible for the bytes present.
func checkBatchStructure(batch []byte, h *Header) error {
	if h.Size() > len(batch) {
		return fmt.Errorf("%w: header says %d bytes, have %d", ErrTruncated, h.Size(), len(batch))
	}
	if h.Size() < len(batch) {
		return fmt.Errorf("%w: header says %d bytes, have %d", ErrBadLength, h.Size(), len(batch))
	}
	if c := h.Codec(); c > CodecZstd {
		return fmt.Errorf("%w: %d", ErrBadCodec, int8(c))
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: %d records", ErrBadCount, h.NumRecords)
	}
	return nil
}

// Header is the header of the batch being iterated.
func (it *Iter) Header() Header { return it.h }

// Next advances to the next record and reports whether there is one. At the
// end of the batch, or on the first malformed record, it returns false;
// Err tells which.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.read >= it.h.NumRecords {
		if it.off != len(it.data) {
			it.err = fmt.Errorf("%w: %d bytes after the %d records the header declares",
				ErrCorrupt, len(it.data)-it.off, it.h.NumRecords)
		}
		return false
	}
	if it.off == len(it.data) {
		it.err = fmt.Errorf("%w: header declares %d records, batch holds %d", ErrBadCount, it.h.NumRecords, it.read)
		return false
	}
	n, err := it.parse(it.data[it.off:])
	if err != nil {
		it.err = fmt.Errorf("%w: record %d at byte %d: %v", ErrCorrupt, it.read, it.off, err)
		return false
	}
	it.off += n
	it.read++
	return true
}

// Record is the current record. It and its Headers slice are overwritten
// by the next call to Next.
func (it *Iter) Record() *Record { return &it.rec }

// Err is the error that stopped iteration, or nil after the last record of
// a well-formed batch.
func (it *Iter) Err() error { return it.err }

// Close releases the iterator's decompression buffer. Records returned so
// far become invalid. Close may be called more than once.
func (it *Iter) Close() {
	it.release()
	it.data = nil
	it.rec = Record{}
	for i := range it.hdrs {
		it.hdrs[i] = RecordHeader{}
	}
}

func (it *Iter) release() {
	if it.buf != nil {
		putBuffer(it.buf)
		it.buf = nil
	}
}

// parse decodes the record at the start of b into it.rec and returns its
// encoded size.
func (it *Iter) parse(b []byte) (int, error) {
	length, n, err := readVarint(b)
	if err != nil {
		return 0, fmt.Errorf("length: %v", err)
	}
	if length < minRecordSize-1 || int(length) > len(b)-n {
		return 0, fmt.Errorf("length %d with %d bytes left", length, len(b)-n)
	}
	size := n + int(length)
	body := b[n:size:size]
	r := &it.rec
	r.Attributes = int8(body[0])
	p := 1
	r.TimestampDelta, n, err = readVarlong(body[p:])
	if err != nil {
		return 0, fmt.Errorf("timestamp delta: %v", err)
	}
	p += n
	r.OffsetDelta, n, err = readVarint(body[p:])
	if err != nil {
		return 0, fmt.Errorf("offset delta: %v", err)
	}
	p += n
	if r.Key, p, err = readBytes(body, p, "key"); err != nil {
		return 0, err
	}
	if r.Value, p, err = readBytes(body, p, "value"); err != nil {
		return 0, err
	}
	count, n, err := readVarint(body[p:])
	if err != nil {
		return 0, fmt.Errorf("header count: %v", err)
	}
	p += n
	// Each header takes at least two bytes, so a count the body cannot
	// hold is rejected before it sizes anything.
	if count < 0 || int(count) > (len(body)-p)/2 {
		return 0, fmt.Errorf("header count %d with %d bytes left", count, len(body)-p)
	}
	it.hdrs = it.hdrs[:0]
	for i := 0; i < int(count); i++ {
		klen, n, err := readVarint(body[p:])
		if err != nil {
			return 0, fmt.Errorf("header %d key length: %v", i, err)
		}
		p += n
		if klen < 0 || int(klen) > len(body)-p {
			return 0, fmt.Errorf("header %d key length %d with %d bytes left", i, klen, len(body)-p)
		}
		key := it.headerKey(i, body[p:p+int(klen)])
		p += int(klen)
		var value []byte
		if value, p, err = readBytes(body, p, "header value"); err != nil {
			return 0, fmt.Errorf("header %d: %w", i, err)
		}
		it.hdrs = append(it.hdrs, RecordHeader{Key: key, Value: value})
	}
	if count == 0 {
		r.Headers = nil
	} else {
		r.Headers = it.hdrs
	}
	if p != len(body) {
		return 0, fmt.Errorf("length %d but fields end at %d", length, p)
	}
	return size, nil
}

// headerKey returns b as a string, reusing the key the previous record had
// at position i when it is the same.
func (it *Iter) headerKey(i int, b []byte) string {
	if i < len(it.keys) {
		if it.keys[i] == string(b) { // compiled without allocating
			return it.keys[i]
		}
		it.keys[i] = string(b)
		return it.keys[i]
	}
	s := string(b)
	it.keys = append(it.keys, s)
	return s
}

// readBytes reads a nullable varint-length byte string at body[p:] and
// returns it (nil for length -1) with the position after it. The result's
// capacity ends with it, so appending to it cannot clobber what follows.
func readBytes(body []byte, p int, what string) ([]byte, int, error) {
	l, n, err := readVarint(body[p:])
	if err != nil {
		return nil, 0, fmt.Errorf("%s length: %v", what, err)
	}
	p += n
	if l == -1 {
		return nil, p, nil
	}
	if l < 0 || int(l) > len(body)-p {
		return nil, 0, fmt.Errorf("%s length %d with %d bytes left", what, l, len(body)-p)
	}
	end := p + int(l)
	return body[p:end:end], end, nil
}

// Iterate calls fn for each record of batch, as an Iter would return them
// (the *Record is reused and aliases the batch or a pooled buffer that is
// recycled when Iterate returns). It stops at the first error from fn,
// which it returns, or from decoding. limit is as for Records.
func Iterate(batch []byte, limit int, fn func(*Record) error) error {
	it := iterPool.Get().(*Iter)
	defer func() {
		it.Close()
		iterPool.Put(it)
	}()
	if err := it.Reset(batch, limit); err != nil {
		return err
	}
	for it.Next() {
		if err := fn(&it.rec); err != nil {
			return err
		}
	}
	return it.Err()
}

var iterPool = sync.Pool{New: func() any { return new(Iter) }}
