package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
)

func TestParseCodec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Codec
		ok   bool
	}{
		{"none", CodecNone, true}, {"uncompressed", CodecNone, true}, {"gzip", CodecGzip, true},
		{"snappy", CodecSnappy, true}, {"lz4", CodecLZ4, true}, {"ZSTD", CodecZstd, true}, {" lz4 ", CodecLZ4, true},
		{"producer", 0, false}, {"", 0, false}, {"brotli", 0, false},
	} {
		got, err := ParseCodec(tc.in)
		if tc.ok && (err != nil || got != tc.want) || !tc.ok && !errors.Is(err, ErrBadCodec) {
			t.Errorf("ParseCodec(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, c := range allCodecs {
		if got, err := ParseCodec(c.String()); err != nil || got != c {
			t.Errorf("ParseCodec(%v.String()) = %v, %v", c, got, err)
		}
	}
}

func TestCompressDecompressRoundTrip(t *testing.T) {
	inputs := [][]byte{
		{},
		[]byte("x"),
		bytes.Repeat([]byte("hello, world "), 1000),
		bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 100_000), // > 1 MiB, many lz4 blocks
	}
	for _, codec := range allCodecs {
		for _, in := range inputs {
			prefix := []byte("prefix")
			c, err := Compress(codec, append([]byte{}, prefix...), in)
			if err != nil {
				t.Fatalf("%v: Compress: %v", codec, err)
			}
			if !bytes.HasPrefix(c, prefix) {
				t.Fatalf("%v: Compress clobbered dst", codec)
			}
			out, err := Decompress(codec, []byte("dst"), c[len(prefix):], 0)
			if err != nil {
				t.Fatalf("%v (%d bytes): Decompress: %v", codec, len(in), err)
			}
			if !bytes.Equal(out, append([]byte("dst"), in...)) {
				t.Fatalf("%v (%d bytes): round trip differs", codec, len(in))
			}
			// The limit is inclusive: exactly len(in) bytes are allowed.
			if len(in) > 1 { // a limit of 0 means the default
				if _, err := Decompress(codec, nil, c[len(prefix):], len(in)); err != nil {
					t.Fatalf("%v: limit = size: %v", codec, err)
				}
				if _, err := Decompress(codec, nil, c[len(prefix):], len(in)-1); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%v: limit = size-1: %v", codec, err)
				}
			}
		}
	}
	if _, err := Compress(Codec(5), nil, nil); !errors.Is(err, ErrBadCodec) {
		t.Errorf("Compress codec 5: %v", err)
	}
	if _, err := Decompress(Codec(-1), nil, nil, 0); !errors.Is(err, ErrBadCodec) {
		t.Errorf("Decompress codec -1: %v", err)
	}
}

// xerial frames src the way snappy-java's SnappyOutputStream does: the
// 8-byte magic, version 1, compatible version 1, then chunks of at most
// chunkSize input bytes, each an int32 length and a raw snappy block.
func xerial(src []byte, chunkSize int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(src) > 0 {
		n := min(chunkSize, len(src))
		block := snappy.Encode(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		src = src[n:]
	}
	return out
}

func TestSnappyXerialFraming(t *testing.T) {
	recs := randomRecords(newRand(5), 300, 200)
	plain := mustBuild(t, BuildOptions{}, recs)
	section := plain[HeaderSize:]
	framed := xerial(section, 1024) // several chunks
	b := rawBatch(CodecSnappy, int32(len(recs)), framed)
	got, err := collect(b, 0)
	if err != nil {
		t.Fatalf("xerial batch: %v", err)
	}
	for i := range got {
		want := recs[i]
		if d := diffRecord(got[i], want); d != "" {
			t.Fatalf("record %d: %s", i, d)
		}
	}
	// The raw block of the same section reads the same.
	if got2, err := collect(rawBatch(CodecSnappy, int32(len(recs)), snappy.Encode(nil, section)), 0); err != nil || len(got2) != len(recs) {
		t.Fatalf("raw snappy batch: %d records, %v", len(got2), err)
	}

	bad := []struct {
		name string
		src  []byte
		want error
	}{
		{"header only", framed[:xerialHeaderSize], nil},
		{"truncated header", framed[:10], ErrCorrupt},
		{"truncated chunk length", framed[:xerialHeaderSize+2], ErrCorrupt},
		{"chunk past end", framed[:xerialHeaderSize+10], ErrCorrupt},
		{"zero-length chunk", append(append([]byte{}, framed[:xerialHeaderSize]...), 0, 0, 0, 0), ErrCorrupt},
		{"corrupt chunk", append(append([]byte{}, framed[:xerialHeaderSize]...), 0, 0, 0, 2, 0xff, 0xff), ErrCorrupt},
		{"over limit across chunks", xerial(bytes.Repeat([]byte{'z'}, 5000), 1000), ErrTooLarge},
	}
	for _, tc := range bad {
		_, err := Decompress(CodecSnappy, nil, tc.src, 4096)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestDecompressionBombsStopAtLimit feeds each codec a small input that
// expands to 256 MiB and checks that Decompress fails with ErrTooLarge
// quickly, having allocated a small multiple of the limit.
func TestDecompressionBombsStopAtLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 256 MiB per codec")
	}
	const size, limit = 256 << 20, 1 << 20
	zeros := make([]byte, size)
	zstdStream := Codec(-4) // a zstd frame without a content size, as streaming encoders write
	for _, codec := range append(allCodecs[1:], zstdStream) {
		name := codec.String()
		if codec == zstdStream {
			name = "zstd stream"
		}
		t.Run(name, func(t *testing.T) {
			var bomb []byte
			var err error
			if codec == zstdStream {
				var buf bytes.Buffer
				w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(limit/2))
				if err != nil {
					t.Fatal(err)
				}
				w.Write(zeros)
				w.Close()
				bomb, codec = buf.Bytes(), CodecZstd
				if h := (zstd.Header{}); h.Decode(bomb) != nil || h.HasFCS {
					t.Fatalf("stream frame header %+v", h)
				}
			} else if codec == CodecSnappy {
				// A raw block declares its size; xerial chunks do not add up
				// until decoded, which makes them the harder case.
				bomb = xerial(zeros, 1<<20)
			} else if bomb, err = Compress(codec, nil, zeros); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d-byte %v input expands to %d bytes", len(bomb), codec, size)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = Decompress(codec, nil, bomb, limit)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decompress: %v, want ErrTooLarge", err)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("stopped after %v, %d bytes allocated", elapsed, allocated)
			if allocated > 32<<20 {
				t.Errorf("allocated %d bytes for a %d-byte limit", allocated, limit)
			}
		})
	}
	// A zstd frame whose window is over the limit is refused up front.
	big, err := zstd.NewWriter(nil, zstd.WithWindowSize(4*limit))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	big.Reset(&buf)
	big.Write(zeros[:limit/2])
	big.Close()
	if _, err := Decompress(CodecZstd, nil, buf.Bytes(), limit); !errors.Is(err, ErrTooLarge) {
		t.Errorf("zstd window over limit: %v", err)
	}
	// A raw snappy block that claims a huge size fails before decoding.
	claim := snappy.Encode(nil, make([]byte, 2<<20))
	if _, err := Decompress(CodecSnappy, nil, claim, limit); !errors.Is(err, ErrTooLarge) {
		t.Errorf("raw snappy over limit: %v", err)
	}
	// So does a batch whose records section is a bomb.
	z, err := Compress(CodecZstd, nil, zeros[:64<<20])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Records(rawBatch(CodecZstd, 1, z), limit); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Records of a zstd bomb: %v", err)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
