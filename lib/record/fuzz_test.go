package record

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var writeCorpus = flag.Bool("write-corpus", false, "rewrite the seed corpora under testdata/fuzz")

// seedBatches are valid batches of every codec and a few malformed ones.
func seedBatches(tb testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	recs := []Record{
		{Key: []byte("k"), Value: []byte("value"), Headers: []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "n"}}},
		{Key: []byte{}, Value: nil, TimestampDelta: 3},
		{Value: []byte("another value, another value")},
	}
	for _, c := range allCodecs {
		seeds["valid-"+c.String()] = mustBuild(tb, BuildOptions{BaseOffset: 5, Codec: c, BaseTimestamp: 1000}, recs)
	}
	plain := mustBuild(tb, BuildOptions{}, recs)
	seeds["valid-snappy-xerial"] = rawBatch(CodecSnappy, int32(len(recs)), xerial(plain[HeaderSize:], 16))
	seeds["truncated"] = plain[:len(plain)-3]
	seeds["header-only"] = plain[:HeaderSize]
	bad := append([]byte{}, plain...)
	binary.BigEndian.PutUint32(bad[recordCountOff:], 4)
	UpdateCRC(bad)
	seeds["count-mismatch"] = bad
	seeds["varint-overflow"] = rawBatch(CodecNone, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	return seeds
}

func addSeeds(f *testing.F, withArgs bool) {
	for _, b := range seedBatches(f) {
		if withArgs {
			f.Add(b, uint8(b[attributesOff+1]&codecMask), false)
		} else {
			f.Add(b)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	addSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err == nil && (len(b) < HeaderSize || h.Magic != Magic || h.Size() < HeaderSize) {
			t.Fatalf("accepted %d bytes with header %+v", len(b), h)
		}
		_, _, _, _ = Next(b)
		_ = CheckCRC(b)
	})
}

func FuzzValidate(f *testing.F) {
	addSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err != nil {
			return
		}
		if h.Size() != len(b) || CheckCRC(b) != nil || h.NumRecords != h.LastOffsetDelta+1 {
			t.Fatalf("Validate accepted a bad batch: %+v", h)
		}
		// Patching a valid batch keeps it valid.
		c := append([]byte{}, b...)
		SetBaseOffset(c, 1)
		SetPartitionLeaderEpoch(c, 2)
		SetLogAppendTime(c, 3)
		if _, err := Validate(c); err != nil {
			t.Fatalf("patched batch invalid: %v", err)
		}
	})
}

// FuzzRecords iterates arbitrary bytes as a batch. With fix set it first
// repairs the length, magic and CRC and sets the codec, so the fuzzer
// reaches the decompressors and the record parser.
func FuzzRecords(f *testing.F) {
	addSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte, codec uint8, fix bool) {
		if fix && len(b) >= HeaderSize {
			b = append([]byte{}, b...)
			binary.BigEndian.PutUint32(b[lengthOff:], uint32(len(b)-LengthPrefixSize))
			b[magicOff] = Magic
			b[attributesOff+1] = b[attributesOff+1]&^codecMask | codec&codecMask
			UpdateCRC(b)
		}
		const limit = 1 << 20
		var got []Record
		err := Iterate(b, limit, func(r *Record) error {
			got = append(got, cloneRecord(r))
			return nil
		})
		// Recompress reads what iteration reads, and keeps the records.
		for _, c := range allCodecs {
			out, rerr := Recompress(nil, b, c, limit)
			if (rerr == nil) != (err == nil) {
				t.Fatalf("to %s: Recompress error %v, Iterate error %v", c, rerr, err)
			}
			if rerr != nil {
				continue
			}
			again, aerr := collect(out, limit)
			if aerr != nil || len(again) != len(got) {
				t.Fatalf("to %s: %d records back of %d, %v", c, len(again), len(got), aerr)
			}
			for i := range got {
				if d := diffRecord(again[i], got[i]); d != "" {
					t.Fatalf("to %s: record %d: %s", c, i, d)
				}
			}
		}
		if err != nil {
			return
		}
		h, _ := ParseHeader(b)
		if len(got) != int(h.NumRecords) {
			t.Fatalf("%d records, header says %d", len(got), h.NumRecords)
		}
		// What decodes must re-encode to the same records.
		opts := BuildOptionsFrom(h)
		opts.Codec = CodecNone
		rebuilt, err := Build(opts, got)
		if err != nil {
			return // offset deltas out of order, or none at all
		}
		again, err := collect(rebuilt, limit)
		if err != nil || len(again) != len(got) {
			t.Fatalf("rebuilt batch: %d records, %v", len(again), err)
		}
		for i := range got {
			if d := diffRecord(again[i], got[i]); d != "" {
				t.Fatalf("rebuilt record %d: %s", i, d)
			}
		}
	})
}

// TestWriteSeedCorpus writes the seed batches as corpus files when run
// with -write-corpus, so `go test -fuzz` starts from them.
func TestWriteSeedCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -write-corpus to rewrite testdata/fuzz")
	}
	for name, b := range seedBatches(t) {
		write := func(target, body string) {
			dir := filepath.Join("testdata", "fuzz", target)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte("go test fuzz v1\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("FuzzParseHeader", fmt.Sprintf("[]byte(%q)\n", b))
		write("FuzzValidate", fmt.Sprintf("[]byte(%q)\n", b))
		write("FuzzRecords", fmt.Sprintf("[]byte(%q)\nbyte(%q)\nbool(false)\n", b, rune(b[attributesOff+1]&codecMask)))
	}
}
