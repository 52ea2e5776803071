package record

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestParseHeaderAndValidateRejectMalformed(t *testing.T) {
	good := mustBuild(t, BuildOptions{BaseOffset: 3, Codec: CodecSnappy}, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	mod := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	withCRC := func(f func(b []byte)) []byte { return mod(func(b []byte) { f(b); UpdateCRC(b) }) }
	be := binary.BigEndian
	cases := []struct {
		name        string
		b           []byte
		parseErr    error // nil: ParseHeader succeeds
		validateErr error
	}{
		{"empty", nil, ErrTruncated, ErrTruncated},
		{"truncated header", good[:HeaderSize-1], ErrTruncated, ErrTruncated},
		{"truncated header with bad magic", mod(func(b []byte) { b[magicOff] = 1 })[:20], ErrBadMagic, ErrBadMagic},
		{"wrong magic", mod(func(b []byte) { b[magicOff] = 1 }), ErrBadMagic, ErrBadMagic},
		{"length below header", mod(func(b []byte) { be.PutUint32(b[lengthOff:], 48) }), ErrBadLength, ErrBadLength},
		{"negative length", mod(func(b []byte) { be.PutUint32(b[lengthOff:], 0xffffffff) }), ErrBadLength, ErrBadLength},
		{"length past end", mod(func(b []byte) { be.PutUint32(b[lengthOff:], uint32(len(good))) }), nil, ErrBadLength},
		{"truncated body", good[:len(good)-1], nil, ErrBadLength},
		{"trailing bytes", append(append([]byte{}, good...), 0), nil, ErrBadLength},
		{"bad crc", mod(func(b []byte) { b[crcOff] ^= 1 }), nil, ErrBadCRC},
		{"flipped record byte", mod(func(b []byte) { b[len(b)-1] ^= 0x40 }), nil, ErrBadCRC},
		{"unknown codec", withCRC(func(b []byte) { b[attributesOff+1] |= 7 }), nil, ErrBadCodec},
		{"count above offsets", withCRC(func(b []byte) { be.PutUint32(b[recordCountOff:], 3) }), nil, ErrBadCount},
		{"count below offsets", withCRC(func(b []byte) { be.PutUint32(b[lastOffsetDeltaOff:], 5) }), nil, ErrBadCount},
		{"zero records", withCRC(func(b []byte) {
			be.PutUint32(b[recordCountOff:], 0)
			be.PutUint32(b[lastOffsetDeltaOff:], 0xffffffff)
		}), nil, ErrBadCount},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.b)
			if tc.parseErr == nil && err != nil || tc.parseErr != nil && !errors.Is(err, tc.parseErr) {
				t.Errorf("ParseHeader: %v, want %v", err, tc.parseErr)
			}
			if _, err := Validate(tc.b); !errors.Is(err, tc.validateErr) {
				t.Errorf("Validate: %v, want %v", err, tc.validateErr)
			}
		})
	}
	if _, err := Validate(good); err != nil {
		t.Fatalf("good batch: %v", err)
	}
}

func TestPatchingKeepsCRCValid(t *testing.T) {
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			b := mustBuild(t, BuildOptions{Codec: codec, BaseTimestamp: 100}, []Record{{Value: []byte("x"), TimestampDelta: 2}})
			SetBaseOffset(b, 1<<40)
			SetPartitionLeaderEpoch(b, 12)
			h, err := Validate(b)
			if err != nil {
				t.Fatalf("after SetBaseOffset/SetPartitionLeaderEpoch: %v", err)
			}
			if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 12 {
				t.Fatalf("header %+v", h)
			}
			SetLogAppendTime(b, 987654321)
			h, err = Validate(b)
			if err != nil {
				t.Fatalf("after SetLogAppendTime: %v", err)
			}
			if !h.LogAppendTime() || h.MaxTimestamp != 987654321 || h.Codec() != codec || h.BaseTimestamp != 100 {
				t.Fatalf("header %+v", h)
			}
			if got, err := collect(b, 0); err != nil || len(got) != 1 {
				t.Fatalf("records after patching: %v %v", got, err)
			}
		})
	}
}

func TestUpdateCRCStopsAtBatchEnd(t *testing.T) {
	a := mustBuild(t, BuildOptions{}, []Record{{Value: []byte("a")}})
	c := mustBuild(t, BuildOptions{BaseOffset: 1}, []Record{{Value: []byte("c")}})
	buf := append(append([]byte{}, a...), c...)
	SetLogAppendTime(buf, 55) // patches the first batch of two
	first, rest, _, err := Next(buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(first); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if _, err := Validate(rest); err != nil {
		t.Fatalf("second batch: %v", err)
	}
}

func TestNextSplitsBatches(t *testing.T) {
	var buf []byte
	for i := range 3 {
		buf = append(buf, mustBuild(t, BuildOptions{BaseOffset: int64(i)}, []Record{{}})...)
	}
	for i := range 3 {
		var b []byte
		var h Header
		var err error
		b, buf, h, err = Next(buf)
		if err != nil || h.BaseOffset != int64(i) || len(b) != h.Size() || cap(b) != len(b) {
			t.Fatalf("batch %d: %+v %v", i, h, err)
		}
	}
	if b, rest, _, err := Next(buf); b != nil || rest != nil || err != nil {
		t.Fatalf("end: %v %v %v", b, rest, err)
	}
	one := mustBuild(t, BuildOptions{}, []Record{{}})
	if _, rest, _, err := Next(one[:len(one)-1]); !errors.Is(err, ErrTruncated) || len(rest) != len(one)-1 {
		t.Fatalf("torn batch: %v", err)
	}
}

func TestHeaderLastSequenceWraps(t *testing.T) {
	h := Header{BaseSequence: 1<<31 - 2, LastOffsetDelta: 3}
	if got := h.LastSequence(); got != 1 {
		t.Fatalf("LastSequence %d, want 1", got)
	}
	h.BaseSequence = -1
	if got := h.LastSequence(); got != -1 {
		t.Fatalf("LastSequence %d, want -1", got)
	}
}
