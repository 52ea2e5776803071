package record

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Interop with franz-go, an independent implementation: its kmsg record
// encoder and kgo compressors build batches we must read, and its fetch
// decoder must read the batches we build.

var kgoCodecs = map[Codec]kgo.CompressionCodec{
	CodecGzip:   kgo.GzipCompression(),
	CodecSnappy: kgo.SnappyCompression(),
	CodecLZ4:    kgo.Lz4Compression(),
	CodecZstd:   kgo.ZstdCompression(),
}

// franzBatch encodes recs with kmsg and compresses them with kgo's
// compressor, assembling the batch and its CRC by hand.
func franzBatch(t *testing.T, codec Codec, baseTimestamp int64, recs []Record) []byte {
	t.Helper()
	var section []byte
	for i, r := range recs {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// The length prefix counts what follows it; measure with a
		// zero-length prefix (one byte), then encode for real.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		section = kr.AppendTo(section)
	}
	if codec != CodecNone {
		c, err := kgo.DefaultCompressor(kgoCodecs[codec])
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, used := c.Compress(&buf, section)
		if int8(used) != int8(codec) {
			t.Fatalf("kgo compressed with codec %d, want %v", used, codec)
		}
		section = append([]byte{}, out...)
	}
	maxTS := baseTimestamp
	for _, r := range recs {
		maxTS = max(maxTS, baseTimestamp+r.TimestampDelta)
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          77,
		Length:               int32(HeaderSize - LengthPrefixSize + len(section)),
		PartitionLeaderEpoch: 4,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       baseTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              section,
	}
	b := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[crcOff:], crc32.Checksum(b[attributesOff:], castagnoli))
	return b
}

func interopRecords() []Record {
	recs := randomRecords(newRand(11), 500, 300)
	recs[0] = Record{Key: []byte{}, Value: nil, Headers: []RecordHeader{{Key: "k", Value: []byte{}}, {Key: "n"}}}
	recs[1] = Record{Key: nil, Value: []byte{}, TimestampDelta: 123456, OffsetDelta: 1}
	return recs
}

func TestReadsBatchesFranzGoEncodes(t *testing.T) {
	recs := interopRecords()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			b := franzBatch(t, codec, 1_600_000_000_000, recs)
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if h.BaseOffset != 77 || h.NumRecords != int32(len(recs)) || h.Codec() != codec {
				t.Fatalf("header %+v", h)
			}
			got, err := collect(b, 0)
			if err != nil {
				t.Fatalf("iterate: %v", err)
			}
			if len(got) != len(recs) {
				t.Fatalf("%d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if d := diffRecord(got[i], recs[i]); d != "" {
					t.Fatalf("record %d: %s", i, d)
				}
			}
			// Our encoder writes the same bytes as kmsg for the same records.
			if codec == CodecNone {
				ours := mustBuild(t, BuildOptions{BaseOffset: 77, PartitionLeaderEpoch: 4, BaseTimestamp: 1_600_000_000_000}, recs)
				if !bytes.Equal(ours, b) {
					t.Fatal("uncompressed batch differs from kmsg's encoding")
				}
			}
		})
	}
}

func TestFranzGoReadsBatchesWeBuild(t *testing.T) {
	recs := interopRecords()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			b := mustBuild(t, BuildOptions{BaseOffset: 1000, Codec: codec, BaseTimestamp: 1_600_000_000_000}, recs)
			part := kmsg.FetchResponseTopicPartition{HighWatermark: 2000, RecordBatches: b}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: 1000, Topic: "t"}, &part, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				t.Fatalf("franz-go: %v", fp.Err)
			}
			if len(fp.Records) != len(recs) {
				t.Fatalf("franz-go read %d records, want %d", len(fp.Records), len(recs))
			}
			for i, kr := range fp.Records {
				want := recs[i]
				if kr.Offset != 1000+int64(i) || !bytes.Equal(kr.Key, want.Key) || !bytes.Equal(kr.Value, want.Value) ||
					kr.Timestamp.UnixMilli() != 1_600_000_000_000+want.TimestampDelta || len(kr.Headers) != len(want.Headers) {
					t.Fatalf("record %d: franz-go read %+v, want %+v", i, kr, want)
				}
				for j, h := range kr.Headers {
					if h.Key != want.Headers[j].Key || !bytes.Equal(h.Value, want.Headers[j].Value) {
						t.Fatalf("record %d header %d: %q=%q", i, j, h.Key, h.Value)
					}
				}
			}
		})
	}
}
