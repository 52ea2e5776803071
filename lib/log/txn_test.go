package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

// txnBatch is a transactional batch of n records from producer pid.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	return makeBatch(t, batchSpec{records: n, valueSize: 30, idempotent: true, transactional: true, pid: pid, epoch: epoch, seq: seq, seed: uint64(pid)*1000 + uint64(seq)})
}

func (tl *testLog) marker(pid int64, epoch int16, commit bool, coordEpoch int32) int64 {
	tl.t.Helper()
	res, err := tl.AppendMarker(record.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit, CoordinatorEpoch: coordEpoch}, 0)
	if err != nil {
		tl.t.Fatalf("marker: %v", err)
	}
	return res.BaseOffset
}

func (tl *testLog) abortedAll() []AbortedTxn {
	return tl.AbortedTxns(nil, 0, tl.EndOffset())
}

func TestLastStableOffsetStopsAtTheOldestOpenTransaction(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(2, 10)
	a := tl.append(txnBatch(t, 1, 0, 0, 3), 0)
	b := tl.append(txnBatch(t, 2, 0, 0, 2), 0)
	tl.append(txnBatch(t, 1, 0, 3, 1), 0)
	hw := tl.EndOffset()
	if got := tl.LastStableOffset(hw); got != a.base {
		t.Fatalf("LSO %d, want %d (producer 1's first offset)", got, a.base)
	}
	if got := tl.LastStableOffset(a.base - 1); got != a.base-1 {
		t.Fatalf("LSO below the high-water mark: %d", got)
	}
	tl.marker(1, 0, true, 0)
	if got := tl.LastStableOffset(tl.EndOffset()); got != b.base {
		t.Fatalf("LSO after producer 1 committed: %d, want %d", got, b.base)
	}
	m := tl.marker(2, 0, false, 0)
	if got := tl.LastStableOffset(tl.EndOffset()); got != tl.EndOffset() {
		t.Fatalf("LSO with no open transaction: %d, want the high-water mark %d", got, tl.EndOffset())
	}
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: b.base, LastOffset: m, LastStableOffset: m + 1}}
	if got := tl.abortedAll(); !slices.Equal(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	// A read of offsets before producer 2's transaction began needs none.
	if got := tl.AbortedTxns(nil, 0, b.base); len(got) != 0 {
		t.Fatalf("aborted for [0, %d): %+v", b.base, got)
	}
	if got := tl.AbortedTxns(nil, m+1, tl.EndOffset()+1); len(got) != 0 {
		t.Fatalf("aborted after the marker: %+v", got)
	}
}

func TestTransactionalProducerChecks(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.append(txnBatch(t, 7, 3, 0, 2), 0)
	// A plain idempotent batch of a producer in a transaction.
	if _, err := tl.Append(idem(t, 7, 3, 2, 1), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch in a transaction: %v", err)
	}
	// A zombie from an older epoch.
	if _, err := tl.Append(txnBatch(t, 7, 2, 2, 1), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	tl.marker(7, 4, false, 5) // the coordinator bumped the epoch and aborted
	if _, err := tl.Append(txnBatch(t, 7, 3, 2, 1), 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("zombie after its abort: %v", err)
	}
	if _, err := tl.AppendMarker(record.Marker{ProducerID: 7, ProducerEpoch: 4, CoordinatorEpoch: 4}, 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator: %v", err)
	}
	if _, err := tl.AppendMarker(record.Marker{ProducerID: 7, ProducerEpoch: 3, CoordinatorEpoch: 5}, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker from an older producer epoch: %v", err)
	}
	// The new epoch starts at sequence 0 and may begin a transaction.
	tl.append(txnBatch(t, 7, 4, 0, 1), 0)
	ps := tl.Producers()
	if len(ps) != 1 || ps[0].ProducerEpoch != 4 || ps[0].CoordinatorEpoch != 5 || ps[0].LastSequence != 0 || ps[0].TxnStartOffset != tl.EndOffset()-1 {
		t.Fatalf("producers %+v", ps)
	}
}

// abortSome writes, over small segments, transactions of three producers,
// aborting producer 2's, and returns the aborted ones.
func abortSome(t *testing.T, tl *testLog) []AbortedTxn {
	var want []AbortedTxn
	seq := map[int64]int32{}
	for round := range 6 {
		firsts := map[int64]int64{}
		for _, pid := range []int64{1, 2, 3} {
			a := tl.append(txnBatch(t, pid, 0, seq[pid], 2), 0)
			seq[pid] += 2
			firsts[pid] = a.base
			tl.appendN(1, 50)
		}
		for _, pid := range []int64{1, 2, 3} {
			abort := pid == 2 || round%3 == 0 && pid == 3
			m := tl.marker(pid, 0, !abort, 0)
			if abort {
				want = append(want, AbortedTxn{ProducerID: pid, FirstOffset: firsts[pid], LastOffset: m})
			}
		}
	}
	got := tl.abortedAll()
	if len(got) != len(want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	for i := range want {
		want[i].LastStableOffset = got[i].LastStableOffset
	}
	if !slices.Equal(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	return want
}

func smallSegments() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	return cfg
}

func txnIndexFiles(t *testing.T, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*"+txnIndexExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAbortedIndexSurvivesRollAndRestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(tl *testLog)
	}{
		{"clean", func(tl *testLog) { tl.reopen() }},
		{"crash", func(tl *testLog) { tl.crash(); tl.open() }},
		{"no producer snapshot", func(tl *testLog) {
			tl.crash()
			if err := os.Remove(filepath.Join(tl.dir, producerStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			tl.open()
		}},
		{"index files and snapshot lost", func(tl *testLog) {
			tl.crash()
			if err := os.Remove(filepath.Join(tl.dir, producerStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			for _, f := range txnIndexFiles(t, tl.dir) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			tl.open()
		}},
		{"index file torn", func(tl *testLog) {
			tl.crash()
			fs := txnIndexFiles(t, tl.dir)
			if err := os.WriteFile(fs[len(fs)-1], []byte{0, 0, 1}, 0o644); err != nil {
				t.Fatal(err)
			}
			tl.open()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := openTestLog(t, smallSegments())
			want := abortSome(t, tl)
			if tl.NumSegments() < 3 {
				t.Fatalf("only %d segments", tl.NumSegments())
			}
			if n := len(txnIndexFiles(t, tl.dir)); n < 2 {
				t.Fatalf("%d .txnindex files for %d segments", n, tl.NumSegments())
			}
			// A transaction left open across the restart.
			open := tl.append(txnBatch(t, 9, 0, 0, 1), 0)
			tc.before(tl)
			if got := tl.abortedAll(); !slices.Equal(got, want) {
				t.Fatalf("after %s: aborted %+v, want %+v", tc.name, got, want)
			}
			if got := tl.LastStableOffset(tl.EndOffset()); got != open.base {
				t.Fatalf("after %s: LSO %d, want %d", tc.name, got, open.base)
			}
			// What the files hold now is whole: a second open finds the same.
			tl.crash()
			tl.open()
			if got := tl.abortedAll(); !slices.Equal(got, want) {
				t.Fatalf("second open after %s: aborted %+v, want %+v", tc.name, got, want)
			}
		})
	}
}

func TestTruncationRemovesAbortedEntriesPastIt(t *testing.T) {
	tl := openTestLog(t, smallSegments())
	want := abortSome(t, tl)
	last := want[len(want)-1]
	// Cut at the last abort marker: its transaction is open again, the
	// entry is gone, in memory and on disk.
	if err := tl.TruncateTo(last.LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := tl.abortedAll(); !slices.Equal(got, want[:len(want)-1]) {
		t.Fatalf("after truncation: aborted %+v, want %+v", got, want[:len(want)-1])
	}
	if got := tl.LastStableOffset(tl.EndOffset()); got > last.FirstOffset {
		t.Fatalf("LSO %d past the reopened transaction at %d", got, last.FirstOffset)
	}
	tl.crash()
	tl.open()
	if got := tl.abortedAll(); !slices.Equal(got, want[:len(want)-1]) {
		t.Fatalf("after truncation and restart: aborted %+v, want %+v", got, want[:len(want)-1])
	}
	// The follower appends the leader's marker again: the entry is back.
	tl.marker(2, 0, false, 0)
	if got := tl.abortedAll(); len(got) != len(want) || got[len(got)-1].FirstOffset != last.FirstOffset {
		t.Fatalf("after the marker again: %+v", got)
	}
	// Truncating below a whole segment removes its index file.
	if err := tl.TruncateTo(want[0].FirstOffset); err != nil {
		t.Fatal(err)
	}
	if got := tl.abortedAll(); len(got) != 0 {
		t.Fatalf("after truncation below every transaction: %+v", got)
	}
	if fs := txnIndexFiles(t, tl.dir); len(fs) != 0 {
		t.Fatalf("index files left: %v", fs)
	}
	// Producer 1's first transaction, at 0, is open again.
	if got := tl.LastStableOffset(tl.EndOffset()); got != 0 {
		t.Fatalf("LSO %d, want 0, end %d", got, tl.EndOffset())
	}
}

func TestRetentionRemovesAbortedEntriesOfDeletedSegments(t *testing.T) {
	tl := openTestLog(t, smallSegments())
	want := abortSome(t, tl)
	mid := want[len(want)/2].LastOffset + 1
	if err := tl.DeleteRecordsBefore(mid); err != nil {
		t.Fatal(err)
	}
	start := tl.Log.segs[0].base
	got := tl.abortedAll()
	for _, a := range want {
		kept := slices.Contains(got, a)
		if kept != (a.LastOffset >= start) {
			t.Fatalf("entry %+v kept %v with the first segment at %d", a, kept, start)
		}
	}
	tl.reopen()
	if got2 := tl.abortedAll(); !slices.Equal(got2, got) {
		t.Fatalf("after reopen: %+v, want %+v", got2, got)
	}
}

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(appendTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 9, LastStableOffset: 10}))
	f.Add(appendTxnEntry(appendTxnEntry(nil, AbortedTxn{ProducerID: 1, LastOffset: 1, LastStableOffset: 2}), AbortedTxn{ProducerID: 3, FirstOffset: 5, LastOffset: 7, LastStableOffset: 5})[:50])
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeTxnIndex(b)
		if err != nil {
			return
		}
		var again []byte
		for _, a := range entries {
			if a.FirstOffset > a.LastOffset || a.ProducerID < 0 {
				t.Fatalf("accepted %+v", a)
			}
			again = appendTxnEntry(again, a)
		}
		if string(again) != string(b[:len(b)/txnEntrySize*txnEntrySize]) {
			t.Fatal("re-encoding differs")
		}
	})
}

// txnKV is a transactional batch of key/value records.
func txnKV(t testing.TB, pid int64, seq int32, ts int64, kvs ...kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value}
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: ts, Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// committedView is latestView as a read_committed reader sees the log:
// the records of aborted transactions and the markers left out.
func committedView(t *testing.T, tl *testLog) map[string]latestEntry {
	aborted := tl.abortedAll()
	var recs []storedRecord
	for _, r := range readAll(t, tl.Log, 1<<20) {
		dropped := false
		for _, a := range aborted {
			dropped = dropped || r.offset >= a.FirstOffset && r.offset <= a.LastOffset && string(r.value) == "aborted"
		}
		if !dropped && len(r.key) != 4 { // control records have a 4-byte key
			recs = append(recs, r)
		}
	}
	return latestView(recs)
}

func TestCleanKeepsCommittedValuesUnderAbortedOnes(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	seq, seq4 := int32(0), int32(0)
	for i := range 40 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i))), 0)
		if i%10 == 4 {
			// A committed transaction writes every key, overwritten
			// later by plain records.
			var kvs []kv
			for k := range 5 {
				kvs = append(kvs, put(fmt.Sprintf("k%d", k), "committed"))
			}
			tl.append(txnKV(t, 4, seq4, ts, kvs...), 0)
			seq4 += 5
			tl.marker(4, 0, true, 0)
		}
		if i%10 == 9 {
			// An aborted transaction overwrites every key.
			var kvs []kv
			for k := range 5 {
				kvs = append(kvs, put(fmt.Sprintf("k%d", k), "aborted"))
			}
			tl.append(txnKV(t, 3, seq, ts, kvs...), 0)
			seq += 5
			tl.marker(3, 0, false, 0)
		}
	}
	for i := range 40 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("filler%d", i), "x")), 0)
	}
	mustFlush(t, tl.Log)
	before := committedView(t, tl)
	abortedBefore := tl.abortedAll()
	if len(abortedBefore) != 4 || tl.NumSegments() < 4 {
		t.Fatalf("%d aborted transactions over %d segments", len(abortedBefore), tl.NumSegments())
	}
	if res := mustClean(t, tl.Log, CleanOptions{Now: tl.clock.Now(), MaxOffset: tl.EndOffset()}); res.CleanedTo <= abortedBefore[3].LastOffset {
		t.Fatalf("cleaned to %d only", res.CleanedTo)
	}
	if got := committedView(t, tl); !equalViews(got, before) {
		t.Fatalf("after cleaning, read_committed sees %v, want %v", got, before)
	}
	for _, r := range readAll(t, tl.Log, 1<<20) {
		if string(r.value) == "aborted" && r.offset < abortedBefore[3].FirstOffset {
			t.Fatalf("an aborted record at %d survived the cleaning", r.offset)
		}
		if string(r.value) == "committed" && r.offset < abortedBefore[2].LastOffset {
			t.Fatalf("a committed transactional record at %d, overwritten since, survived the cleaning", r.offset)
		}
	}
	if got := tl.abortedAll(); !slices.Equal(got, abortedBefore) {
		t.Fatalf("after cleaning: aborted %+v, want %+v", got, abortedBefore)
	}
	tl.crash()
	tl.open()
	if got := tl.abortedAll(); !slices.Equal(got, abortedBefore) {
		t.Fatalf("after cleaning and restart: aborted %+v, want %+v", got, abortedBefore)
	}
	if got := committedView(t, tl); !equalViews(got, before) {
		t.Fatalf("after cleaning and restart, read_committed sees %v, want %v", got, before)
	}
}

func TestCleanStopsAtAnOpenTransaction(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	open := tl.append(txnKV(t, 4, 0, ts, put("k0", "maybe")), 0)
	for i := range 60 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i))), 0)
	}
	mustFlush(t, tl.Log)
	res := mustClean(t, tl.Log, CleanOptions{Now: tl.clock.Now(), MaxOffset: tl.EndOffset()})
	if res.CleanedTo > open.base {
		t.Fatalf("cleaned to %d past the open transaction at %d", res.CleanedTo, open.base)
	}
}

// A follower appending the leader's batches (markers included) has the
// same open transactions and aborted ones.
func TestFollowerRebuildsTransactionsFromReplicatedBatches(t *testing.T) {
	leader := openTestLog(t, smallSegments())
	want := abortSome(t, leader)
	open := leader.append(txnBatch(t, 9, 0, 0, 1), 0)
	follower := openTestLog(t, smallSegments())
	for next := int64(0); next < leader.EndOffset(); {
		b, err := leader.ReadBytes(next, leader.EndOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			batch, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := follower.AppendAsFollower(slices.Clone(batch)); err != nil {
				t.Fatal(err)
			}
			next, b = h.LastOffset()+1, rest
		}
	}
	if got := follower.abortedAll(); !slices.Equal(got, want) {
		t.Fatalf("follower's aborted %+v, want %+v", got, want)
	}
	if got := follower.LastStableOffset(follower.EndOffset()); got != open.base {
		t.Fatalf("follower's LSO %d, want %d", got, open.base)
	}
	follower.crash()
	follower.open()
	if got := follower.abortedAll(); !slices.Equal(got, want) {
		t.Fatalf("follower's aborted after a crash %+v, want %+v", got, want)
	}
}

// A snapshot of version 1 (written before transactions) still loads.
func TestProducerSnapshotVersion1Loads(t *testing.T) {
	be := binary.BigEndian
	b := []byte("MQPS\x01")
	b = be.AppendUint64(b, 40)
	b = be.AppendUint32(b, 1)
	b = be.AppendUint64(b, 77) // producer id
	b = be.AppendUint16(b, 3)  // epoch
	b = append(b, 1)
	b = be.AppendUint32(b, 0)
	b = be.AppendUint32(b, 4)
	b = be.AppendUint64(b, 30)
	b = be.AppendUint64(b, 34)
	b = be.AppendUint32(b, crc32.Checksum(b, castagnoli))
	ps, off, err := decodeProducerSnapshot(b)
	if err != nil || off != 40 {
		t.Fatalf("decode: %d %v", off, err)
	}
	e := ps.m[77]
	if e == nil || e.epoch != 3 || e.n != 1 || e.newest().lastSeq != 4 || e.txnOpen || len(ps.ongoing) != 0 {
		t.Fatalf("entry %+v", e)
	}
}

func FuzzProducerSnapshot(f *testing.F) {
	ps := newProducerState()
	ps.update(&record.Header{ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, LastOffsetDelta: 2, BaseOffset: 3, Attributes: 0x10}, noControl, -1)
	ps.update(&record.Header{ProducerID: 6, BaseSequence: 0, BaseOffset: 9}, noControl, -1)
	f.Add(ps.encode(20))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, off, err := decodeProducerSnapshot(b)
		if err != nil {
			return
		}
		for pid, first := range got.ongoing {
			if first >= off || !got.m[pid].txnOpen {
				t.Fatalf("open transaction %d of %d at %d, snapshot at %d", pid, pid, first, off)
			}
		}
		if again, off2, err := decodeProducerSnapshot(got.encode(off)); err != nil || off2 != off || len(again.m) != len(got.m) {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

// modelAborted computes the aborted transactions of l from its batches:
// what the index must say whatever survived a crash.
func modelAborted(t *testing.T, l *Log) (aborted []AbortedTxn, firstOpen int64) {
	t.Helper()
	open := map[int64]int64{}
	for next := l.StartOffset(); next < l.EndOffset(); {
		b, err := l.ReadBytes(next, l.EndOffset(), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			batch, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case h.Control():
				typ, _, err := record.ControlType(batch)
				if err != nil {
					t.Fatal(err)
				}
				if first, ok := open[h.ProducerID]; ok && typ == record.ControlAbort {
					aborted = append(aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset})
				}
				delete(open, h.ProducerID)
			case h.Transactional():
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = h.BaseOffset
				}
			}
			next, b = h.LastOffset()+1, rest
		}
	}
	firstOpen = -1
	for _, o := range open {
		if firstOpen < 0 || o < firstOpen {
			firstOpen = o
		}
	}
	return aborted, firstOpen
}

func withoutLSO(as []AbortedTxn) []AbortedTxn {
	out := slices.Clone(as)
	for i := range out {
		out[i].LastStableOffset = 0
	}
	return out
}

// TestAbortedIndexAfterPowerLoss cuts the power at every point of a run
// of transactions over several segments (FlushAlways: an acknowledged
// marker is durable) and checks that the reopened log's aborted
// transactions and last stable offset are exactly what its batches say,
// and that every acknowledged abort is there.
func TestAbortedIndexAfterPowerLoss(t *testing.T) {
	cfg := smallSegments()
	cfg.FlushPolicy = FlushAlways
	run := func(crashAt int64, mode crashfs.Mode) (total int64) {
		fsys := crashfs.New(mode, uint64(crashAt))
		opts := Options{FS: fsys, Clock: clock.NewManual(testStart)}
		l, err := Open(powerLossDir, cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		if crashAt >= 0 {
			fsys.CrashAfter(crashAt)
		}
		var acked []AbortedTxn
		seq := map[int64]int32{}
		first := map[int64]int64{}
		for round := range 8 {
			for _, pid := range []int64{1, 2} {
				res, err := l.Append(txnBatch(t, pid, 0, seq[pid], 2), 0)
				if err != nil {
					t.Fatal(err)
				}
				seq[pid] += 2
				first[pid] = res.BaseOffset
			}
			for _, pid := range []int64{1, 2} {
				abort := pid == 2 || round%3 == 2
				res, err := l.AppendMarker(record.Marker{ProducerID: pid, Commit: !abort}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if abort && fsys.Crashed() == nil {
					acked = append(acked, AbortedTxn{ProducerID: pid, FirstOffset: first[pid], LastOffset: res.BaseOffset})
				}
			}
		}
		if crashAt < 0 {
			_ = l.Close()
			return fsys.Ops()
		}
		crashed := fsys.Crashed()
		abandon(l)
		if crashed == nil {
			crashed = fsys.Crash()
		}
		opts.FS = crashed
		l, err = Open(powerLossDir, cfg, opts)
		if err != nil {
			t.Fatalf("crash at op %d: open: %v", crashAt, err)
		}
		defer l.Close()
		got := l.AbortedTxns(nil, 0, l.EndOffset())
		want, firstOpen := modelAborted(t, l)
		if !slices.Equal(withoutLSO(got), want) {
			t.Fatalf("crash at op %d (%v): aborted %+v, the batches say %+v", crashAt, mode, got, want)
		}
		for _, a := range acked {
			if !slices.Contains(withoutLSO(got), a) {
				t.Fatalf("crash at op %d (%v): acknowledged abort %+v lost; have %+v", crashAt, mode, a, got)
			}
		}
		wantLSO := l.EndOffset()
		if firstOpen >= 0 {
			wantLSO = firstOpen
		}
		if lso := l.LastStableOffset(l.EndOffset()); lso != wantLSO {
			t.Fatalf("crash at op %d (%v): LSO %d, want %d", crashAt, mode, lso, wantLSO)
		}
		return 0
	}
	total := run(-1, crashfs.Strict)
	t.Logf("%d file system operations", total)
	step := max(total/60, 1)
	for _, mode := range []crashfs.Mode{crashfs.Strict, crashfs.Torn} {
		for at := int64(0); at < total; at += step {
			run(at, mode)
		}
	}
}
