package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// fuzzFixture is a one-segment log, its files and the batches in it.
type fuzzFixture struct {
	files   map[string][]byte // file name → contents, no recovery point
	segment string
	batches []appended
	ends    []int64 // end position of each batch in the segment
}

func newFuzzFixture(tb testing.TB) *fuzzFixture {
	dir := tb.TempDir()
	cfg := testConfig()
	l, err := Open(dir, cfg, Options{Clock: clock.NewManual(testStart)})
	if err != nil {
		tb.Fatal(err)
	}
	fx := &fuzzFixture{files: map[string][]byte{}, segment: segmentName(0, logExt)}
	pos := int64(0)
	for i := range 24 {
		b := makeBatch(tb, batchSpec{records: 1 + i%3, valueSize: 40 + 30*(i%5), ts: int64(1000 + i), seed: uint64(i),
			idempotent: i%2 == 0, pid: 3, seq: int32(i / 2 * 2)})
		if i%2 == 0 {
			b = makeBatch(tb, batchSpec{records: 2, valueSize: 40 + 30*(i%5), ts: int64(1000 + i), seed: uint64(i), idempotent: true, pid: 3, seq: int32(i)})
		}
		res, err := l.Append(b, int32(i/8))
		if err != nil {
			tb.Fatal(err)
		}
		fx.batches = append(fx.batches, appended{base: res.BaseOffset, last: res.LastOffset, bytes: bytes.Clone(b)})
		pos += int64(len(b))
		fx.ends = append(fx.ends, pos)
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == recoveryPointFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		fx.files[e.Name()] = b
	}
	return fx
}

// fuzzTempDir prefers a memory file system: recovery fsyncs.
func fuzzTempDir(tb testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "mqlogfuzz"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return tb.TempDir()
}

// FuzzRecovery damages the tail of a segment (mode even: XOR payload into
// the last bytes, ending pos%4096 bytes before the end; odd: append
// payload) and checks that recovery keeps every batch before the damage
// byte for byte and returns nothing past it.
func FuzzRecovery(f *testing.F) {
	fx := newFuzzFixture(f)
	f.Add(byte(0), uint16(0), []byte{0xff})
	f.Add(byte(0), uint16(100), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add(byte(1), uint16(0), []byte("garbage"))
	f.Add(byte(1), uint16(0), make([]byte, 100))
	base := fuzzTempDir(f)
	f.Fuzz(func(t *testing.T, mode byte, pos uint16, payload []byte) {
		fuzzRecoveryOnce(t, fx, base, mode, pos, payload)
	})
}

func fuzzRecoveryOnce(t *testing.T, fx *fuzzFixture, base string, mode byte, pos uint16, payload []byte) {
	seg, damage, ok := fx.damage(mode, pos, payload)
	if !ok {
		return
	}
	dir, err := os.MkdirTemp(base, "log")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for name, b := range fx.files {
		if name == fx.segment {
			b = seg
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(dir, testConfig(), Options{Clock: clock.NewManual(testStart)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer l.Close()
	fx.check(t, l, damage, mode)
}

// FuzzRecoveryPowerLoss is FuzzRecovery on a crashfs.FS (strict or torn,
// from bit 1 of mode) with a power loss after crashAt file system
// operations of the recovery; the log recovered again on the rebooted
// file system must pass the same checks.
func FuzzRecoveryPowerLoss(f *testing.F) {
	fx := newFuzzFixture(f)
	f.Add(byte(0), uint16(0), []byte{0xff}, uint16(3))
	f.Add(byte(2), uint16(100), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, uint16(5))
	f.Add(byte(1), uint16(0), []byte("garbage"), uint16(1))
	f.Add(byte(3), uint16(0), make([]byte, 100), uint16(8))
	f.Add(byte(2), uint16(700), []byte{0x80}, uint16(12))
	f.Fuzz(func(t *testing.T, mode byte, pos uint16, payload []byte, crashAt uint16) {
		seg, damage, ok := fx.damage(mode, pos, payload)
		if !ok {
			return
		}
		fsys := crashfs.New(crashfs.Mode(mode>>1&1), uint64(crashAt))
		const dir = "/fuzz/topic-0"
		if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range fx.files {
			if name == fx.segment {
				b = seg
			}
			if err := vfs.WriteFileAtomic(fsys, dir+"/"+name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fsys.CrashAfter(int64(crashAt))
		l, err := Open(dir, testConfig(), Options{FS: fsys, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		crashed := fsys.Crashed() // in the recovery, not in the checks' append
		fsys.CrashAfter(-1)
		fx.check(t, l, damage, mode)
		l.Close()
		if crashed == nil {
			return
		}
		l, err = Open(dir, testConfig(), Options{FS: crashed, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatalf("open after a crash in the recovery: %v", err)
		}
		defer l.Close()
		fx.check(t, l, damage, mode)
	})
}

// damage returns the fixture's segment damaged as FuzzRecovery says and
// the position of the first changed byte; ok is false when the input
// changes nothing.
func (fx *fuzzFixture) damage(mode byte, pos uint16, payload []byte) (seg []byte, damage int64, ok bool) {
	seg = bytes.Clone(fx.files[fx.segment])
	size := int64(len(seg))
	damage = size // first changed byte
	if mode%2 == 1 {
		if len(payload) == 0 {
			return nil, 0, false
		}
		return append(seg, payload...), damage, true
	}
	if len(payload) > 4096 {
		payload = payload[:4096]
	}
	end := size - int64(pos)%min(size, 4096)
	start := max(end-int64(len(payload)), 0)
	for i := start; i < end; i++ {
		x := payload[i-(end-int64(len(payload)))]
		if x != 0 && damage == size {
			damage = i
		}
		seg[i] ^= x
	}
	return seg, damage, true
}

// check checks a log recovered from the fixture damaged at position
// damage: every batch before the damage kept byte for byte, nothing past
// it, and the log goes on.
func (fx *fuzzFixture) check(t *testing.T, l *Log, damage int64, mode byte) {
	t.Helper()
	intact := 0 // batches wholly before the damage
	for intact < len(fx.batches) && fx.ends[intact] <= damage {
		intact++
	}
	end := l.EndOffset()
	kept := 0 // batches recovered
	for kept < len(fx.batches) && fx.batches[kept].last < end {
		kept++
	}
	if kept < intact {
		t.Fatalf("end offset %d loses intact batches (%d intact before position %d)", end, intact, damage)
	}
	if kept > 0 && fx.batches[kept-1].last+1 != end {
		t.Fatalf("end offset %d is not a batch boundary", end)
	}
	if kept == len(fx.batches) && mode%2 == 1 && end != fx.batches[kept-1].last+1 {
		t.Fatalf("appended garbage became offsets: end %d", end)
	}
	if kept == 0 && end != 0 {
		t.Fatalf("end offset %d with nothing kept", end)
	}
	for i := range kept {
		a := fx.batches[i]
		got, err := l.ReadBytes(a.base, end, 1)
		if err != nil {
			t.Fatalf("read batch %d: %v", a.base, err)
		}
		if i < intact {
			if !bytes.Equal(got, a.bytes) {
				t.Fatalf("intact batch %d differs", a.base)
			}
			continue
		}
		// A damaged batch may survive only when the damage is in a
		// field the CRC does not cover and recovery cannot check:
		// the partition leader epoch.
		if err := record.CheckCRC(got); err != nil {
			t.Fatalf("damaged batch %d returned: %v", a.base, err)
		}
		if len(got) != len(a.bytes) || !bytes.Equal(got[:12], a.bytes[:12]) || !bytes.Equal(got[16:], a.bytes[16:]) {
			t.Fatalf("damaged batch %d returned with changes beyond the leader epoch", a.base)
		}
	}
	if b, err := l.ReadBytes(end, end+1, 1<<20); err != nil || len(b) != 0 {
		t.Fatalf("read at the end: %d bytes, %v", len(b), err)
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 10, 0), 0); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
}
