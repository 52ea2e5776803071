package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// batchPos returns the segment file and position of fixture batch j.
func (f *recoveryFixture) batchPos(j int) (string, int64) {
	for _, name := range f.segs {
		var pos int64
		for _, i := range f.batchesIn(name) {
			if i == j {
				return name, pos
			}
			pos += int64(len(f.want[i].bytes))
		}
	}
	panic("no such batch")
}

// corrupt applies change to the bytes of segment file name.
func (f *recoveryFixture) corrupt(t *testing.T, name string, change func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(f.path(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path(name), change(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkDamaged reads every batch of want: the ones in damaged (by index)
// must fail with a DamagedError, the others read back intact; and a
// sequential read from the start delivers every good batch before the
// first damaged one, then stops with the error.
func checkDamaged(t *testing.T, l *Log, want []appended, damaged map[int]bool) {
	t.Helper()
	for i, a := range want {
		got, err := l.ReadBytes(a.base, l.EndOffset(), 1)
		if damaged[i] {
			var de *DamagedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("read of damaged batch %d (offset %d): %v, want a DamagedError", i, a.base, err)
			}
			if de.Damage.From > a.base || de.Damage.To <= a.last {
				t.Fatalf("read of batch %d (offsets %d-%d): damage %v does not cover it", i, a.base, a.last, de.Damage)
			}
			continue
		}
		if err != nil {
			t.Fatalf("read of good batch %d (offset %d): %v", i, a.base, err)
		}
		if string(got) != string(a.bytes) {
			t.Fatalf("read of good batch %d (offset %d): bytes differ", i, a.base)
		}
	}
	var next int
	for off := want[0].base; ; {
		b, err := l.ReadBytes(off, l.EndOffset(), 1<<20)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("sequential read at %d: %v", off, err)
			}
			if !damaged[next] {
				t.Fatalf("sequential read stopped at %d (batch %d) with %v, but that batch is good", off, next, err)
			}
			return
		}
		if len(b) == 0 {
			if next != len(want) {
				t.Fatalf("sequential read ended at %d after %d of %d batches", off, next, len(want))
			}
			return
		}
		for _, base := range batchOffsets(t, b) {
			if damaged[next] || want[next].base != base {
				t.Fatalf("sequential read returned the batch at %d, want batch %d at %d (damaged %v)", base, next, want[next].base, damaged[next])
			}
			next++
		}
		off = lastOffsetOf(t, b) + 1
	}
}

// readUntilError reads the log from its start as a consumer would, until
// the end or an error.
func readUntilError(t *testing.T, l *Log) {
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.ReadBytes(off, l.EndOffset(), 1<<20)
		if err != nil || len(b) == 0 {
			return
		}
		off = lastOffsetOf(t, b) + 1
	}
}

// readEachOffset reads one batch at every offset of the log, as consumers
// starting anywhere would.
func readEachOffset(t *testing.T, l *Log) {
	for off := l.StartOffset(); off < l.EndOffset(); off++ {
		l.ReadBytes(off, l.EndOffset(), 1)
	}
}

func TestDamageIsFoundContainedAndNeverServed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool
		// damage changes the fixture's files and returns the batches it
		// damaged (indexes into the fixture).
		damage func(t *testing.T, f *recoveryFixture) []int
		// find makes the log find the damage (nil: Open must).
		find func(t *testing.T, l *Log)
		// opened is the reason Open logs for the damage it finds; "" when
		// Open cannot know.
		reason string
	}{
		{name: "bytes flipped in a closed segment after a clean shutdown, found by a read",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				name, pos := f.batchPos(5)
				f.corrupt(t, name, func(b []byte) []byte {
					for i := range 16 {
						b[pos+80+int64(i)] ^= 0xff
					}
					return b
				})
				return []int{5}
			},
			find: readUntilError},
		{name: "bytes flipped in a closed segment, found by the scrubber",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				name, pos := f.batchPos(12)
				f.corrupt(t, name, func(b []byte) []byte { b[pos+100] ^= 1; return b })
				return []int{12}
			},
			find: func(t *testing.T, l *Log) {
				st, err := l.Scrub(context.Background(), nil)
				if err != nil || st.Damaged != 1 {
					t.Fatalf("scrub: %+v, %v; want 1 damaged range", st, err)
				}
				if n := l.Unchecked(); n != 0 {
					t.Fatalf("%d bytes unchecked after a scrub", n)
				}
			}},
		{name: "a batch's length garbled: the batches after it are found again",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				name, pos := f.batchPos(8)
				f.corrupt(t, name, func(b []byte) []byte { putUint32(b[pos+8:], 0x00ffff00); return b })
				return []int{8}
			},
			find: readUntilError},
		{name: "last offset delta lowered in a closed segment's last batch, found by a read",
			// A header walk that trusted it would step past the read's
			// offset into the next segment and serve the batch there.
			damage: func(t *testing.T, f *recoveryFixture) []int {
				in := f.batchesIn(f.segs[1])
				j := in[len(in)-1]
				name, pos := f.batchPos(j)
				f.corrupt(t, name, func(b []byte) []byte { b[pos+23] ^= 0x80; return b })
				return []int{j}
			},
			find: readEachOffset},
		{name: "closed segment cut short", reason: "it was sealed at",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				in := f.batchesIn(f.segs[1])
				name, pos := f.batchPos(in[len(in)-2])
				if err := os.Truncate(f.path(name), pos+20); err != nil {
					t.Fatal(err)
				}
				return in[len(in)-2:]
			}},
		{name: "closed segment file gone", reason: "segment file missing",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				os.Remove(f.path(f.segs[2]))
				return f.batchesIn(f.segs[2])
			}},
		{name: "bad batch in a middle segment without a recovery point", reason: "crc",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				os.Remove(f.path(recoveryPointFile))
				in := f.batchesIn(f.segs[1])
				j := in[len(in)-1]
				name, pos := f.batchPos(j)
				f.corrupt(t, name, func(b []byte) []byte { b[pos+30] ^= 1; return b })
				return []int{j}
			}},
		{name: "byte flipped in the last batch after a clean shutdown", reason: "crc",
			damage: func(t *testing.T, f *recoveryFixture) []int {
				j := len(f.want) - 1
				name, pos := f.batchPos(j)
				f.corrupt(t, name, func(b []byte) []byte { b[pos+int64(len(f.want[j].bytes))-10] ^= 0x40; return b })
				return []int{j}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRecoveryFixture(t, tc.crash)
			bad := tc.damage(t, f)
			damaged := map[int]bool{}
			for _, i := range bad {
				damaged[i] = true
			}
			capture := &logCapture{}
			f.tl.opts.Logger = slog.New(capture)
			f.tl.open()
			l := f.tl.Log
			if tc.find == nil {
				if !capture.has("damaged range found") || !capture.has(tc.reason) {
					t.Fatalf("Open logged no damage with %q: %q", tc.reason, capture.lines)
				}
			} else {
				if len(l.Damaged()) != 0 {
					t.Fatalf("Open knew of damage it cannot have seen: %v", l.Damaged())
				}
				tc.find(t, l)
				if !capture.has("damaged range found") {
					t.Fatalf("no damage logged: %q", capture.lines)
				}
			}
			ds := l.Damaged()
			if len(ds) != 1 {
				t.Fatalf("damaged ranges %v, want 1", ds)
			}
			d := ds[0]
			if first, last := f.want[bad[0]], f.want[bad[len(bad)-1]]; d.From != first.base || d.To != last.last+1 {
				t.Fatalf("damage %v, want offsets %d-%d", d, first.base, last.last)
			}
			if l.DamageFound() != 1 {
				t.Fatalf("DamageFound %d, want 1", l.DamageFound())
			}
			checkDamaged(t, l, f.want, damaged)

			// The damage stays known across a restart, found again by no
			// one: Open reads it from the log's directory.
			f.tl.reopen()
			if got := f.tl.Damaged(); len(got) != 1 || got[0].From != d.From || got[0].To != d.To {
				t.Fatalf("after reopen: damaged ranges %v, want %v", got, d)
			}
			checkDamaged(t, f.tl.Log, f.want, damaged)

			// The log goes on: appends after the damage are served.
			more := f.tl.appendN(3, 100)
			for _, a := range more {
				if got, err := f.tl.ReadBytes(a.base, f.tl.EndOffset(), 1); err != nil || string(got) != string(a.bytes) {
					t.Fatalf("read of new batch %d: %v", a.base, err)
				}
			}
		})
	}
}

func TestSkippedDamageIsReadAsAGap(t *testing.T) {
	f := newRecoveryFixture(t, false)
	name, pos := f.batchPos(7)
	f.corrupt(t, name, func(b []byte) []byte { b[pos+90] ^= 0x10; return b })
	f.tl.open()
	if _, err := f.tl.Scrub(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tl.SkipDamaged(f.want[6].base); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("skip at a good offset: %v, want ErrOffsetOutOfRange", err)
	}
	d, err := f.tl.SkipDamaged(f.want[7].base)
	if err != nil || !d.Skipped {
		t.Fatalf("skip: %v, %v", d, err)
	}
	good := append(append([]appended(nil), f.want[:7]...), f.want[8:]...)
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.tl.reopen()
		}
		checkDamaged(t, f.tl.Log, good, nil)
		// A read inside the skipped range starts after it.
		got, err := f.tl.ReadBytes(f.want[7].base, f.tl.EndOffset(), 1)
		if err != nil || string(got) != string(f.want[8].bytes) {
			t.Fatalf("read at a skipped offset: %v; want the batch after the range", err)
		}
	}
}

func TestDeletingRecordsPastDamageForgetsIt(t *testing.T) {
	f := newRecoveryFixture(t, false)
	name, pos := f.batchPos(3)
	f.corrupt(t, name, func(b []byte) []byte { b[pos+90] ^= 0x10; return b })
	f.tl.open()
	if _, err := f.tl.Scrub(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(f.tl.Damaged()) != 1 {
		t.Fatalf("damage %v", f.tl.Damaged())
	}
	if err := f.tl.DeleteRecordsBefore(f.want[4].base); err != nil {
		t.Fatal(err)
	}
	if len(f.tl.Damaged()) != 0 {
		t.Fatalf("damage %v after deleting the records before its end", f.tl.Damaged())
	}
	f.tl.reopen()
	if len(f.tl.Damaged()) != 0 {
		t.Fatalf("damage %v after reopen", f.tl.Damaged())
	}
	checkContents(t, f.tl.Log, f.want[4:])
}

func TestScrubIsPacedAndStops(t *testing.T) {
	f := newRecoveryFixture(t, false)
	f.tl.open()
	total := f.tl.Unchecked()
	if total == 0 {
		t.Fatal("nothing to check after a clean reopen")
	}
	var asked int
	stop := errors.New("stop")
	_, err := f.tl.Scrub(context.Background(), func(ctx context.Context, n int) error {
		asked += n
		if asked > 2*scrubChunk {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("scrub: %v, want the pace's error", err)
	}
	if left := f.tl.Unchecked(); left == 0 || left == total {
		t.Fatalf("%d of %d bytes unchecked after a stopped scrub; want some progress kept", left, total)
	}
	if _, err := f.tl.Scrub(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if left := f.tl.Unchecked(); left != 0 {
		t.Fatalf("%d bytes unchecked", left)
	}
	f.tl.ForgetChecks()
	if f.tl.Unchecked() == 0 {
		t.Fatal("ForgetChecks left everything checked")
	}
}

func TestOffsetForTimestampAnswersPastDamage(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	tl := openTestLog(t, cfg)
	var want []appended
	for i := range 20 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 1, 100, 1000*int64(i+1)), 0))
	}
	tl.Close()
	tl.Log = nil
	f := &recoveryFixture{tl: tl, want: want, segs: segmentFiles(t, tl.dir)}
	name, pos := f.batchPos(5)
	f.corrupt(t, name, func(b []byte) []byte { b[pos+70] ^= 2; return b })
	tl.open()
	if _, err := tl.Scrub(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	off, ts, err := tl.OffsetForTimestamp(5500) // batch 5 holds 6000
	if err != nil || off != want[6].base || ts != 7000 {
		t.Fatalf("OffsetForTimestamp into the damage = %d, %d, %v; want %d, 7000", off, ts, err, want[6].base)
	}
	if off, _, err := tl.OffsetForTimestamp(3500); err != nil || off != want[3].base {
		t.Fatalf("OffsetForTimestamp before the damage = %d, %v; want %d", off, err, want[3].base)
	}
}

// TestRandomDamageNeverServesWrongBytes damages a log at random (bytes
// flipped anywhere in its segments, a closed segment cut short, after a
// clean shutdown or a crash) and checks what readers get: every batch is
// either its exact bytes, or a DamagedError, or — only for a torn tail cut
// off by recovery — gone past the log end; every batch whose bytes changed
// is never served; and every damaged range holds at least one of them.
func TestRandomDamageNeverServesWrongBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	runs := 40
	if testing.Short() {
		runs = 8
	}
	for run := range runs {
		t.Run(fmt.Sprint(run), func(t *testing.T) { randomDamageRun(t, rng) })
	}
}

func randomDamageRun(t *testing.T, rng *rand.Rand) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500 + rng.Int64N(3000)
	tl := openTestLog(t, cfg)
	var want []appended
	epoch := int32(0)
	for i := range 30 + rng.IntN(50) {
		if rng.IntN(10) == 0 {
			epoch++
		}
		ts := tl.clock.Now().UnixMilli()
		want = append(want, tl.append(simpleBatch(t, uint64(i), 1+rng.IntN(4), 20+rng.IntN(300), ts), epoch))
	}
	crash := rng.IntN(2) == 0
	if crash {
		tl.waitRolled() // so that the recovery point checkpoint read below stays
		tl.crash()
	} else {
		tl.Close()
		tl.Log = nil
	}
	var durable int64 // what recovery will trust
	if b, err := os.ReadFile(filepath.Join(tl.dir, recoveryPointFile)); err == nil {
		durable, _ = decodeOffsetCheckpoint("recovery-point", b)
	}
	f := &recoveryFixture{tl: tl, want: want, segs: segmentFiles(t, tl.dir)}

	// changed[i]: batch i's bytes on disk differ from what was appended.
	changed := map[int]bool{}
	where := func(j int) (string, int64, int64) {
		name, pos := f.batchPos(j)
		return name, pos, pos + int64(len(want[j].bytes))
	}
	for range 1 + rng.IntN(3) {
		j := rng.IntN(len(want))
		name, pos, end := where(j)
		at := pos + rng.Int64N(end-pos)
		f.corrupt(t, name, func(b []byte) []byte { b[at] ^= byte(1 + rng.IntN(255)); return b })
		changed[j] = true
		t.Logf("batch %d (offset %d): byte %d of %s flipped", j, want[j].base, at-pos, name)
	}
	if !crash && len(f.segs) > 2 && rng.IntN(4) == 0 {
		name := f.segs[rng.IntN(len(f.segs)-1)]
		in := f.batchesIn(name)
		k := rng.IntN(len(in))
		_, pos, end := where(in[k])
		cut := pos + rng.Int64N(end-pos)
		if err := os.Truncate(f.path(name), cut); err != nil {
			t.Fatal(err)
		}
		for _, j := range in[k:] {
			changed[j] = true
		}
		t.Logf("%s cut at %d, in batch %d", name, cut, in[k])
	}

	capture := &logCapture{}
	tl.opts.Logger = slog.New(capture)
	t.Cleanup(func() {
		if t.Failed() {
			for _, line := range capture.lines {
				t.Log(line)
			}
		}
	})
	tl.open()
	if rng.IntN(2) == 0 {
		if _, err := tl.Scrub(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for pass := range 2 {
		l := tl.Log
		end := l.EndOffset()
		for i, a := range want {
			if a.base >= end {
				// Cut off by recovery as a torn tail: only a changed batch
				// past the recovery point, and what follows it.
				if !cutOK(want, changed, i, durable, crash) {
					t.Fatalf("pass %d: batch %d (offset %d) is past the log end %d but was good", pass, i, a.base, end)
				}
				continue
			}
			got, err := l.ReadBytes(a.base, end, 1)
			var de *DamagedError
			switch {
			case err == nil && string(got) == string(a.bytes):
				if changed[i] {
					t.Fatalf("pass %d: batch %d (offset %d) changed on disk, but a read served it", pass, i, a.base)
				}
			case err == nil:
				// Nothing covers a leader epoch flipped lower, nor one
				// flipped in a batch recovery cannot trust (past the
				// checkpointed recovery point), which looks like a new
				// epoch.
				lower := epochOnly(got, a.bytes) && epochOf(got) >= 0 && epochOf(got) < epochOf(a.bytes)
				if !lower && (!crash || a.base < durable || !epochOnly(got, a.bytes)) {
					t.Fatalf("pass %d: batch %d (offset %d): a read served %d bytes that differ from the %d appended (damage %v)", pass, i, a.base, len(got), len(a.bytes), l.Damaged())
				}
			case errors.As(err, &de):
				if !rangeHoldsChanged(de.Damage, want, changed) {
					t.Fatalf("pass %d: batch %d (offset %d) reported in damage %v, which holds no changed batch", pass, i, a.base, de.Damage)
				}
			default:
				t.Fatalf("pass %d: batch %d (offset %d): %v (damage %v)", pass, i, a.base, err, l.Damaged())
			}
		}
		for _, d := range l.Damaged() {
			if !rangeHoldsChanged(d, want, changed) {
				t.Fatalf("pass %d: damage %v holds no changed batch", pass, d)
			}
		}
		tl.reopen()
	}
}

// cutOK reports whether recovery may have cut batch i off: it changed, or
// after a crash a changed batch at or before it lies past the recovery
// point (a torn tail takes what follows it).
func cutOK(want []appended, changed map[int]bool, i int, durable int64, crash bool) bool {
	if changed[i] {
		return true
	}
	for j := i; crash && j >= 0; j-- {
		if changed[j] && want[j].base >= durable {
			return true
		}
	}
	return false
}

// rangeHoldsChanged reports whether damage d covers a changed batch.
func rangeHoldsChanged(d Damage, want []appended, changed map[int]bool) bool {
	for i, a := range want {
		if changed[i] && a.base < d.To && a.last >= d.From {
			return true
		}
	}
	return false
}

// epochOnly reports whether got is want but for its partition leader
// epoch.
func epochOnly(got, want []byte) bool {
	return len(got) == len(want) && string(got[:12]) == string(want[:12]) && string(got[16:]) == string(want[16:])
}

func epochOf(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[12:])) }
