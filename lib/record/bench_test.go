package record

import (
	"bytes"
	"testing"
)

// benchBatch builds a batch of roughly size bytes of uncompressed records.
func benchBatch(tb testing.TB, codec Codec, size int) []byte {
	value := bytes.Repeat([]byte("benchmark value "), 16) // 256 bytes
	var recs []Record
	for n := 0; n < size; n += len(value) + 20 {
		recs = append(recs, Record{Key: []byte("key"), Value: value, Headers: []RecordHeader{{Key: "trace", Value: []byte("x")}}})
	}
	return mustBuild(tb, BuildOptions{Codec: codec, BaseTimestamp: 1}, recs)
}

func BenchmarkValidate(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			batch := benchBatch(b, CodecNone, size.n)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIterate(b *testing.B) {
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			batch := benchBatch(b, codec, 64<<10)
			h, _ := ParseHeader(batch)
			plain := benchBatch(b, CodecNone, 64<<10)
			b.SetBytes(int64(len(plain))) // uncompressed bytes per op
			b.ReportAllocs()
			b.ReportMetric(float64(h.NumRecords), "records/op")
			var it Iter
			for b.Loop() {
				if err := it.Reset(batch, 0); err != nil {
					b.Fatal(err)
				}
				n := 0
				for it.Next() {
					n += len(it.Record().Value)
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
			it.Close()
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := make([]Record, 256)
	for i := range recs {
		recs[i] = Record{Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 256)}
	}
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = AppendBatch(dst[:0], BuildOptions{Codec: codec}, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(dst)))
		})
	}
}
