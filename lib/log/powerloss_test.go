package log

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// Tests of durability against power loss: the log runs on a crashfs.FS,
// whose crash keeps only what was fsynced (and, in crashfs.Torn mode,
// random parts of the rest). The child-process test in crash_test.go cannot see a
// missing fsync: the page cache survives a killed process.

const powerLossDir = "/data/topic-0"

// powerLossCheckpoints is the Checkpoints file of the tabled runs.
const powerLossCheckpoints = "/data/log-checkpoints"

var longFlag = flag.Bool("long", false, "repeat the randomized power-loss tests with many seeds")

// powerLossRuns calls run once, or with -long 40 times, each with its own
// seed, which -seed replays.
func powerLossRuns(t *testing.T, run func(t *testing.T, seed uint64)) {
	seed := testSeed(t)
	if !*longFlag {
		run(t, seed)
		return
	}
	for i := range uint64(40) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Logf("seed %d (replay with -seed %d)", seed+i, seed+i)
			run(t, seed+i)
		})
	}
}

// powerLossCycles is how many crash cycles a randomized test runs.
func powerLossCycles() int {
	if testing.Short() {
		return 3
	}
	return 8
}

// batchSet maps a base offset to the batches that were appended there
// (several when a crash dropped one and another took its offset).
type batchSet map[int64][][]byte

func (s batchSet) add(base int64, b []byte) { s[base] = append(s[base], bytes.Clone(b)) }

func (s batchSet) has(base int64, b []byte) bool {
	return slices.ContainsFunc(s[base], func(c []byte) bool { return bytes.Equal(c, b) })
}

// checkRecovered reads l from its log start to its end and checks what any
// crash must leave: offsets dense, every batch whole, each one a batch that
// was appended at its offset (appended), no idempotent batch twice, the
// leader-epoch history the one the batches give, the recovery point at the
// end. It returns the batches by base offset.
func checkRecovered(t *testing.T, l *Log, appended batchSet, label string) map[int64][]byte {
	t.Helper()
	return checkRecoveredDamaged(t, l, appended, label, false)
}

// checkRecoveredDamaged is checkRecovered where the log may hold damaged
// ranges (when damageOK): reads step over them, and the batches in them
// are absent from the map.
func checkRecoveredDamaged(t *testing.T, l *Log, appended batchSet, label string, damageOK bool) map[int64][]byte {
	t.Helper()
	if ds := l.Damaged(); len(ds) > 0 && !damageOK {
		t.Fatalf("%s: unexpected damage %v", label, ds)
	}
	start, end := l.StartOffset(), l.EndOffset()
	if rp := l.RecoveryPoint(); rp != end {
		t.Fatalf("%s: recovery point %d after open, log end %d", label, rp, end)
	}
	got := map[int64][]byte{}
	var epochs epochCache
	type seqKey struct {
		pid   int64
		epoch int16
		seq   int32
	}
	seqs := map[seqKey]int64{}
	next := int64(-1)
	for off := start; off < end; {
		b, err := l.ReadBytes(off, end, 64<<10)
		var de *DamagedError
		if damageOK && errors.As(err, &de) {
			off, next = de.Damage.To, de.Damage.To
			continue
		}
		if err != nil {
			t.Fatalf("%s: read %d (log %d to %d): %v", label, off, start, end, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s: empty read at %d below the log end %d", label, off, end)
		}
		for len(b) > 0 {
			batch, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatalf("%s: bad batch after offset %d: %v", label, next, err)
			}
			if next >= 0 && h.BaseOffset != next {
				t.Fatalf("%s: batch at %d, want %d: offsets not dense", label, h.BaseOffset, next)
			}
			if err := record.CheckCRC(batch); err != nil {
				t.Fatalf("%s: batch %d: %v", label, h.BaseOffset, err)
			}
			if !appended.has(h.BaseOffset, batch) {
				t.Fatalf("%s: batch %d (%d bytes) is none of the %d batches appended there", label, h.BaseOffset, len(batch), len(appended[h.BaseOffset]))
			}
			if h.ProducerID >= 0 && h.BaseSequence >= 0 {
				k := seqKey{h.ProducerID, h.ProducerEpoch, h.BaseSequence}
				if first, dup := seqs[k]; dup {
					t.Fatalf("%s: producer %d sequence %d at offsets %d and %d", label, k.pid, k.seq, first, h.BaseOffset)
				}
				seqs[k] = h.BaseOffset
			}
			epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			got[h.BaseOffset] = batch
			next = h.LastOffset() + 1
			b = rest
		}
		off = next
	}
	if next >= 0 && next != end {
		t.Fatalf("%s: last batch ends at %d, log end %d", label, next, end)
	}
	epochs.truncateBefore(start)
	if have := l.LeaderEpochs(); !slices.Equal(have, epochs.entries) {
		t.Fatalf("%s: leader epochs %v, the batches give %v", label, have, epochs.entries)
	}
	return got
}

// checkKept checks that every batch of want is in got at its offset.
func checkKept(t *testing.T, got, want map[int64][]byte, label string) {
	t.Helper()
	for _, base := range slices.Sorted(mapsKeys(want)) {
		if !bytes.Equal(got[base], want[base]) {
			t.Fatalf("%s: durable batch %d lost (%d of %d durable batches lost)", label, base, countLost(got, want), len(want))
		}
	}
}

func countLost(got, want map[int64][]byte) int {
	n := 0
	for base, b := range want {
		if !bytes.Equal(got[base], b) {
			n++
		}
	}
	return n
}

func mapsKeys[V any](m map[int64]V) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// powerLoss drives a log on a crashfs.FS through cycles of appends ending
// in a power loss, a killed process or a clean close, reopening each time.
type powerLoss struct {
	t     *testing.T
	rng   *rand.Rand
	cfg   Config
	clock *clock.Manual
	fsys  *crashfs.FS

	appended batchSet         // every batch ever appended, by offset
	durable  map[int64][]byte // batches that must survive any crash
	openOps  int64            // file system operations of the last Open
	// batched opens the log in a SyncBatch, begins an epoch in it (as a
	// new leader does) and commits it, as a broker opening many
	// partitions does.
	batched bool
	// tabled opens the log with Checkpoints (a file beside its
	// directory), which a broker writes now and then: the writers write
	// them after some of their appends, and a clean close after its
	// commit.
	tabled bool
	ckpts  *Checkpoints
	epoch  int32 // the epoch of the cycle's appends

	// The idempotent writer: its next sequence and the batch whose
	// append was not acknowledged before the crash, if any.
	seq      int32
	inFlight []byte
}

func newPowerLoss(t *testing.T, mode crashfs.Mode, seed uint64, cfg Config) *powerLoss {
	return &powerLoss{t: t, rng: rand.New(rand.NewPCG(seed, 2)), cfg: cfg, clock: clock.NewManual(testStart),
		fsys: crashfs.New(mode, seed), appended: batchSet{}, durable: map[int64][]byte{}}
}

// open opens the log, now and then with a crash at a random point of the
// recovery (then the recovery runs again on the rebooted file system), and
// checks it. Everything in the opened log is durable from then on.
func (p *powerLoss) open(label string) *Log {
	t := p.t
	t.Helper()
	for try := 0; ; try++ {
		crashing := p.openOps > 0 && p.rng.IntN(3) == 0
		if crashing {
			p.fsys.CrashAfter(p.rng.Int64N(p.openOps + 1))
		}
		before := p.fsys.Ops()
		torn := &tornCheckpoints{}
		opts := Options{FS: p.fsys, Clock: p.clock, Logger: slog.New(torn)}
		if p.batched {
			opts.Batch = NewSyncBatch(p.fsys, "/")
		}
		if p.tabled {
			var err error
			if p.ckpts, err = OpenCheckpoints(p.fsys, powerLossCheckpoints, slog.New(torn)); err != nil {
				t.Fatalf("%s: open the checkpoints: %v", label, err)
			}
			opts.Checkpoints = p.ckpts
		}
		l, err := Open(powerLossDir, p.cfg, opts)
		if err != nil {
			t.Fatalf("%s: open: %v", label, err)
		}
		p.openOps = p.fsys.Ops() - before
		what := fmt.Sprintf("%s, open %d", label, try)
		if msg := torn.first(); msg != "" {
			t.Fatalf("%s: %s: a checkpoint is replaced atomically, never torn", what, msg)
		}
		got := checkRecovered(t, l, p.appended, what)
		checkKept(t, got, p.durable, what)
		if p.batched {
			// The epoch a new leader begins, still in the batch.
			if err := l.BeginEpoch(p.epoch); err != nil {
				t.Fatalf("%s: begin epoch: %v", what, err)
			}
			if err := opts.Batch.Commit(); err != nil {
				t.Fatalf("%s: commit the batch: %v", what, err)
			}
		}
		crashed := p.fsys.Crashed()
		p.fsys.CrashAfter(-1)
		if crashed == nil {
			p.durable = got
			return l
		}
		// The open that crashed must have been right too, but what it
		// recovered is durable only if the rebooted one finds it.
		_ = l.Close()
		p.fsys = crashed
	}
}

// cycle opens the log, appends from writers goroutines (writer 0
// idempotent under FlushAlways)
// until a crash armed at a random point or each has appended perWriter
// batches, and ends the cycle with a power loss, a process kill or a clean
// close followed by a power loss.
func (p *powerLoss) cycle(n, writers, perWriter int, maxOps int64) {
	t := p.t
	label := fmt.Sprintf("cycle %d", n)
	p.epoch = int32(n)
	l := p.open(label)
	end := p.rng.IntN(6) // 0: kill, 1: close, else power loss
	if end > 1 {
		p.fsys.CrashAfter(p.rng.Int64N(maxOps))
	}
	fsys := p.fsys
	epoch := int32(n)
	var mu sync.Mutex
	var all []appended // this cycle's appends
	promise := int64(-1)
	crashed := func() bool { return fsys.Crashed() != nil }
	// Only acknowledged-means-durable lets an idempotent producer go on
	// after a crash without an out-of-order sequence.
	idempotent := p.cfg.FlushPolicy == FlushAlways
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter && !crashed(); i++ {
				var b []byte
				if g == 0 && idempotent {
					b = p.inFlight
					if b == nil {
						recs := 1 + i%3
						b = makeBatch(t, batchSpec{records: recs, valueSize: 40 + i%300, ts: int64(1000 + i), seed: uint64(n*1000 + i),
							idempotent: true, pid: 7, seq: p.seq})
						p.seq += int32(recs)
					}
					p.inFlight = bytes.Clone(b)
				} else {
					b = crashBatch(g, n*perWriter+i)
				}
				res, err := l.Append(b, epoch)
				if err != nil {
					t.Errorf("%s: writer %d append: %v", label, g, err)
					return
				}
				if res.Duplicate {
					// A retry of the batch in flight at the crash, which
					// survived: it is in the log at res.BaseOffset.
					b, err = l.ReadBytes(res.BaseOffset, res.BaseOffset+1, 1)
					if err != nil || !bytes.Equal(b[16:], p.inFlight[16:]) {
						t.Errorf("%s: duplicate at %d is not the batch retried: %v", label, res.BaseOffset, err)
						return
					}
				}
				ok := !crashed()
				if g == 0 && idempotent && ok {
					p.inFlight = nil
				}
				mu.Lock()
				a := appended{base: res.BaseOffset, last: res.LastOffset, bytes: bytes.Clone(b)}
				all = append(all, a)
				if ok && p.cfg.FlushPolicy == FlushAlways {
					p.durable[a.base] = a.bytes
				}
				mu.Unlock()
				if p.tabled && i%7 == 3 {
					if err := p.ckpts.Write(); err != nil && !crashed() {
						t.Errorf("%s: write the checkpoints: %v", label, err)
					}
				}
				if g == 0 && i%5 == 4 {
					switch p.cfg.FlushPolicy {
					case FlushOS:
						if err := l.Flush(); err != nil {
							t.Errorf("%s: flush: %v", label, err)
						}
					case FlushInterval:
						p.clock.Advance(p.cfg.FlushInterval)
					}
				}
				if rp := l.RecoveryPoint(); !crashed() {
					mu.Lock()
					promise = max(promise, rp)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, a := range all {
		p.appended.add(a.base, a.bytes)
		if a.last < promise {
			p.durable[a.base] = a.bytes
		}
	}
	switch {
	case end == 0 && !crashed():
		abandon(l) // the page cache survives
		t.Logf("%s: killed after %d appends", label, len(all))
		return
	case end == 1:
		var batch *SyncBatch
		if p.batched {
			// As a broker shutting down closes its logs: its fsyncs
			// wait for the commit.
			batch = NewSyncBatch(fsys, "/")
			batch.Add(l)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("%s: close: %v", label, err)
		}
		if err := batch.Commit(); err != nil {
			t.Fatalf("%s: commit the close: %v", label, err)
		}
		if p.tabled {
			if err := p.ckpts.Write(); err != nil {
				t.Fatalf("%s: write the checkpoints after the close: %v", label, err)
			}
		}
		for _, a := range all {
			p.durable[a.base] = a.bytes
		}
	}
	next := fsys.Crashed()
	if next == nil {
		next = fsys.Crash()
	}
	_ = l.Close()
	t.Logf("%s: power loss after %d appends, %d file system operations", label, len(all), fsys.Ops())
	p.fsys = next
}

// tornCheckpoints is a slog.Handler that keeps the first warning of a
// log ignoring a checkpoint it cannot decode.
type tornCheckpoints struct {
	mu  sync.Mutex
	msg string
}

func (h *tornCheckpoints) Enabled(context.Context, slog.Level) bool { return true }
func (h *tornCheckpoints) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *tornCheckpoints) WithGroup(string) slog.Handler            { return h }

func (h *tornCheckpoints) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn || !strings.HasPrefix(r.Message, "ignoring") {
		return nil
	}
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	h.mu.Lock()
	if h.msg == "" {
		h.msg = msg
	}
	h.mu.Unlock()
	return nil
}

func (h *tornCheckpoints) first() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg
}

// abandon leaves l as a killed process would: no flush, no checkpoints.
func abandon(l *Log) {
	l.flusherMu.Lock()
	l.stopFlusherLocked()
	l.flusherMu.Unlock()
	l.mu.Lock()
	l.closeFilesLocked()
	l.closed = true
	l.mu.Unlock()
	l.rolledWG.Wait()
}

func TestPowerLossKeepsEveryAcknowledgedAppend(t *testing.T) {
	for _, tabled := range []bool{false, true} {
		for _, mode := range []crashfs.Mode{crashfs.Strict, crashfs.Torn} {
			name := mode.String()
			if tabled {
				name = "tabled/" + name
			}
			t.Run(name, func(t *testing.T) {
				testAcknowledgedAppendsKept(t, mode, tabled)
			})
		}
	}
}

func testAcknowledgedAppendsKept(t *testing.T, mode crashfs.Mode, tabled bool) {
	powerLossRuns(t, func(t *testing.T, seed uint64) {
		cfg := testConfig()
		cfg.FlushPolicy = FlushAlways
		cfg.SegmentBytes = 16 << 10
		p := newPowerLoss(t, mode, seed, cfg)
		p.tabled = tabled
		for n := range powerLossCycles() {
			p.cycle(n, 4, 60, 1200)
		}
		p.open("end").Close()
	})
}

// Batched, every Open (the first one creating the log) runs in a
// SyncBatch: its checkpoints, never fsynced one by one, are as durable
// once the batch commits, and a crash in the middle of the commit leaves
// a log that opens again with everything below its recovery point.
//
// Tabled, the log keeps its recovery point and leader-epoch history in
// Checkpoints (as a broker's logs do), written now and then: a crash
// between two writes finds an older recovery point, never one past what
// is durable.
func TestPowerLossKeepsEverythingBelowTheRecoveryPoint(t *testing.T) {
	for _, variant := range []string{"", "batched/", "tabled/", "batched/tabled/"} {
		batched, tabled := strings.Contains(variant, "batched"), strings.Contains(variant, "tabled")
		for _, policy := range []FlushPolicy{FlushOS, FlushInterval} {
			for _, mode := range []crashfs.Mode{crashfs.Strict, crashfs.Torn} {
				name := variant + policy.String() + "/" + mode.String()
				t.Run(name, func(t *testing.T) {
					powerLossRuns(t, func(t *testing.T, seed uint64) {
						cfg := testConfig()
						cfg.FlushPolicy = policy
						cfg.SegmentBytes = 8 << 10
						cfg.FlushInterval = time.Second
						p := newPowerLoss(t, mode, seed, cfg)
						p.batched, p.tabled = batched, tabled
						for n := range powerLossCycles() {
							p.cycle(n, 3, 60, 900)
						}
						p.open("end").Close()
					})
				})
			}
		}
	}
}

// TestPowerLossOnAFullDisk fills the disk at random points (data,
// indexes, checkpoints) under FlushAlways: an append that fails has
// appended nothing, and after a power loss every acknowledged one is
// there.
func TestPowerLossOnAFullDisk(t *testing.T) {
	powerLossRuns(t, testFullDisk)
}

func testFullDisk(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	for round := range powerLossCycles() * 4 {
		label := fmt.Sprintf("round %d", round)
		fsys := crashfs.New(crashfs.Mode(round%2), seed+uint64(round))
		cfg := testConfig()
		cfg.FlushPolicy = FlushAlways
		cfg.SegmentBytes = 3000
		l, err := Open(powerLossDir, cfg, Options{FS: fsys, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatal(err)
		}
		fsys.SetSizeLimit(int64(2000 + rng.IntN(20000)))
		appendedAt := batchSet{}
		durable := map[int64][]byte{}
		full := 0
		for i := 0; i < 120; i++ {
			b := simpleBatch(t, uint64(i), 1+i%4, 20+rng.IntN(400), int64(i))
			end := l.EndOffset()
			res, err := l.Append(b, int32(i/40))
			if err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("%s: append %d: %v", label, i, err)
				}
				if l.EndOffset() != end {
					t.Fatalf("%s: failed append moved the log end from %d to %d", label, end, l.EndOffset())
				}
				full++
				if full%10 == 0 {
					fsys.SetSizeLimit(0) // space freed: the log goes on
				}
				continue
			}
			appendedAt.add(res.BaseOffset, b)
			durable[res.BaseOffset] = bytes.Clone(b)
		}
		if full == 0 {
			t.Fatalf("%s: the disk never filled", label)
		}
		crashed := fsys.Crash()
		_ = l.Close()
		l, err = Open(powerLossDir, cfg, Options{FS: crashed, Clock: clock.NewManual(testStart)})
		if err != nil {
			t.Fatalf("%s: open after the crash: %v", label, err)
		}
		checkKept(t, checkRecovered(t, l, appendedAt, label), durable, label)
		l.Close()
	}
}

// heldSyncFS holds every fsync of a segment data file until release is
// closed: a rolled segment's background fsync has not happened yet.
type heldSyncFS struct {
	*crashfs.FS
	release chan struct{}
}

func (h heldSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Ext(name) != logExt {
		return f, err
	}
	return heldSyncFile{f, h.release}, nil
}

type heldSyncFile struct {
	vfs.File
	release chan struct{}
}

func (f heldSyncFile) Sync() error {
	<-f.release
	return f.File.Sync()
}

// TestFirstRollWritesTheRecoveryPoint: a new log writes no recovery point
// checkpoint until it needs one, but it needs one before its first roll
// under flush.policy=os, whose fsync of the rolled segment comes later in
// the background: a closed segment with no checkpoint is taken for
// fsynced whole, so a power loss before that fsync would turn its lost
// tail into damage instead of a torn tail cut away.
func TestFirstRollWritesTheRecoveryPoint(t *testing.T) {
	fsys := crashfs.New(crashfs.Strict, 1)
	held := heldSyncFS{FS: fsys, release: make(chan struct{})}
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l, err := Open(powerLossDir, cfg, Options{FS: held})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; l.NumSegments() < 2; i++ {
		if _, err := l.Append(simpleBatch(t, uint64(i), 2, 100, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fsys.Crash() // the rolled segment's fsync still held
	close(held.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(powerLossDir, cfg, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d := l.Damaged(); len(d) > 0 {
		t.Fatalf("damage after a power loss right after the first roll: %v", d)
	}
}
