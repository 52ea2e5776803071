package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// sweepState is a log built by a sweep case's setup and what the case
// remembers of it.
type sweepState struct {
	t        *testing.T
	fsys     *crashfs.FS
	fs       vfs.FS // the log's: fsys, or a faultfs.FS over it
	cfg      Config
	clock    *clock.Manual
	l        *Log
	batches  []appended // appended by setup and op, in order
	appended batchSet
	seq      int32 // next sequence of producer 5
	// before is the log as setup left it; result is whatever op wants
	// to tell check.
	start, end, rp int64
	result         int64
}

func (s *sweepState) open() {
	s.t.Helper()
	fsys := s.fs
	if fsys == nil {
		fsys = s.fsys
	}
	l, err := Open(powerLossDir, s.cfg, Options{FS: fsys, Clock: s.clock})
	if err != nil {
		s.t.Fatalf("open: %v", err)
	}
	s.l = l
}

// appendBatch appends batch i of the setup: epoch i/8, every third from
// the idempotent producer 5.
func (s *sweepState) appendBatch(i int) appended {
	s.t.Helper()
	spec := batchSpec{records: 1 + i%3, valueSize: 100, ts: int64(1000 + i), seed: uint64(i)}
	if i%3 == 0 {
		spec.idempotent, spec.pid, spec.seq = true, 5, s.seq
		s.seq += int32(spec.records)
	}
	b := makeBatch(s.t, spec)
	res, err := s.l.Append(b, int32(i/8))
	if err != nil {
		s.t.Fatalf("append %d: %v", i, err)
	}
	a := appended{base: res.BaseOffset, last: res.LastOffset, bytes: bytes.Clone(b)}
	s.batches = append(s.batches, a)
	s.appended.add(a.base, a.bytes)
	return a
}

// setupLog opens a log and appends n batches.
func setupLog(n int) func(s *sweepState) {
	return func(s *sweepState) {
		s.open()
		for i := range n {
			s.appendBatch(i)
		}
	}
}

// present returns the batches of s with last offset in [from, to).
func (s *sweepState) present(from, to int64) map[int64][]byte {
	out := map[int64][]byte{}
	for _, a := range s.batches {
		if a.last >= from && a.last < to {
			out[a.base] = a.bytes
		}
	}
	return out
}

type sweepCase struct {
	name  string
	cfg   func(*Config)
	setup func(s *sweepState)
	// op is the operation the power loss interrupts.
	op func(s *sweepState) error
	// check gets the log reopened after the crash (checkRecovered
	// passed) and its batches; done says whether op had returned.
	check func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool)
	// damaged says the log is left with damaged ranges, which reads
	// step over.
	damaged bool
}

// runSweep runs tc once per crash point: after k file system operations
// of op for k = 0, 1, … until op returns before the crash, and once more
// with the crash right after op returns.
func runSweep(t *testing.T, mode crashfs.Mode, seed uint64, tc sweepCase) {
	for k := int64(0); ; k++ {
		cfg := testConfig()
		cfg.FlushPolicy = FlushAlways
		cfg.SegmentBytes = 2000
		if tc.cfg != nil {
			tc.cfg(&cfg)
		}
		s := &sweepState{t: t, fsys: crashfs.New(mode, seed+uint64(k)), cfg: cfg, clock: clock.NewManual(testStart), appended: batchSet{}}
		tc.setup(s)
		if s.l != nil {
			s.start, s.end, s.rp = s.l.StartOffset(), s.l.EndOffset(), s.l.RecoveryPoint()
		}
		s.fsys.CrashAfter(k)
		if err := tc.op(s); err != nil {
			t.Fatalf("crash after %d operations: %v", k, err)
		}
		crashed := s.fsys.Crashed()
		done := crashed == nil
		if done {
			crashed = s.fsys.Crash()
		}
		if s.l != nil {
			_ = s.l.Close()
		}
		label := fmt.Sprintf("crash after %d operations", k)
		if done {
			label = fmt.Sprintf("crash after the %d operations", k)
		}
		l, err := Open(powerLossDir, s.cfg, Options{FS: crashed, Clock: s.clock})
		if err != nil {
			t.Fatalf("%s: open: %v", label, err)
		}
		got := checkRecoveredDamaged(t, l, s.appended, label, tc.damaged)
		t.Run(label, func(t *testing.T) { tc.check(t, s, l, got, done) })
		_ = l.Close()
		if done || t.Failed() {
			return
		}
	}
}

// checkKeptFrom checks that everything acknowledged from start to the log
// end before the operation is there, and the log end unchanged.
func checkKeptFrom(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, start int64) {
	t.Helper()
	checkKept(t, got, s.present(start, s.end), "acknowledged")
	if l.EndOffset() != s.end {
		t.Fatalf("log end %d, want %d", l.EndOffset(), s.end)
	}
}

func TestPowerLossDuringAnOperation(t *testing.T) {
	for _, tc := range []sweepCase{
		{
			name:  "append in a new leader epoch, rolling",
			setup: setupLog(12),
			op: func(s *sweepState) error {
				s.l.SetConfig(func() Config { c := s.cfg; c.SegmentBytes = 1; return c }())
				s.appendBatch(40)
				return nil
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				checkKept(t, got, s.present(0, s.end), "acknowledged before")
				if done {
					checkKept(t, got, s.present(0, s.end+10), "acknowledged")
					if e := l.LeaderEpochs(); e[len(e)-1] != (EpochEntry{Epoch: 5, StartOffset: s.end}) {
						t.Fatalf("leader epochs %v, want epoch 5 at %d last", e, s.end)
					}
				}
			},
		},
		{
			name: "append after a roll whose checkpoint failed",
			setup: func(s *sweepState) {
				ffs := faultfs.New(s.fsys)
				s.fs = ffs
				setupLog(5)(s)
				s.l.SetConfig(func() Config { c := s.cfg; c.SegmentBytes = 1; return c }())
				ffs.FailNextWrite(recoveryPointFile + vfs.TempSuffix)
				end := s.l.EndOffset()
				if _, err := s.l.Append(simpleBatch(s.t, 1, 1, 10, 0), 0); err == nil || s.l.EndOffset() != end {
					s.t.Fatalf("append rolling with a failing checkpoint: %v, end %d → %d", err, end, s.l.EndOffset())
				}
			},
			op: func(s *sweepState) error {
				s.appendBatch(7) // in the new segment, which nothing else fsynced the directory for
				return nil
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				checkKept(t, got, s.present(0, s.end), "acknowledged before")
				if done {
					checkKept(t, got, s.present(0, s.end+10), "acknowledged")
				}
			},
		},
		{
			name:  "idempotent append",
			setup: setupLog(13),
			op: func(s *sweepState) error {
				s.appendBatch(39) // producer 5, sequence s.seq
				return nil
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				checkKept(t, got, s.present(0, s.end), "acknowledged before")
				last := s.batches[len(s.batches)-1]
				_, done2 := got[last.base]
				if done && !done2 {
					t.Fatalf("acknowledged batch %d lost", last.base)
				}
				// The producer retries the batch: a duplicate when it is
				// there, appended otherwise, then goes on.
				retry := makeBatch(t, batchSpec{records: 1, valueSize: 100, ts: 1039, seed: 39, idempotent: true, pid: 5, seq: s.seq - 1})
				res, err := l.Append(retry, 4)
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if res.Duplicate != done2 || (done2 && res.BaseOffset != last.base) {
					t.Fatalf("retry: duplicate %v at %d; batch was there: %v at %d", res.Duplicate, res.BaseOffset, done2, last.base)
				}
				if _, err := l.Append(makeBatch(t, batchSpec{records: 1, idempotent: true, pid: 5, seq: s.seq}), 4); err != nil {
					t.Fatalf("next sequence: %v", err)
				}
			},
		},
		{
			name:  "delete records",
			setup: setupLog(30),
			op: func(s *sweepState) error {
				s.result = s.batches[17].base + 1 // inside a batch, segments below it go
				return s.l.DeleteRecordsBefore(s.result)
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				start := l.StartOffset()
				if start != s.start && start != s.result || done && start != s.result {
					t.Fatalf("log start %d, want %d (or %d before the operation returned)", start, s.result, s.start)
				}
				checkKeptFrom(t, s, l, got, start)
			},
		},
		{
			name:  "retention",
			setup: setupLog(30),
			op: func(s *sweepState) error {
				s.l.SetConfig(func() Config { c := s.cfg; c.RetentionBytes = 4000; return c }())
				n, err := s.l.EnforceRetention()
				if n == 0 && err == nil {
					return errors.New("retention deleted nothing")
				}
				s.result = s.l.StartOffset()
				return err
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				start := l.StartOffset()
				if start < s.start || start > s.result || done && start != s.result {
					t.Fatalf("log start %d, retention moved it from %d to %d", start, s.start, s.result)
				}
				checkKeptFrom(t, s, l, got, start)
			},
		},
		{
			name:  "truncate",
			setup: setupLog(30),
			op: func(s *sweepState) error {
				s.result = s.batches[9].base // several segments go, one is cut
				return s.l.TruncateTo(s.result)
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				end := l.EndOffset()
				if done && end != s.result {
					t.Fatalf("log end %d after a truncation to %d", end, s.result)
				}
				checkKept(t, got, s.present(0, s.result), "below the truncation point")
				if l.LeaderEpochs()[len(l.LeaderEpochs())-1].StartOffset >= end {
					t.Fatalf("leader epochs %v past the log end %d", l.LeaderEpochs(), end)
				}
			},
		},
		{
			name: "truncate below the log start",
			setup: func(s *sweepState) {
				setupLog(30)(s)
				if err := s.l.DeleteRecordsBefore(s.batches[20].base); err != nil {
					s.t.Fatal(err)
				}
			},
			op: func(s *sweepState) error {
				s.result = s.batches[3].base
				return s.l.TruncateTo(s.result)
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				start, end := l.StartOffset(), l.EndOffset()
				if start == s.result && end == s.result {
					if len(l.LeaderEpochs()) != 0 {
						t.Fatalf("leader epochs %v in an empty log", l.LeaderEpochs())
					}
					return
				}
				if done || start != s.start {
					t.Fatalf("log %d to %d, want empty at %d (or starting at %d before the operation returned)", start, end, s.result, s.start)
				}
				checkKept(t, got, s.present(start, end), "not truncated")
			},
		},
		{
			name: "flush",
			cfg:  func(c *Config) { c.FlushPolicy = FlushOS },
			setup: func(s *sweepState) {
				setupLog(30)(s)
				s.l.waitRolled()
			},
			op: func(s *sweepState) error { return s.l.Flush() },
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				checkKept(t, got, s.present(0, s.rp), "below the recovery point")
				if done {
					checkKept(t, got, s.present(0, s.end), "flushed")
				}
			},
		},
		{
			name: "close",
			cfg:  func(c *Config) { c.FlushPolicy = FlushOS },
			setup: func(s *sweepState) {
				setupLog(30)(s)
				s.l.waitRolled()
			},
			op: func(s *sweepState) error { return s.l.Close() },
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				if done {
					checkKept(t, got, s.present(0, s.end), "closed")
				}
			},
		},
		{
			name: "recovery after a killed process",
			setup: func(s *sweepState) {
				setupLog(30)(s)
				s.end = s.l.EndOffset()
				abandon(s.l)
				s.l = nil
				// The kill tore the write of a batch.
				segs := segmentNames(s)
				tornWrite(s, segs[len(segs)-1], s.batches[0].bytes[:70])
			},
			op: func(s *sweepState) error {
				l, err := Open(powerLossDir, s.cfg, Options{FS: s.fsys, Clock: s.clock})
				s.l = l
				return err
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				checkKept(t, got, s.present(0, s.end), "acknowledged")
			},
		},
		{
			name: "recovery of a damaged segment before others",
			setup: func(s *sweepState) {
				setupLog(30)(s)
				s.end = s.l.EndOffset()
				s.l.Close()
				s.l = nil
				// Flip a byte in the last batch of the second segment and
				// drop the recovery point: the closed segments were fsynced
				// (a roll does it), so the batch is damage and everything
				// else stays.
				segs := segmentNames(s)
				third, _, _ := parseSegmentName(segs[2])
				i := slices.IndexFunc(s.batches, func(a appended) bool { return a.last+1 == third })
				s.result = s.batches[i].base
				damage(s, segs[1], s.batches[i])
				if err := s.fsys.Remove(powerLossDir + "/" + recoveryPointFile); err != nil {
					s.t.Fatal(err)
				}
				if err := vfs.SyncDir(s.fsys, powerLossDir); err != nil {
					s.t.Fatal(err)
				}
			},
			op: func(s *sweepState) error {
				l, err := Open(powerLossDir, s.cfg, Options{FS: s.fsys, Clock: s.clock})
				s.l = l
				return err
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				bad := s.batches[slices.IndexFunc(s.batches, func(a appended) bool { return a.base == s.result })]
				checkKept(t, got, s.present(0, s.result), "before the damage")
				checkKept(t, got, s.present(bad.last+1, s.end), "after the damage")
				if ds := l.Damaged(); len(ds) != 1 || ds[0].From != bad.base || ds[0].To != bad.last+1 {
					t.Fatalf("damaged ranges %v, want the batch at %d-%d", ds, bad.base, bad.last)
				}
				if end := l.EndOffset(); end != s.end {
					t.Fatalf("log end %d, want %d", end, s.end)
				}
			},
			damaged: true,
		},
		{
			name: "recovery after a killed process under FlushOS",
			cfg:  func(c *Config) { c.FlushPolicy = FlushOS },
			setup: func(s *sweepState) {
				setupLog(30)(s)
				s.end = s.l.EndOffset()
				abandon(s.l)
				s.l = nil
			},
			op: func(s *sweepState) error {
				l, err := Open(powerLossDir, s.cfg, Options{FS: s.fsys, Clock: s.clock})
				s.l = l
				return err
			},
			check: func(t *testing.T, s *sweepState, l *Log, got map[int64][]byte, done bool) {
				if done {
					// Open's recovery point is the log end: all of it
					// must be on disk.
					checkKept(t, got, s.present(0, s.end), "recovered")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := testSeed(t)
			for _, mode := range []crashfs.Mode{crashfs.Strict, crashfs.Torn} {
				t.Run(mode.String(), func(t *testing.T) { runSweep(t, mode, seed, tc) })
			}
		})
	}
}

// segmentNames returns the log's segment data files, oldest first.
func segmentNames(s *sweepState) []string {
	s.t.Helper()
	entries, err := s.fsys.ReadDir(powerLossDir)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, ext, ok := parseSegmentName(e.Name()); ok && ext == logExt {
			out = append(out, e.Name())
		}
	}
	return out
}

// damage flips a byte in the middle of batch a, which ends the segment
// file name, durably.
func damage(s *sweepState, name string, a appended) {
	s.t.Helper()
	f, err := s.fsys.OpenFile(powerLossDir+"/"+name, os.O_RDWR, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	pos := fi.Size() - int64(len(a.bytes)) + 40
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		s.t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, pos); err != nil {
		s.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		s.t.Fatal(err)
	}
}

// tornWrite appends part of a batch to the file name of the log
// directory, durably: what a process killed in the middle of a write
// leaves.
func tornWrite(s *sweepState, name string, part []byte) {
	s.t.Helper()
	f, err := s.fsys.OpenFile(powerLossDir+"/"+name, os.O_RDWR, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if _, err := f.WriteAt(part, fi.Size()); err != nil {
		s.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		s.t.Fatal(err)
	}
}
