package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

func TestAppendAssignsDenseOffsetsAndReadsBackIdentical(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segBytes  int64
		n, values int
	}{
		{"one segment", 0, 200, 100},
		{"many segments", 4096, 200, 100},
		{"batches larger than the index interval", 64 << 10, 50, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.segBytes > 0 {
				cfg.SegmentBytes = tc.segBytes
			}
			tl := openTestLog(t, cfg)
			want := tl.appendN(tc.n, tc.values)
			next := int64(0)
			for _, a := range want {
				if a.base != next {
					t.Fatalf("base offset %d, want %d", a.base, next)
				}
				next = a.last + 1
			}
			checkContents(t, tl.Log, want)
			tl.reopen()
			checkContents(t, tl.Log, want)
			if tc.segBytes > 0 && tl.NumSegments() < 3 {
				t.Fatalf("%d segments, want several", tl.NumSegments())
			}
		})
	}
}

func TestReadInTheMiddleOfABatchReturnsTheWholeBatch(t *testing.T) {
	tl := openTestLog(t, testConfig())
	want := tl.appendN(40, 50)
	for _, a := range want {
		for off := a.base; off <= a.last; off++ {
			r, err := tl.Read(off, tl.EndOffset(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.BaseOffset != a.base || r.LastOffset != a.last || r.Len != int64(len(a.bytes)) {
				t.Fatalf("read %d: region %+v, want batch %d-%d", off, r, a.base, a.last)
			}
			got := make([]byte, r.Len)
			if _, err := r.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			r.Release()
			if !bytes.Equal(got, a.bytes) {
				t.Fatalf("read %d: bytes differ", off)
			}
		}
	}
}

func TestReadLimits(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10
	tl := openTestLog(t, cfg)
	// 60 batches of 3 records, ~400 bytes each: several segments.
	var want []appended
	for i := range 60 {
		want = append(want, tl.append(simpleBatch(t, uint64(i), 3, 100, 1000), 0))
	}
	size := int64(len(want[0].bytes))
	end := tl.EndOffset()
	segOf := func(off int64) int64 { // base of the segment holding off
		tl.mu.RLock()
		defer tl.mu.RUnlock()
		return tl.segs[tl.segIndexLocked(off)].base
	}
	for _, tc := range []struct {
		name               string
		offset, maxOffset  int64
		maxBytes           int
		wantFirst, wantCnt int // batch index and count; cnt 0 = empty
	}{
		{"first batch only when maxBytes is tiny", 0, end, 1, 0, 1},
		{"whole batches within maxBytes", 0, end, int(3*size + size/2), 0, 3},
		{"exactly n batches", 0, end, int(4 * size), 0, 4},
		{"maxOffset cuts before the next batch", 0, 6, 1 << 20, 0, 2},
		{"maxOffset inside a batch includes it", 0, 7, 1 << 20, 0, 3},
		{"offset inside a batch", 4, end, int(2 * size), 1, 2},
		{"offset equal to maxOffset is empty", 9, 9, 1 << 20, 0, 0},
		{"offset at the end is empty", end, end, 1 << 20, 0, 0},
		{"maxOffset above the end is clamped", end - 1, end + 100, 1 << 20, 59, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tl.Read(tc.offset, tc.maxOffset, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if tc.wantCnt == 0 {
				if r.Len != 0 {
					t.Fatalf("region %+v, want empty", r)
				}
				return
			}
			// A region stops at the end of its segment.
			cnt := tc.wantCnt
			for i := tc.wantFirst + 1; i < tc.wantFirst+cnt; i++ {
				if segOf(want[i].base) != segOf(want[tc.wantFirst].base) {
					cnt = i - tc.wantFirst
					break
				}
			}
			var exp []byte
			for _, a := range want[tc.wantFirst : tc.wantFirst+cnt] {
				exp = append(exp, a.bytes...)
			}
			got := make([]byte, r.Len)
			if _, err := r.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, exp) {
				t.Fatalf("got batches %v, want %d from %d", batchOffsets(t, got), cnt, want[tc.wantFirst].base)
			}
			if r.BaseOffset != want[tc.wantFirst].base || r.LastOffset != want[tc.wantFirst+cnt-1].last {
				t.Fatalf("region offsets %d-%d", r.BaseOffset, r.LastOffset)
			}
		})
	}
}

func TestReadContinuesInTheNextSegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	tl := openTestLog(t, cfg)
	want := tl.appendN(30, 200)
	if tl.NumSegments() < 3 {
		t.Fatalf("%d segments", tl.NumSegments())
	}
	tl.mu.RLock()
	second := tl.segs[1].base
	tl.mu.RUnlock()
	r, err := tl.Read(second, tl.EndOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.BaseOffset != second || r.Pos != 0 {
		t.Fatalf("read at segment start: %+v", r)
	}
	checkContents(t, tl.Log, want)
}

func TestReadOutOfRange(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(10, 10)
	end := tl.EndOffset()
	for _, off := range []int64{-1, end + 1, math.MaxInt64} {
		_, err := tl.Read(off, math.MaxInt64, 100)
		mustErr(t, err, ErrOffsetOutOfRange)
	}
	if err := tl.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	_, err := tl.Read(4, end, 100)
	mustErr(t, err, ErrOffsetOutOfRange)
	if _, err := tl.Read(5, end, 100); err != nil {
		t.Fatal(err)
	}
}

func TestRollBySize(t *testing.T) {
	cfg := testConfig()
	tl := openTestLog(t, cfg)
	b := simpleBatch(t, 1, 1, 1000, 0)
	cfg.SegmentBytes = int64(3 * len(b))
	tl.SetConfig(cfg)
	for i := range 7 {
		tl.append(simpleBatch(t, uint64(i), 1, 1000, 0), 0)
	}
	// 3 batches fit per segment: 3 + 3 + 1.
	if n := tl.NumSegments(); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
	want := []string{"00000000000000000000.log", "00000000000000000003.log", "00000000000000000006.log"}
	if got := segmentFiles(t, tl.dir); !equalStrings(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
}

func TestRollByTime(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMS = 60_000
	tl := openTestLog(t, cfg)
	ts := func() int64 { return tl.clock.Now().UnixMilli() }
	tl.append(simpleBatch(t, 1, 1, 10, ts()), 0)
	tl.clock.Advance(30 * time.Second)
	tl.append(simpleBatch(t, 2, 1, 10, ts()), 0)
	if n := tl.NumSegments(); n != 1 {
		t.Fatalf("%d segments after 30s, want 1", n)
	}
	tl.clock.Advance(31 * time.Second)
	tl.append(simpleBatch(t, 3, 1, 10, ts()), 0)
	if n := tl.NumSegments(); n != 2 {
		t.Fatalf("%d segments after 61s, want 2", n)
	}
	// The age survives a restart: it comes from the first batch.
	tl.reopen()
	tl.clock.Advance(61 * time.Second)
	tl.append(simpleBatch(t, 4, 1, 10, ts()), 0)
	if n := tl.NumSegments(); n != 3 {
		t.Fatalf("%d segments after reopen and 61s, want 3", n)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRetentionByTime(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.RetentionMS = 3600_000
	tl := openTestLog(t, cfg)
	var want []appended
	for range 4 { // 4 hours, one segment-ish per hour
		want = append(want, tl.appendN(6, 200)...)
		tl.clock.Advance(time.Hour)
	}
	before := tl.NumSegments()
	n, err := tl.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || tl.NumSegments() != before-n {
		t.Fatalf("deleted %d of %d segments", n, before)
	}
	start := tl.StartOffset()
	// Everything older than an hour is gone; what remains reads back.
	var kept []appended
	for _, a := range want {
		if a.base >= start {
			kept = append(kept, a)
		}
	}
	tsOf := func(a appended) int64 { h := headerOf(t, a.bytes); return h.MaxTimestamp }
	for _, a := range kept {
		if tl.clock.Now().UnixMilli()-tsOf(a) > cfg.RetentionMS+3600_000 {
			t.Fatalf("batch %d with timestamp %d kept", a.base, tsOf(a))
		}
	}
	checkContents(t, tl.Log, kept)
	// Never the active segment, even when everything expired.
	tl.clock.Advance(100 * time.Hour)
	if _, err := tl.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if tl.NumSegments() != 1 {
		t.Fatalf("%d segments left, want the active one", tl.NumSegments())
	}
	tl.reopen()
	if tl.StartOffset() != start && tl.StartOffset() < start {
		t.Fatalf("log start %d went back below %d after reopen", tl.StartOffset(), start)
	}
}

func TestRetentionByBytes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.RetentionMS = -1
	tl := openTestLog(t, cfg)
	want := tl.appendN(60, 200)
	cfg.RetentionBytes = 5000
	tl.SetConfig(cfg)
	n, err := tl.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("nothing deleted")
	}
	if size := tl.Size(); size < cfg.RetentionBytes || size > cfg.RetentionBytes+cfg.SegmentBytes {
		t.Fatalf("size %d after retention of %d bytes", size, cfg.RetentionBytes)
	}
	var kept []appended
	for _, a := range want {
		if a.base >= tl.StartOffset() {
			kept = append(kept, a)
		}
	}
	checkContents(t, tl.Log, kept)
	if kept[0].base != tl.StartOffset() {
		t.Fatalf("log start %d is not the first kept batch %d", tl.StartOffset(), kept[0].base)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	tl := openTestLog(t, cfg)
	want := tl.appendN(40, 200)
	segs := tl.NumSegments()
	mid := want[21].base + 1 // inside a batch of 2 records
	if err := tl.DeleteRecordsBefore(mid); err != nil {
		t.Fatal(err)
	}
	if tl.StartOffset() != mid {
		t.Fatalf("log start %d, want %d", tl.StartOffset(), mid)
	}
	if tl.NumSegments() >= segs {
		t.Fatalf("no segment deleted (%d)", tl.NumSegments())
	}
	_, err := tl.Read(mid-1, tl.EndOffset(), 1)
	mustErr(t, err, ErrOffsetOutOfRange)
	got, err := tl.ReadBytes(mid, tl.EndOffset(), 1)
	if err != nil || !bytes.Equal(got, want[21].bytes) {
		t.Fatalf("read at the new log start: %v", err)
	}
	mustErr(t, tl.DeleteRecordsBefore(tl.EndOffset()+1), ErrOffsetOutOfRange)
	if err := tl.DeleteRecordsBefore(3); err != nil || tl.StartOffset() != mid {
		t.Fatalf("lowering the log start: %v, start %d", err, tl.StartOffset())
	}
	tl.reopen()
	if tl.StartOffset() != mid {
		t.Fatalf("log start %d after reopen, want %d", tl.StartOffset(), mid)
	}
	checkContents(t, tl.Log, want[22:])
}

func TestTruncateToThenAppendAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int // truncate at this batch's base offset (+ inside)
		mid   bool
	}{
		{"active segment", 35, false},
		{"older segment", 5, false},
		{"inside a batch", 12, true},
		{"everything", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 2000
			tl := openTestLog(t, cfg)
			want := make([]appended, 0, 40)
			for i := range 40 {
				want = append(want, tl.append(simpleBatch(t, uint64(i), 2, 200, int64(1000+i)), int32(i/10)))
			}
			at := want[tc.batch].base
			if tc.mid {
				at++
			}
			if err := tl.TruncateTo(at); err != nil {
				t.Fatal(err)
			}
			if tl.EndOffset() != want[tc.batch].base {
				t.Fatalf("end %d, want %d", tl.EndOffset(), want[tc.batch].base)
			}
			kept := want[:tc.batch]
			checkContents(t, tl.Log, kept)
			for _, e := range tl.LeaderEpochs() {
				if e.StartOffset >= tl.EndOffset() {
					t.Fatalf("epoch entry %+v past the end %d", e, tl.EndOffset())
				}
			}
			if ts, _ := tl.MaxTimestamp(); tc.batch > 0 && ts != int64(1000+tc.batch-1)+0 {
				// each batch has 2 records with the same timestamp
				t.Fatalf("max timestamp %d after truncation", ts)
			}
			more := tl.appendN(10, 300)
			kept = append(kept, more...)
			checkContents(t, tl.Log, kept)
			tl.reopen()
			checkContents(t, tl.Log, kept)
		})
	}
}

func headerOf(t testing.TB, b []byte) recordHeader {
	t.Helper()
	_, _, h, err := nextBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestOffsetForTimestampAndMaxTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	tl := openTestLog(t, cfg)
	// Batches of 4 records at timestamps 1000+10*i + 0,1,2,3.
	var want []appended
	for i := range 30 {
		want = append(want, tl.append(makeBatch(t, batchSpec{records: 4, valueSize: 100, ts: int64(1000 + 10*i), tsStep: 1, seed: uint64(i)}), 0))
	}
	for _, tc := range []struct {
		ts, wantOffset, wantTS int64
	}{
		{0, 0, 1000},
		{1000, 0, 1000},
		{1002, 2, 1002},
		{1004, 4, 1010},
		{1123, 12*4 + 3, 1123},
		{1293, 29*4 + 3, 1293},
	} {
		off, ts, err := tl.OffsetForTimestamp(tc.ts)
		if err != nil || off != tc.wantOffset || ts != tc.wantTS {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", tc.ts, off, ts, err, tc.wantOffset, tc.wantTS)
		}
	}
	_, _, err := tl.OffsetForTimestamp(1294)
	mustErr(t, err, ErrNotFound)
	if ts, off := tl.MaxTimestamp(); ts != 1293 || off != 119 {
		t.Fatalf("MaxTimestamp = %d, %d; want 1293, 119", ts, off)
	}
	// An older timestamp later in the log does not change the maximum.
	tl.append(makeBatch(t, batchSpec{records: 2, ts: 500, seed: 99}), 0)
	if ts, off := tl.MaxTimestamp(); ts != 1293 || off != 119 {
		t.Fatalf("MaxTimestamp = %d, %d; want 1293, 119", ts, off)
	}
	tl.reopen()
	if ts, off := tl.MaxTimestamp(); ts != 1293 || off != 119 {
		t.Fatalf("after reopen MaxTimestamp = %d, %d; want 1293, 119", ts, off)
	}
	if off, ts, err := tl.OffsetForTimestamp(1123); err != nil || off != 51 || ts != 1123 {
		t.Fatalf("after reopen OffsetForTimestamp = %d, %d, %v", off, ts, err)
	}
}

func TestLogAppendTimeStampsTheBatch(t *testing.T) {
	cfg := testConfig()
	cfg.LogAppendTime = true
	tl := openTestLog(t, cfg)
	b := makeBatch(t, batchSpec{records: 3, ts: 5, seed: 1})
	res, err := tl.Append(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := tl.clock.Now().UnixMilli()
	if res.LogAppendTime != now {
		t.Fatalf("LogAppendTime %d, want %d", res.LogAppendTime, now)
	}
	got, err := tl.ReadBytes(0, tl.EndOffset(), 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := validateBatch(got)
	if err != nil {
		t.Fatalf("stored batch invalid: %v", err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != now {
		t.Fatalf("stored batch: log append time %v, max timestamp %d", h.LogAppendTime(), h.MaxTimestamp)
	}
	if off, ts, err := tl.OffsetForTimestamp(now); err != nil || off != 0 || ts != now {
		t.Fatalf("OffsetForTimestamp = %d %d %v", off, ts, err)
	}
	cfg.LogAppendTime = false
	tl.SetConfig(cfg)
	if res, _ := tl.Append(makeBatch(t, batchSpec{seed: 2}), 0); res.LogAppendTime != -1 {
		t.Fatalf("LogAppendTime %d with CreateTime", res.LogAppendTime)
	}
}

func TestLeaderEpochHistory(t *testing.T) {
	tl := openTestLog(t, testConfig())
	epochs := []int32{0, 0, 1, 1, 1, 3, 3}
	for i, e := range epochs {
		tl.append(simpleBatch(t, uint64(i), 2, 10, 0), e)
	}
	want := []EpochEntry{{0, 0}, {1, 4}, {3, 10}}
	check := func() {
		t.Helper()
		if got := tl.LeaderEpochs(); !equalEpochs(got, want) {
			t.Fatalf("epochs %v, want %v", got, want)
		}
	}
	check()
	tl.reopen()
	check()
	for _, tc := range []struct {
		epoch     int32
		end       int64
		wantEpoch int32
	}{
		{0, 4, 0}, {1, 10, 1}, {2, 10, 1}, {3, 14, 3}, {4, -1, -1}, {-1, -1, -1},
	} {
		end, e := tl.EndOffsetForEpoch(tc.epoch)
		if end != tc.end || e != tc.wantEpoch {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tc.epoch, end, e, tc.end, tc.wantEpoch)
		}
	}
	// Without the checkpoint the history is rebuilt from the batches.
	tl.Close()
	if err := os.Remove(filepath.Join(tl.dir, leaderEpochFile)); err != nil {
		t.Fatal(err)
	}
	tl.Log = nil
	tl.open()
	check()
	if err := tl.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	want = want[:2]
	check()
	tl.reopen()
	check()
}

func equalEpochs(a, b []EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRegionStaysReadableAfterRetentionDeletesItsSegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.RetentionMS = -1
	tl := openTestLog(t, cfg)
	want := tl.appendN(30, 200)
	r, err := tl.Read(0, tl.EndOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetentionBytes = 0
	tl.SetConfig(cfg)
	if n, err := tl.EnforceRetention(); err != nil || n == 0 {
		t.Fatalf("retention: %d, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(tl.dir, segmentName(0, logExt))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 0 still there: %v", err)
	}
	got := make([]byte, r.Len)
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatalf("read deleted segment through region: %v", err)
	}
	if !bytes.HasPrefix(got, want[0].bytes) {
		t.Fatal("region bytes differ")
	}
	var buf bytes.Buffer
	if n, err := r.WriteTo(&buf); err != nil || n != r.Len {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	r.Release()
	r.Release() // harmless
}

func TestIntervalFlushAdvancesTheRecoveryPoint(t *testing.T) {
	cfg := testConfig()
	cfg.FlushPolicy = FlushInterval
	cfg.FlushInterval = time.Second
	tl := openTestLog(t, cfg)
	tl.appendN(10, 100)
	if rp := tl.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before any flush", rp)
	}
	end := tl.EndOffset()
	tl.clock.Advance(time.Second)
	mqtest.WaitFor(t, "the recovery point to reach the end offset "+itoa(end), func() (bool, string) {
		rp := tl.RecoveryPoint()
		return rp == end, "recovery point " + itoa(rp)
	})
	b, err := os.ReadFile(filepath.Join(tl.dir, recoveryPointFile))
	if err != nil {
		t.Fatal(err)
	}
	if off, err := decodeOffsetCheckpoint("recovery-point", b); err != nil || off != end {
		t.Fatalf("checkpoint %d, %v; want %d", off, err, end)
	}
}

func TestConcurrentAppendsAndReads(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushOS, FlushAlways} {
		t.Run(policy.String(), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 16 << 10
			cfg.FlushPolicy = policy
			tl := openTestLog(t, cfg)
			const writers, perWriter = 4, 50
			var wg sync.WaitGroup
			errs := make(chan error, writers+1)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						if _, err := tl.Append(simpleBatch(t, uint64(w*1000+i), 2, 100, 0), 0); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			done := make(chan struct{})
			go func() { // a reader following the log
				defer close(done)
				off := int64(0)
				for off < writers*perWriter*2 {
					b, err := tl.ReadBytes(off, tl.EndOffset(), 4096)
					if err != nil {
						errs <- err
						return
					}
					if len(b) > 0 {
						off = lastOffsetOf(t, b) + 1
					}
				}
			}()
			wg.Wait()
			<-done
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if tl.EndOffset() != writers*perWriter*2 {
				t.Fatalf("end %d", tl.EndOffset())
			}
		})
	}
}

func TestClosedLogRefusesOperations(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(2, 10)
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err := tl.Append(simpleBatch(t, 1, 1, 1, 0), 0)
	mustErr(t, err, ErrClosed)
	_, err = tl.Read(0, 10, 10)
	mustErr(t, err, ErrClosed)
	mustErr(t, tl.Flush(), ErrClosed)
}

func TestDeleteRemovesTheDirectory(t *testing.T) {
	tl := openTestLog(t, testConfig())
	tl.appendN(5, 10)
	if err := tl.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tl.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory still there: %v", err)
	}
}

func TestParseFlushPolicy(t *testing.T) {
	for _, p := range []FlushPolicy{FlushOS, FlushInterval, FlushAlways} {
		got, err := ParseFlushPolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParseFlushPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseFlushPolicy("sometimes"); err == nil {
		t.Fatal("no error for an unknown policy")
	}
}
