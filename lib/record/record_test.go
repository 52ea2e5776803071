package record

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBuildValidateIterateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	cases := []struct {
		name string
		recs []Record
	}{
		{"null key and value", []Record{{}}},
		{"empty key and value", []Record{{Key: []byte{}, Value: []byte{}}}},
		{"null key empty value", []Record{{Value: []byte{}}, {Key: []byte{}}}},
		{"key and value", []Record{{Key: []byte("k"), Value: []byte("v"), TimestampDelta: 5}}},
		{"headers", []Record{
			{Value: []byte("v"), Headers: []RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "c", Value: []byte{}}}},
			{Value: []byte("w"), Headers: []RecordHeader{{Key: "a", Value: []byte("2")}, {Key: "b"}}},
			{Value: []byte("x")},
		}},
		{"attributes and negative timestamp delta", []Record{{Attributes: 7, TimestampDelta: -3}, {TimestampDelta: 1 << 40}}},
		{"many records", randomRecords(rng, 2000, 50)},
		{"large values", []Record{{Key: []byte("big"), Value: big}, {Value: big[:70000]}}},
	}
	for _, codec := range allCodecs {
		for _, tc := range cases {
			t.Run(codec.String()+"/"+tc.name, func(t *testing.T) {
				opts := BuildOptions{BaseOffset: 1000, PartitionLeaderEpoch: 7, Codec: codec, BaseTimestamp: 1_700_000_000_000}
				b := mustBuild(t, opts, tc.recs)
				h, err := Validate(b)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if h.Codec() != codec || h.BaseOffset != 1000 || h.PartitionLeaderEpoch != 7 ||
					h.NumRecords != int32(len(tc.recs)) || h.LastOffsetDelta != int32(len(tc.recs)-1) ||
					h.ProducerID != -1 || h.ProducerEpoch != -1 || h.BaseSequence != -1 || h.BaseTimestamp != opts.BaseTimestamp {
					t.Fatalf("header %+v", h)
				}
				maxTS := opts.BaseTimestamp + tc.recs[0].TimestampDelta
				for _, r := range tc.recs {
					maxTS = max(maxTS, opts.BaseTimestamp+r.TimestampDelta)
				}
				if h.MaxTimestamp != maxTS {
					t.Errorf("MaxTimestamp %d, want %d", h.MaxTimestamp, maxTS)
				}
				got, err := collect(b, 0)
				if err != nil {
					t.Fatalf("iterate: %v", err)
				}
				if len(got) != len(tc.recs) {
					t.Fatalf("%d records, want %d", len(got), len(tc.recs))
				}
				for i := range got {
					want := tc.recs[i]
					want.OffsetDelta = int32(i)
					if d := diffRecord(got[i], want); d != "" {
						t.Fatalf("record %d: %s", i, d)
					}
				}
			})
		}
	}
}

func TestBuildProducerFieldsAndFlags(t *testing.T) {
	b := mustBuild(t, BuildOptions{
		Codec: CodecLZ4, Idempotent: true, ProducerID: 42, ProducerEpoch: 3, BaseSequence: 9,
		Transactional: true, Control: true, LogAppendTime: true,
	}, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 9 || !h.Transactional() || !h.Control() || !h.LogAppendTime() || !h.Idempotent() {
		t.Fatalf("header %+v", h)
	}
	if _, err := Build(BuildOptions{Transactional: true}, []Record{{}}); err == nil {
		t.Error("transactional batch without producer built")
	}
	if _, err := Build(BuildOptions{}, nil); err == nil {
		t.Error("empty batch built without KeepOffsetDeltas")
	}
	if _, err := Build(BuildOptions{Codec: 6}, []Record{{}}); !errors.Is(err, ErrBadCodec) {
		t.Errorf("codec 6: %v", err)
	}
}

func TestRebuildKeepsOffsetDeltasLikeCompaction(t *testing.T) {
	orig := mustBuild(t, BuildOptions{BaseOffset: 50, Codec: CodecZstd, Idempotent: true, ProducerID: 1, BaseSequence: 10},
		randomRecords(rand.New(rand.NewPCG(3, 4)), 10, 20))
	h, _ := Validate(orig)
	recs, err := collect(orig, 0)
	if err != nil {
		t.Fatal(err)
	}
	kept := []Record{recs[2], recs[5]} // the last record is dropped
	b := mustBuild(t, BuildOptionsFrom(h), kept)
	h2, err := ParseHeader(b)
	if err != nil || CheckCRC(b) != nil {
		t.Fatalf("rebuilt: %v %v", err, CheckCRC(b))
	}
	if h2.LastOffset() != h.LastOffset() || h2.NumRecords != 2 || h2.ProducerID != 1 || h2.BaseSequence != 10 || h2.Codec() != CodecZstd {
		t.Fatalf("rebuilt header %+v", h2)
	}
	if _, err := Validate(b); !errors.Is(err, ErrBadCount) {
		t.Errorf("Validate of thinned batch: %v, want ErrBadCount", err)
	}
	got, err := collect(b, 0)
	if err != nil || len(got) != 2 || got[0].OffsetDelta != 2 || got[1].OffsetDelta != 5 {
		t.Fatalf("rebuilt records %+v, %v", got, err)
	}
	// An empty batch keeps the producer state and the offsets it covered.
	empty := mustBuild(t, BuildOptionsFrom(h), nil)
	he, _ := ParseHeader(empty)
	if he.NumRecords != 0 || he.LastOffset() != h.LastOffset() || CheckCRC(empty) != nil {
		t.Fatalf("empty batch header %+v", he)
	}
	if got, err := collect(empty, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v %v", got, err)
	}
	if _, err := Build(BuildOptions{KeepOffsetDeltas: true}, []Record{{OffsetDelta: 1}, {OffsetDelta: 1}}); err == nil {
		t.Error("repeated offset delta accepted")
	}
}

// rec encodes a record body with its length prefix.
func rec(body ...byte) []byte { return append(appendVarint(nil, int64(len(body))), body...) }

func TestIterateRejectsMalformedRecords(t *testing.T) {
	ok := rec(0, 0, 0, 1, 1, 0) // attributes, ts 0, offset 0, null key, null value, no headers
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name    string
		n       int32
		section []byte
		want    error
	}{
		{"fewer records than declared", 2, ok, ErrBadCount},
		{"no records at all", 1, nil, ErrBadCount},
		{"more records than declared", 1, cat(ok, ok), ErrCorrupt},
		{"trailing garbage", 1, cat(ok, []byte{0xde, 0xad}), ErrCorrupt},
		{"truncated record", 1, ok[:4], ErrCorrupt},
		{"truncated length varint", 1, []byte{0x80}, ErrCorrupt},
		{"length past end", 1, cat([]byte{0x7e}, ok[1:]), ErrCorrupt},
		{"negative length", 1, cat([]byte{0x01}, ok[1:]), ErrCorrupt},
		{"length too short for fields", 1, rec(0, 0, 0, 1, 1), ErrCorrupt},
		{"length longer than fields", 1, rec(0, 0, 0, 1, 1, 0, 0), ErrCorrupt},
		{"length varint over 5 bytes", 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrCorrupt},
		{"length varint overflows int32", 1, []byte{0x80, 0x80, 0x80, 0x80, 0x7f}, ErrCorrupt},
		{"timestamp varlong over 10 bytes", 1, rec(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 1, 1, 0), ErrCorrupt},
		{"timestamp varlong overflows int64", 1, rec(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 1, 1, 0), ErrCorrupt},
		{"offset delta varint over 5 bytes", 1, rec(0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1, 0), ErrCorrupt},
		{"key length -2", 1, rec(0, 0, 0, 3, 1, 0), ErrCorrupt},
		{"key past record end", 1, rec(0, 0, 0, 20, 1, 0), ErrCorrupt},
		{"value length -5", 1, rec(0, 0, 0, 1, 9, 0), ErrCorrupt},
		{"value past record end", 1, rec(0, 0, 0, 1, 4, 0), ErrCorrupt},
		{"negative header count", 1, rec(0, 0, 0, 1, 1, 1), ErrCorrupt},
		{"header count past end", 1, rec(0, 0, 0, 1, 1, 100, 0, 0), ErrCorrupt},
		{"null header key", 1, rec(0, 0, 0, 1, 1, 2, 1, 1), ErrCorrupt},
		{"header key past end", 1, rec(0, 0, 0, 1, 1, 2, 10, 1), ErrCorrupt},
		{"header value -3", 1, rec(0, 0, 0, 1, 1, 2, 2, 'k', 5), ErrCorrupt},
		{"header value truncated", 1, rec(0, 0, 0, 1, 1, 2, 2, 'k'), ErrCorrupt},
		{"negative record count", -1, ok, ErrBadCount},
		{"garbage gzip section", 1, []byte("not gzip at all"), ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			codec := CodecNone
			if strings.Contains(tc.name, "gzip") {
				codec = CodecGzip
			}
			b := rawBatch(codec, tc.n, tc.section)
			if err := CheckCRC(b); err != nil {
				t.Fatalf("test batch has a bad CRC: %v", err)
			}
			got, err := collect(b, 0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %d records and error %v, want %v", len(got), err, tc.want)
			}
		})
	}
	// The valid record itself must pass, so the cases above fail for the
	// reason they name.
	if got, err := collect(rawBatch(CodecNone, 2, cat(ok, ok)), 0); err != nil || len(got) != 2 || got[0].Key != nil {
		t.Fatalf("valid hand-made batch: %v %v", got, err)
	}
}

func TestRecordsRejectsBadBatch(t *testing.T) {
	good := mustBuild(t, BuildOptions{}, []Record{{Value: []byte("v")}})
	unknownCodec := append([]byte{}, good...)
	unknownCodec[attributesOff+1] |= 5
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"truncated header", good[:HeaderSize-1], ErrTruncated},
		{"truncated body", good[:len(good)-1], ErrTruncated},
		{"trailing bytes", append(append([]byte{}, good...), 0), ErrBadLength},
		{"unknown codec", unknownCodec, ErrBadCodec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Records(tc.b, 0); !errors.Is(err, tc.want) {
				t.Fatalf("Records: %v, want %v", err, tc.want)
			}
			if err := Iterate(tc.b, 0, func(*Record) error { return nil }); !errors.Is(err, tc.want) {
				t.Fatalf("Iterate: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestIterReuseAndAliasing(t *testing.T) {
	recs := []Record{
		{Key: []byte("k1"), Value: []byte("v1"), Headers: []RecordHeader{{Key: "trace", Value: []byte("a")}}},
		{Key: []byte("k2"), Value: []byte("v2"), Headers: []RecordHeader{{Key: "trace", Value: []byte("b")}}},
	}
	plain := mustBuild(t, BuildOptions{}, recs)
	var it Iter
	if err := it.Reset(plain, 0); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for it.Next() {
		r := it.Record()
		// Uncompressed records alias the batch: the value is a sub-slice.
		if i := bytes.Index(plain, r.Value); i < 0 || &plain[i] != &r.Value[0] {
			t.Fatalf("value %q does not alias the batch", r.Value)
		}
		if cap(r.Value) != len(r.Value) {
			t.Errorf("value capacity %d runs past it", cap(r.Value))
		}
		keys = append(keys, r.Headers[0].Key)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if len(keys) != 2 || keys[0] != "trace" || keys[1] != "trace" {
		t.Fatalf("header keys %q", keys)
	}
	// The same Iter reads a compressed batch after Reset.
	z := mustBuild(t, BuildOptions{Codec: CodecZstd}, recs)
	if err := it.Reset(z, 0); err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		n++
	}
	if it.Err() != nil || n != 2 {
		t.Fatalf("%d records, %v", n, it.Err())
	}
	it.Close()
	it.Close()
}

func TestIterateStopsAtCallbackError(t *testing.T) {
	b := mustBuild(t, BuildOptions{}, []Record{{}, {}, {}})
	stop := errors.New("stop")
	n := 0
	err := Iterate(b, 0, func(*Record) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("err %v after %d records", err, n)
	}
}

func TestRecordOffsetAndTimestamp(t *testing.T) {
	b := mustBuild(t, BuildOptions{BaseOffset: 10, BaseTimestamp: 1000}, []Record{{TimestampDelta: 5}, {TimestampDelta: 9}})
	it, err := Records(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	h := it.Header()
	it.Next()
	it.Next()
	r := it.Record()
	if r.Offset(&h) != 11 || r.Timestamp(&h) != 1009 {
		t.Fatalf("offset %d timestamp %d", r.Offset(&h), r.Timestamp(&h))
	}
	SetLogAppendTime(b, 5000)
	h, _ = ParseHeader(b)
	if r.Timestamp(&h) != 5000 {
		t.Fatalf("log append timestamp %d", r.Timestamp(&h))
	}
}

func TestVarintRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 31, -1 << 31, 1<<31 - 1, 1<<63 - 1, -1 << 63} {
		b := appendVarint(nil, v)
		if len(b) != varintLen(v) {
			t.Errorf("%d: %d bytes, varintLen %d", v, len(b), varintLen(v))
		}
		got, n, err := readVarlong(b)
		if err != nil || got != v || n != len(b) {
			t.Errorf("varlong %d: got %d, %d bytes, %v", v, got, n, err)
		}
		if int64(int32(v)) == v {
			got, n, err := readVarint(b)
			if err != nil || int64(got) != v || n != len(b) {
				t.Errorf("varint %d: got %d, %d bytes, %v", v, got, n, err)
			}
		} else if _, _, err := readVarint(b); err == nil {
			t.Errorf("varint %d beyond int32 accepted", v)
		}
	}
}
