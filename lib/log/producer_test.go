package log

import (
	"os"
	"path/filepath"
	"testing"
)

func idem(t testing.TB, pid int64, epoch int16, seq int32, records int) []byte {
	return makeBatch(t, batchSpec{records: records, valueSize: 20, idempotent: true, pid: pid, epoch: epoch, seq: seq, seed: uint64(seq)})
}

func TestIdempotentProducer(t *testing.T) {
	type step struct {
		pid     int64
		epoch   int16
		seq     int32
		records int
		err     error
		dupOf   int // index of the step whose offsets a duplicate returns, -1 none
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"sequences in order", []step{
			{1, 0, 0, 2, nil, -1}, {1, 0, 2, 3, nil, -1}, {1, 0, 5, 1, nil, -1}}},
		{"duplicate of each of the last five", []step{
			{1, 0, 0, 1, nil, -1}, {1, 0, 1, 1, nil, -1}, {1, 0, 2, 1, nil, -1}, {1, 0, 3, 1, nil, -1},
			{1, 0, 4, 1, nil, -1}, {1, 0, 5, 1, nil, -1},
			{1, 0, 1, 1, nil, 1}, {1, 0, 2, 1, nil, 2}, {1, 0, 3, 1, nil, 3}, {1, 0, 4, 1, nil, 4}, {1, 0, 5, 1, nil, 5},
			{1, 0, 0, 1, ErrOutOfOrderSequence, -1}, // the sixth last is forgotten
			{1, 0, 6, 1, nil, -1}}},
		{"gap is out of order", []step{
			{1, 0, 0, 2, nil, -1}, {1, 0, 3, 1, ErrOutOfOrderSequence, -1}, {1, 0, 2, 1, nil, -1}}},
		{"unknown producer must start at zero", []step{
			{7, 0, 5, 1, ErrOutOfOrderSequence, -1}, {7, 0, 0, 1, nil, -1}}},
		{"epoch bump restarts at zero", []step{
			{1, 0, 0, 3, nil, -1}, {1, 1, 1, 1, ErrOutOfOrderSequence, -1}, {1, 1, 0, 1, nil, -1}, {1, 1, 1, 1, nil, -1}}},
		{"fenced epoch", []step{
			{1, 2, 0, 1, nil, -1}, {1, 1, 1, 1, ErrInvalidProducerEpoch, -1}, {1, 1, 0, 1, ErrInvalidProducerEpoch, -1}}},
		{"producers are independent", []step{
			{1, 0, 0, 1, nil, -1}, {2, 0, 0, 1, nil, -1}, {1, 0, 1, 1, nil, -1}, {2, 0, 0, 1, nil, 1}}},
		{"sequence wraps", []step{
			{1, 0, 0, 1, nil, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := openTestLog(t, testConfig())
			results := make([]AppendResult, len(tc.steps))
			for i, s := range tc.steps {
				end := tl.EndOffset()
				res, err := tl.Append(idem(t, s.pid, s.epoch, s.seq, s.records), 0)
				if s.err != nil {
					mustErr(t, err, s.err)
					if tl.EndOffset() != end {
						t.Fatalf("step %d: end offset moved on error", i)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				results[i] = res
				if s.dupOf >= 0 {
					orig := results[s.dupOf]
					if !res.Duplicate || res.BaseOffset != orig.BaseOffset || res.LastOffset != orig.LastOffset {
						t.Fatalf("step %d: %+v, want duplicate of %+v", i, res, orig)
					}
					if tl.EndOffset() != end {
						t.Fatalf("step %d: duplicate written", i)
					}
				} else if res.Duplicate {
					t.Fatalf("step %d: unexpected duplicate", i)
				}
			}
		})
	}
}

func TestProducerSequenceWrapsAtMaxInt32(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.mu.Lock()
	tl.producers.m[9] = &producerEntry{epoch: 0, n: 1, batches: [5]producerBatch{{firstSeq: 1<<31 - 3, lastSeq: 1<<31 - 2}}}
	tl.mu.Unlock()
	if _, err := tl.Append(idem(t, 9, 0, 1<<31-1, 1), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Append(idem(t, 9, 0, 0, 1), 0); err != nil {
		t.Fatalf("sequence after MaxInt32: %v", err)
	}
}

func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(tl *testLog)
	}{
		{"clean close", func(tl *testLog) { tl.reopen() }},
		{"crash without snapshot", func(tl *testLog) {
			tl.crash()
			if err := os.Remove(filepath.Join(tl.dir, producerStateFile)); err != nil {
				t.Fatal(err)
			}
			tl.open()
		}},
		{"crash with an old snapshot", func(tl *testLog) { tl.crash(); tl.open() }},
		{"corrupt snapshot", func(tl *testLog) {
			tl.Close()
			if err := os.WriteFile(filepath.Join(tl.dir, producerStateFile), []byte("MQPS garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
			tl.Log = nil
			tl.open()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 1000 // rolls take snapshots
			tl := openTestLog(t, cfg)
			var res []AppendResult
			for i := range 12 {
				r, err := tl.Append(idem(t, 1, 0, int32(i*2), 2), 0)
				if err != nil {
					t.Fatal(err)
				}
				res = append(res, r)
				tl.appendN(1, 100) // other traffic
			}
			tc.restart(tl)
			// The last five are duplicates, the sixth last is too old, 24 is next.
			for i := 7; i < 12; i++ {
				r, err := tl.Append(idem(t, 1, 0, int32(i*2), 2), 0)
				if err != nil || !r.Duplicate || r.BaseOffset != res[i].BaseOffset {
					t.Fatalf("retry of %d after restart: %+v, %v", i, r, err)
				}
			}
			_, err := tl.Append(idem(t, 1, 0, 26, 1), 0)
			mustErr(t, err, ErrOutOfOrderSequence)
			if _, err := tl.Append(idem(t, 1, 0, 24, 1), 0); err != nil {
				t.Fatal(err)
			}
			_, err = tl.Append(idem(t, 1, -1+0, 25, 1), 0)
			mustErr(t, err, ErrInvalidProducerEpoch)
		})
	}
}

func TestProducerStateFollowsTruncation(t *testing.T) {
	tl := openTestLog(t, testConfig())
	for i := range 6 {
		if _, err := tl.Append(idem(t, 1, 0, int32(i), 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := tl.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	// Sequences 3..5 are gone: 3 is next, and 2 a duplicate.
	if r, err := tl.Append(idem(t, 1, 0, 2, 1), 0); err != nil || !r.Duplicate || r.BaseOffset != 2 {
		t.Fatalf("retry of 2: %+v %v", r, err)
	}
	if r, err := tl.Append(idem(t, 1, 0, 3, 1), 0); err != nil || r.Duplicate || r.BaseOffset != 3 {
		t.Fatalf("append of 3: %+v %v", r, err)
	}
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	ps := newProducerState()
	for i := range 8 {
		ps.update(&recordHeader{ProducerID: 5, ProducerEpoch: 1, BaseSequence: int32(i * 3), LastOffsetDelta: 2, BaseOffset: int64(i * 3)}, noControl, -1)
	}
	ps.update(&recordHeader{ProducerID: 6, ProducerEpoch: 0, BaseSequence: 0, BaseOffset: 100}, noControl, -1)
	b := ps.encode(123)
	got, off, err := decodeProducerSnapshot(b)
	if err != nil || off != 123 {
		t.Fatalf("decode: %d %v", off, err)
	}
	if string(got.encode(123)) != string(b) {
		t.Fatal("re-encoding differs")
	}
	b[20] ^= 1
	if _, _, err := decodeProducerSnapshot(b); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}

// A producer-state snapshot past the log end describes batches the log no
// longer has: its tail was lost after the snapshot was taken (a power loss
// after an asynchronous roll, a segment cut short). Open rebuilds the
// state without it; once the log has grown past the snapshot's offset
// with other batches, the next Open must not take the snapshot for this
// log's, whether the log was closed or crashed in between.
func TestSnapshotPastTheLogEndIsNeverUsedLater(t *testing.T) {
	for _, restart := range []string{"close", "crash"} {
		t.Run(restart, func(t *testing.T) {
			// Producer 1's sequences 0..5 at offsets 0..5: a history this
			// log will not have.
			gone := newProducerState()
			for i := range 6 {
				gone.update(&recordHeader{ProducerID: 1, BaseSequence: int32(i), BaseOffset: int64(i)}, noControl, -1)
			}
			tl := openTestLog(t, testConfig())
			tl.appendN(2, 20) // 3 records
			if err := tl.Close(); err != nil {
				t.Fatal(err)
			}
			tl.Log = nil
			if err := os.WriteFile(filepath.Join(tl.dir, producerStateFile), gone.encode(6), 0o644); err != nil {
				t.Fatal(err)
			}
			tl.open()
			tl.appendN(4, 20) // to offset 13, past the snapshot's 6
			if restart == "close" {
				tl.reopen()
			} else {
				tl.crash()
				tl.open()
			}
			// Producer 1 never wrote to this log: a batch of its at sequence
			// 5 is out of order, not a duplicate of offset 5.
			res, err := tl.Append(idem(t, 1, 0, 5, 1), 0)
			if err == nil {
				t.Fatalf("producer 1's sequence 5 after a restart: %+v, want %v", res, ErrOutOfOrderSequence)
			}
			mustErr(t, err, ErrOutOfOrderSequence)
		})
	}
}
