package record

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRecompressKeepsRecordsAndHeader converts batches between every pair
// of codecs: the result is a valid batch with the new codec, the same
// records byte for byte, and the same header but for the codec bits, the
// length and the CRC.
func TestRecompressKeepsRecordsAndHeader(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	recs := randomRecords(rng, 200, 300)
	opts := BuildOptions{
		BaseOffset: 1234, PartitionLeaderEpoch: 7, BaseTimestamp: 1_700_000_000_000,
		Idempotent: true, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 1000,
	}
	for _, from := range allCodecs {
		for _, to := range allCodecs {
			t.Run(from.String()+"-to-"+to.String(), func(t *testing.T) {
				o := opts
				o.Codec = from
				src := mustBuild(t, o, recs)
				// Broker-stamped timestamps and the delete horizon bit
				// are attributes to keep too.
				SetLogAppendTime(src, 1_700_000_999_999)
				src[attributesOff+1] |= deleteHorizonBit
				UpdateCRC(src)
				srcCopy := bytes.Clone(src)

				prefix := []byte("kept")
				out, err := Recompress(prefix, src, to, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(src, srcCopy) {
					t.Fatal("Recompress modified its input")
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("dst's bytes not kept: % x", out[:min(len(out), 8)])
				}
				out = out[len(prefix):]
				got, err := Validate(out)
				if err != nil {
					t.Fatalf("recompressed batch invalid: %v", err)
				}
				want, _ := ParseHeader(src)
				if got.Codec() != to {
					t.Fatalf("codec %s, want %s", got.Codec(), to)
				}
				if want.Codec() == to && !bytes.Equal(out, src) {
					t.Fatal("a batch recompressed to its own codec changed")
				}
				want.Attributes = want.Attributes&^codecMask | int16(to)
				want.Length, want.CRC = got.Length, got.CRC
				if got != want {
					t.Fatalf("header\n got %+v\nwant %+v", got, want)
				}
				if section(t, out) == nil || !bytes.Equal(section(t, out), section(t, src)) {
					t.Fatal("records section differs once decompressed")
				}
				back, err := collect(out, 0)
				if err != nil || len(back) != len(recs) {
					t.Fatalf("%d records read back, %v", len(back), err)
				}
				for i := range recs {
					if d := diffRecord(back[i], recs[i]); d != "" {
						t.Fatalf("record %d: %s", i, d)
					}
				}
			})
		}
	}
}

// section returns the decompressed records section of batch.
func section(t *testing.T, batch []byte) []byte {
	t.Helper()
	h, err := ParseHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decompress(h.Codec(), nil, batch[HeaderSize:h.Size()], 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecompressRefusesWhatDoesNotRead(t *testing.T) {
	recs := []Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 1000)}, {Value: []byte("x")}}
	plain := mustBuild(t, BuildOptions{}, recs)
	zstd := mustBuild(t, BuildOptions{Codec: CodecZstd}, recs)
	garbled := bytes.Clone(zstd)
	garbled[len(garbled)-1] ^= 0xff // the frame checksum
	tooFew := rawBatch(CodecNone, 3, plain[HeaderSize:])
	trailing := rawBatch(CodecNone, 2, append(bytes.Clone(plain[HeaderSize:]), 0))
	overflow := rawBatch(CodecNone, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	for _, tc := range []struct {
		name  string
		batch []byte
		codec Codec
		limit int
		want  error
	}{
		{"corrupt zstd", garbled, CodecLZ4, 0, ErrCorrupt},
		{"fewer records than declared", tooFew, CodecZstd, 0, ErrBadCount},
		{"bytes after the last record", trailing, CodecZstd, 0, ErrCorrupt},
		{"varint overflow", overflow, CodecGzip, 0, ErrCorrupt},
		{"over the limit", zstd, CodecGzip, 100, ErrTooLarge},
		{"unknown codec", plain, Codec(5), 0, ErrBadCodec},
		{"truncated", plain[:len(plain)-1], CodecZstd, 0, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("dst")
			out, err := Recompress(dst, tc.batch, tc.codec, tc.limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if string(out) != "dst" {
				t.Fatalf("dst grew to %q on error", out)
			}
		})
	}
}

// recompressBatch is about 1 MiB of 100-byte records that look like
// application events (repetitive, as JSON is), in codec.
func recompressBatch(tb testing.TB, codec Codec) ([]byte, int) {
	var recs []Record
	size := 0
	for i := 0; size < 1<<20; i++ {
		v := fmt.Sprintf(`{"id":%d,"user":"user-%04d","event":"page_view","path":"/items/%d"}`, i, i%5000, i*7%100000)
		v += string(bytes.Repeat([]byte{' '}, max(0, 100-len(v))))
		recs = append(recs, Record{Value: []byte(v[:100]), TimestampDelta: int64(i / 50)})
		size += 100
	}
	b := mustBuild(tb, BuildOptions{Codec: codec, BaseTimestamp: 1_700_000_000_000}, recs)
	plain := mustBuild(tb, BuildOptions{BaseTimestamp: 1_700_000_000_000}, recs)
	return b, len(plain) - HeaderSize
}

// BenchmarkRecompress converts a 1 MiB batch of 100-byte records between
// codecs, as the broker does for a topic whose compression.type differs
// from the producer's. MB/s counts the uncompressed records.
func BenchmarkRecompress(b *testing.B) {
	for _, pair := range [][2]Codec{
		{CodecNone, CodecZstd}, {CodecSnappy, CodecLZ4}, {CodecNone, CodecGzip},
		{CodecNone, CodecSnappy}, {CodecNone, CodecLZ4}, {CodecGzip, CodecZstd},
		{CodecLZ4, CodecZstd}, {CodecZstd, CodecNone},
	} {
		b.Run(pair[0].String()+"-to-"+pair[1].String(), func(b *testing.B) {
			src, plain := recompressBatch(b, pair[0])
			b.SetBytes(int64(plain))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = Recompress(dst[:0], src, pair[1], 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(src)), "in-bytes")
			b.ReportMetric(float64(len(dst)), "out-bytes")
		})
	}
}
