package log

import (
	"testing"
	"time"
)

// FuzzDamageCheckpoint feeds the damaged-ranges decoder arbitrary bytes:
// it must never panic, and what it accepts must encode back to ranges
// that decode the same.
func FuzzDamageCheckpoint(f *testing.F) {
	f.Add(encodeDamage([]Damage{{From: 10, To: 20, Segment: segmentName(0, logExt), Position: 512, Length: 300,
		Reason: "record: crc mismatch", Detected: time.UnixMilli(1700000000000)}}))
	f.Add(encodeDamage([]Damage{{From: 5, To: 6, Segment: segmentName(5, logExt), Skipped: true}, {From: 9, To: 99, Segment: segmentName(9, logExt)}}))
	f.Add([]byte("mq damaged-ranges 1\n1\n1 2 00000000000000000000.log 0 0 0 0\n"))
	f.Add([]byte("mq damaged-ranges 1\n0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := decodeDamage(b)
		if err != nil {
			return
		}
		again, err := decodeDamage(encodeDamage(ds))
		if err != nil || len(again) != len(ds) {
			t.Fatalf("re-decoding %v: %v, %v", ds, again, err)
		}
		for i := range ds {
			if again[i].From != ds[i].From || again[i].To != ds[i].To || again[i].Segment != ds[i].Segment || again[i].Skipped != ds[i].Skipped {
				t.Fatalf("range %d: %v became %v", i, ds[i], again[i])
			}
		}
	})
}

// FuzzSealedCheckpoint does the same for the sealed-segments decoder.
func FuzzSealedCheckpoint(f *testing.F) {
	f.Add(encodeSealed([]sealedSegment{{base: 0, size: 4096, next: 100}, {base: 100, size: 10, next: 101}}))
	f.Add([]byte("mq sealed-segments 1\n0\n"))
	f.Add([]byte("mq sealed-segments 1\n1\n5 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		segs, err := decodeSealed(b)
		if err != nil {
			return
		}
		for i, s := range segs {
			if s.next < s.base || i > 0 && s.base < segs[i-1].next {
				t.Fatalf("accepted out-of-order segments %v", segs)
			}
		}
		again, err := decodeSealed(encodeSealed(segs))
		if err != nil || len(again) != len(segs) {
			t.Fatalf("re-decoding %v: %v, %v", segs, again, err)
		}
	})
}
