package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// collect iterates batch and returns deep copies of its records.
func collect(batch []byte, limit int) ([]Record, error) {
	var out []Record
	err := Iterate(batch, limit, func(r *Record) error {
		out = append(out, cloneRecord(r))
		return nil
	})
	return out, err
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneRecord(r *Record) Record {
	c := *r
	c.Key, c.Value = cloneBytes(r.Key), cloneBytes(r.Value)
	c.Headers = nil
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, RecordHeader{Key: h.Key, Value: cloneBytes(h.Value)})
	}
	return c
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// diffRecord describes how got differs from want, or returns "".
func diffRecord(got, want Record) string {
	switch {
	case got.Attributes != want.Attributes:
		return fmt.Sprintf("attributes %d, want %d", got.Attributes, want.Attributes)
	case got.TimestampDelta != want.TimestampDelta:
		return fmt.Sprintf("timestamp delta %d, want %d", got.TimestampDelta, want.TimestampDelta)
	case got.OffsetDelta != want.OffsetDelta:
		return fmt.Sprintf("offset delta %d, want %d", got.OffsetDelta, want.OffsetDelta)
	case !sameBytes(got.Key, want.Key):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", trunc(got.Key), got.Key == nil, trunc(want.Key), want.Key == nil)
	case !sameBytes(got.Value, want.Value):
		return fmt.Sprintf("value %q (nil %v), want %q (nil %v)", trunc(got.Value), got.Value == nil, trunc(want.Value), want.Value == nil)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if g.Key != w.Key || !sameBytes(g.Value, w.Value) {
			return fmt.Sprintf("header %d = %q:%q, want %q:%q", i, g.Key, g.Value, w.Key, w.Value)
		}
	}
	return ""
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// rawBatch assembles a batch around an arbitrary records section, with a
// correct length and CRC, for tests of malformed records.
func rawBatch(codec Codec, numRecords int32, section []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(section))
	be := binary.BigEndian
	be.PutUint32(b[lengthOff:], uint32(HeaderSize-LengthPrefixSize+len(section)))
	b[magicOff] = Magic
	be.PutUint16(b[attributesOff:], uint16(codec))
	be.PutUint32(b[lastOffsetDeltaOff:], uint32(numRecords-1))
	be.PutUint64(b[producerIDOff:], ^uint64(0))
	be.PutUint16(b[producerEpochOff:], 0xffff)
	be.PutUint32(b[baseSequenceOff:], ^uint32(0))
	be.PutUint32(b[recordCountOff:], uint32(numRecords))
	b = append(b, section...)
	be.PutUint32(b[crcOff:], crc32.Checksum(b[attributesOff:], castagnoli))
	return b
}

// randomRecords returns n records with keys, values and headers drawn
// from rng, including null and empty ones.
func randomRecords(rng *rand.Rand, n, maxValue int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.OffsetDelta = int32(i)
		r.TimestampDelta = int64(rng.IntN(1000))
		switch rng.IntN(3) {
		case 0: // null key
		case 1:
			r.Key = []byte{}
		default:
			r.Key = []byte(fmt.Sprintf("key-%d", rng.IntN(100)))
		}
		if rng.IntN(10) > 0 {
			r.Value = make([]byte, rng.IntN(maxValue+1))
			for j := range r.Value {
				r.Value[j] = byte('a' + rng.IntN(4)) // compressible
			}
		}
		for j := rng.IntN(3); j > 0; j-- {
			var v []byte
			if rng.IntN(2) == 0 {
				v = []byte(fmt.Sprintf("v%d", j))
			}
			r.Headers = append(r.Headers, RecordHeader{Key: fmt.Sprintf("h%d", j), Value: v})
		}
	}
	return recs
}

func mustBuild(tb testing.TB, opts BuildOptions, recs []Record) []byte {
	tb.Helper()
	b, err := Build(opts, recs)
	if err != nil {
		tb.Fatalf("Build: %v", err)
	}
	return b
}
