package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ParseCodec parses a codec name as Kafka's compression.type spells it:
// "none" (or "uncompressed"), "gzip", "snappy", "lz4" or "zstd", in any
// case. "producer", which is a topic policy rather than a codec, is not
// accepted.
func ParseCodec(name string) (Codec, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "none", "uncompressed":
		return CodecNone, nil
	case "gzip":
		return CodecGzip, nil
	case "snappy":
		return CodecSnappy, nil
	case "lz4":
		return CodecLZ4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return CodecNone, fmt.Errorf("%w: %q", ErrBadCodec, name)
}

// Compress appends src compressed with codec to dst, in the form Kafka
// clients put in a batch's records section: a gzip member, a raw snappy
// block, an LZ4 frame (64 KiB independent blocks) or a zstd frame.
// CodecNone appends src unchanged. Compress is safe for concurrent use.
func Compress(codec Codec, dst, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		w := gzipWriters.Get().(*gzipWriter)
		defer gzipWriters.Put(w)
		buf := bytes.NewBuffer(dst)
		w.w.Reset(buf)
		if _, err := w.w.Write(src); err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		if err := w.w.Close(); err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		w.w.Reset(io.Discard) // drop the reference to the caller's buffer
		return buf.Bytes(), nil
	case CodecSnappy:
		n := snappy.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("snappy: %w: %d bytes", ErrTooLarge, len(src))
		}
		dst = grow(dst, n)
		out := snappy.Encode(dst[len(dst):len(dst)+n], src)
		return dst[:len(dst)+len(out)], nil
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		buf := bytes.NewBuffer(dst)
		w.Reset(buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		w.Reset(io.Discard)
		return buf.Bytes(), nil
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return dst, fmt.Errorf("zstd: %w", err)
		}
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrBadCodec, int8(codec))
}

// Decompress appends the decompression of src, a records section
// compressed with codec, to dst. Snappy input may be a raw block or
// xerial-framed (the Java client's framing); LZ4 input is the frame format.
//
// At most limit bytes are appended (DefaultDecompressLimit when limit <= 0):
// input that expands further fails with ErrTooLarge, detected as the output
// grows (or from a declared size before decoding), so a small hostile input
// cannot make Decompress allocate much more than limit. Corrupt input fails
// with an error wrapping ErrCorrupt. Decompress is safe for concurrent use.
func Decompress(codec Codec, dst, src []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultDecompressLimit
	}
	var err error
	switch codec {
	case CodecNone:
		if len(src) > limit {
			return dst, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(src), limit)
		}
		return append(dst, src...), nil
	case CodecGzip:
		dst, err = gunzip(dst, src, limit)
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			dst, err = unsnappyXerial(dst, src, limit)
		} else {
			dst, err = unsnappyBlock(dst, src, limit)
		}
	case CodecLZ4:
		dst, err = unlz4(dst, src, limit)
	case CodecZstd:
		dst, err = unzstd(dst, src, limit)
	default:
		return dst, fmt.Errorf("%w: %d", ErrBadCodec, int8(codec))
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return dst, fmt.Errorf("%s: %w", codec, err)
		}
		return dst, fmt.Errorf("%w: %s: %w", ErrCorrupt, codec, err)
	}
	return dst, nil
}

// grow makes room for n more bytes after len(dst).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	return append(dst[:cap(dst)], make([]byte, len(dst)+n-cap(dst))...)[:len(dst)]
}

// readLimited appends everything r yields to dst, failing with ErrTooLarge
// as soon as more than limit bytes arrive. It grows dst geometrically
// from hint, never beyond limit+1 bytes of new data.
func readLimited(r io.Reader, dst []byte, limit, hint int) ([]byte, error) {
	start := len(dst)
	hint = min(max(hint, 4<<10), limit+1)
	dst = grow(dst, hint)
	zeroReads := 0
	for {
		if len(dst) == cap(dst) {
			room := min(max(cap(dst)-start, 4<<10), start+limit+1-len(dst))
			dst = grow(dst, room)
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start+limit], fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, err
		case n == 0:
			if zeroReads++; zeroReads > 100 {
				return dst, io.ErrNoProgress
			}
		default:
			zeroReads = 0
		}
	}
}

// Pools. Decoders are expensive to build (zstd's and lz4's most), and the
// gzip and lz4 writers carry large buffers.
var (
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	gzipWriters = sync.Pool{New: func() any {
		return &gzipWriter{w: gzip.NewWriter(io.Discard)}
	}}
	lz4Readers = sync.Pool{New: func() any { return new(lz4Reader) }}
	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(io.Discard)
		// Kafka's clients write 64 KiB blocks; the 4 MiB default would
		// make every writer carry 8 MiB of buffers.
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			panic(err) // a constant option that the library accepts
		}
		return w
	}}
	zstdReaders = sync.Pool{New: func() any { return new(zstdReader) }}
)

type gzipReader struct {
	r   gzip.Reader
	src bytes.Reader
}

type gzipWriter struct{ w *gzip.Writer }

func gunzip(dst, src []byte, limit int) ([]byte, error) {
	g := gzipReaders.Get().(*gzipReader)
	defer gzipReaders.Put(g)
	g.src.Reset(src)
	if err := g.r.Reset(&g.src); err != nil {
		return dst, err
	}
	g.r.Multistream(true)
	dst, err := readLimited(&g.r, dst, limit, 4*len(src))
	g.src.Reset(nil)
	return dst, err
}

type lz4Reader struct {
	r   *lz4.Reader
	src bytes.Reader
}

func unlz4(dst, src []byte, limit int) ([]byte, error) {
	l := lz4Readers.Get().(*lz4Reader)
	defer lz4Readers.Put(l)
	l.src.Reset(src)
	if l.r == nil {
		l.r = lz4.NewReader(&l.src)
	} else {
		l.r.Reset(&l.src)
	}
	dst, err := readLimited(l.r, dst, limit, 4*len(src))
	l.src.Reset(nil)
	return dst, err
}

// xerialMagic starts the framing of the Java snappy library (xerial
// snappy-java), which older Kafka Java clients wrote: the magic, a version
// and a compatible-version int32, then chunks of an int32 length and a raw
// snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

func unsnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, fmt.Errorf("%w: block declares %d bytes, limit %d", ErrTooLarge, n, limit)
	}
	dst = grow(dst, n)
	out, err := snappy.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	if len(out) != n { // Decode checks this; keep the invariant local
		return dst, fmt.Errorf("snappy block decoded to %d bytes, declared %d", len(out), n)
	}
	return dst[:len(dst)+n], nil
}

func unsnappyXerial(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize {
		return dst, fmt.Errorf("xerial header truncated: %d bytes", len(src))
	}
	start := len(dst)
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return dst, fmt.Errorf("xerial chunk length truncated at byte %d", p)
		}
		n := int64(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n == 0 || n > int64(len(src)-p) {
			return dst, fmt.Errorf("xerial chunk of %d bytes at byte %d, %d left", n, p-4, len(src)-p)
		}
		var err error
		if dst, err = unsnappyBlock(dst, src[p:p+int(n)], limit-(len(dst)-start)); err != nil {
			return dst, err
		}
		p += int(n)
	}
	return dst, nil
}

// zstdReader is a pooled zstd decoder and the output limit it is
// configured for. Decoding uses DecodeAll, which writes straight into the
// destination and, with the limit as its maximum output, stops within a
// block of passing it. The decoder also rejects a frame whose window is
// larger than the limit: producers use windows of a few MiB, far below
// DefaultDecompressLimit.
type zstdReader struct {
	d     *zstd.Decoder
	limit int
}

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	z := zstdReaders.Get().(*zstdReader)
	defer zstdReaders.Put(z)
	var err error
	switch {
	case z.d == nil:
		z.d, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(limit)))
	case z.limit != limit:
		err = z.d.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(uint64(limit)))
	}
	if err != nil {
		z.d = nil
		return dst, fmt.Errorf("zstd decoder: %w", err)
	}
	z.limit = limit
	start := len(dst)
	dst, err = z.d.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return dst[:start], fmt.Errorf("%w: more than %d bytes (%v)", ErrTooLarge, limit, err)
	}
	if err != nil {
		return dst, err
	}
	if len(dst)-start > limit { // DecodeAll checks this already
		return dst[:start], fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return dst, nil
}

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	// EncodeAll is safe for concurrent use; the encoder keeps its own
	// pool of per-call state.
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
})

// Decompression buffers for iterators. Buffers grown past maxPooledBuffer
// by an unusually large batch are left to the garbage collector rather
// than pinned in the pool.
const maxPooledBuffer = 8 << 20

var buffers = sync.Pool{New: func() any { return new([]byte) }}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}
