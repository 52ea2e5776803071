package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
)

var testStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// batchSpec describes a test batch.
type batchSpec struct {
	records   int
	valueSize int
	ts        int64 // base timestamp, ms
	tsStep    int64 // timestamp delta between records
	seed      uint64

	idempotent    bool
	transactional bool
	pid           int64
	epoch         int16
	seq           int32
}

// makeBatch builds a valid uncompressed batch at offset 0.
func makeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	if s.records == 0 {
		s.records = 1
	}
	rng := rand.New(rand.NewPCG(s.seed, 7))
	recs := make([]record.Record, s.records)
	for i := range recs {
		v := make([]byte, s.valueSize)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = record.Record{TimestampDelta: int64(i) * s.tsStep, Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
	}
	b, err := record.Build(record.BuildOptions{
		BaseTimestamp: s.ts,
		Idempotent:    s.idempotent,
		ProducerID:    s.pid,
		ProducerEpoch: s.epoch,
		BaseSequence:  s.seq,
		Transactional: s.transactional,
	}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Validate(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func simpleBatch(t testing.TB, seed uint64, records, valueSize int, ts int64) []byte {
	return makeBatch(t, batchSpec{records: records, valueSize: valueSize, ts: ts, seed: seed})
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 256
	return cfg
}

type testLog struct {
	*Log
	t     testing.TB
	dir   string
	cfg   Config
	opts  Options
	clock *clock.Manual
}

func openTestLog(t testing.TB, cfg Config) *testLog {
	t.Helper()
	return openTestLogWith(t, cfg, Options{})
}

// openTestLogWith is openTestLog with options (its clock is the test's).
func openTestLogWith(t testing.TB, cfg Config, opts Options) *testLog {
	t.Helper()
	clock := clock.NewManual(testStart)
	opts.Clock = clock
	tl := &testLog{t: t, dir: filepath.Join(t.TempDir(), "topic-0"), cfg: cfg, clock: clock,
		opts: opts}
	tl.reopen()
	t.Cleanup(func() { _ = tl.Log.Close() })
	return tl
}

// reopen closes (when open) and opens the log again.
func (tl *testLog) reopen() {
	tl.t.Helper()
	if tl.Log != nil {
		if err := tl.Log.Close(); err != nil {
			tl.t.Fatalf("close: %v", err)
		}
	}
	l, err := Open(tl.dir, tl.cfg, tl.opts)
	if err != nil {
		tl.t.Fatalf("open: %v", err)
	}
	tl.Log = l
}

// crash abandons the log as a killed process would: no flush, no
// checkpoints, files closed.
func (tl *testLog) crash() {
	abandon(tl.Log)
	tl.Log = nil
}

func (tl *testLog) open() {
	tl.t.Helper()
	l, err := Open(tl.dir, tl.cfg, tl.opts)
	if err != nil {
		tl.t.Fatalf("open: %v", err)
	}
	tl.Log = l
}

// appended is a batch as stored: its bytes after Append patched them.
type appended struct {
	base, last int64
	bytes      []byte
}

func (tl *testLog) append(b []byte, epoch int32) appended {
	tl.t.Helper()
	res, err := tl.Append(b, epoch)
	if err != nil {
		tl.t.Fatalf("append: %v", err)
	}
	if res.Duplicate {
		tl.t.Fatalf("append: unexpected duplicate")
	}
	return appended{base: res.BaseOffset, last: res.LastOffset, bytes: bytes.Clone(b)}
}

// appendN appends n batches of 1..4 records and valueSize bytes.
func (tl *testLog) appendN(n, valueSize int) []appended {
	tl.t.Helper()
	var out []appended
	for i := range n {
		ts := tl.clock.Now().UnixMilli()
		out = append(out, tl.append(simpleBatch(tl.t, uint64(len(out)+i*1000), 1+i%4, valueSize, ts), 0))
	}
	return out
}

// checkContents reads the whole log batch by batch and compares it with want.
func checkContents(t testing.TB, l *Log, want []appended) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	if got, exp := l.EndOffset(), want[len(want)-1].last+1; got != exp {
		t.Fatalf("end offset %d, want %d", got, exp)
	}
	for _, a := range want {
		got, err := l.ReadBytes(a.base, l.EndOffset(), 1)
		if err != nil {
			t.Fatalf("read %d: %v", a.base, err)
		}
		if !bytes.Equal(got, a.bytes) {
			t.Fatalf("read %d: %d bytes differ from the %d appended", a.base, len(got), len(a.bytes))
		}
	}
	// And the whole log in one pass with large reads.
	var all []byte
	for off := want[0].base; off < l.EndOffset(); {
		b, err := l.ReadBytes(off, l.EndOffset(), 1<<20)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("empty read at %d below end %d", off, l.EndOffset())
		}
		all = append(all, b...)
		off = lastOffsetOf(t, b) + 1
	}
	var exp []byte
	for _, a := range want {
		exp = append(exp, a.bytes...)
	}
	if !bytes.Equal(all, exp) {
		t.Fatalf("sequential read of %d bytes differs from the %d appended", len(all), len(exp))
	}
}

func lastOffsetOf(t testing.TB, b []byte) int64 {
	t.Helper()
	last := int64(-1)
	for len(b) > 0 {
		_, rest, h, err := record.Next(b)
		if err != nil {
			t.Fatalf("bad batch in read: %v", err)
		}
		last = h.LastOffset()
		b = rest
	}
	return last
}

func batchOffsets(t testing.TB, b []byte) []int64 {
	t.Helper()
	var out []int64
	for len(b) > 0 {
		_, rest, h, err := record.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.BaseOffset)
		b = rest
	}
	return out
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".log" {
			out = append(out, e.Name())
		}
	}
	return out
}

func mustErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func putUint32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }

type recordHeader = record.Header

func nextBatch(b []byte) ([]byte, []byte, record.Header, error) { return record.Next(b) }

func validateBatch(b []byte) (record.Header, error) { return record.Validate(b) }

func itoa(n int64) string { return fmt.Sprint(n) }
