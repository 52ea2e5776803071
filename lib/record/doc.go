// Package record reads, checks, patches and builds Kafka record batches
// (RecordBatch, magic 2), the unit mq stores and serves.
//
// # Layout
//
// A batch is a 61-byte header followed by its records section; integers are
// big-endian:
//
//	offset size field                  covered by CRC
//	     0    8 BaseOffset             no
//	     8    4 Length                 no   (bytes after this field)
//	    12    4 PartitionLeaderEpoch   no
//	    16    1 Magic (2)              no
//	    17    4 CRC (CRC32C)           no
//	    21    2 Attributes             yes  (codec 0-2, timestamp type 3,
//	                                         transactional 4, control 5)
//	    23    4 LastOffsetDelta        yes
//	    27    8 BaseTimestamp          yes
//	    35    8 MaxTimestamp           yes
//	    43    8 ProducerID             yes
//	    51    2 ProducerEpoch          yes
//	    53    4 BaseSequence           yes
//	    57    4 NumRecords             yes
//	    61    - records, possibly compressed as one block   yes
//
// Each record is: length varint, attributes int8, timestampDelta varlong,
// offsetDelta varint, key and value (varint length, -1 for null, then the
// bytes), a varint header count, and per header a key (varint length, then
// the bytes) and a nullable value. Varints are zig-zag encoded; an int32
// takes at most 5 bytes and an int64 at most 10.
//
// # What is checked where
//
// ParseHeader decodes the header only: enough bytes for it, magic 2, a
// length that can hold it. Validate is the produce-path check and reads no
// record: the batch is exactly its declared length, the CRC matches, the
// codec is known and NumRecords equals LastOffsetDelta+1 (true of every
// batch a producer sends, but not of batches compaction has thinned; those
// pass CheckCRC). Validate does not allocate.
//
// Records, Iterate and Decompress do the full decode: they decompress the
// records section (bounded by a caller-given limit, ErrTooLarge beyond it)
// and parse every record, failing with an error wrapping ErrCorrupt or
// ErrBadCount on truncated or overlong fields, varint overflow, negative
// lengths other than -1, fewer records than NumRecords, or bytes after the
// last one. They check structure, not the CRC: run Validate or CheckCRC
// first on bytes from outside. No input makes this package panic, except
// that the Set* patching functions need a whole header in b.
//
// # Patching in place
//
// The broker assigns offsets and epochs by patching a validated batch:
// SetBaseOffset and SetPartitionLeaderEpoch write fields the CRC does not
// cover, so the CRC stays valid with no work. SetLogAppendTime changes the
// attributes and MaxTimestamp, which the CRC covers, and so recomputes it
// (UpdateCRC). Anything else that edits bytes from offset 21 on must call
// UpdateCRC.
//
// # Zero copy
//
// Next returns sub-slices of its input. An Iter's records alias the batch
// when it is uncompressed, and the iterator's pooled decompression buffer
// when it is not; in both cases Key, Value and header values are valid
// until the iterator is closed or reset (and, uncompressed, as long as the
// batch bytes are not modified). The *Record itself and its Headers slice
// are reused by each call to Next. Header keys are strings copied out of
// the buffer, shared between records that repeat them.
//
// # Building
//
// Build and AppendBatch produce a batch from BuildOptions and records,
// compressing with gzip, snappy (a raw block, as current clients write),
// LZ4 (frame format) or zstd. BuildOptionsFrom rebuilds a batch from its
// header, as compaction does. Recompress rewrites a batch in another codec
// (a topic's compression.type): it checks the records as iteration does
// and keeps them, and the header, byte for byte but for the codec bits,
// the length and the CRC.
//
// # Codecs
//
// Decompress reads what Kafka clients write: gzip (multiple members
// allowed), snappy as a raw block or in the xerial framing older Java
// clients used, LZ4 frames and zstd frames. Decoders and buffers are
// pooled; all functions are safe for concurrent use, an Iter is not.
//
// A control batch holds one control record (control.go): BuildMarker
// makes a transaction marker, ControlType reads its type and coordinator
// epoch back.
package record
