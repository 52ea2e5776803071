package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs"
	"github.com/mqproject/mq/lib/vfs/crashfs"
	"github.com/mqproject/mq/lib/vfs/faultfs"
)

// kv is a record to append: a nil value is a tombstone, a nil key a record
// without key.
type kv struct {
	key, value []byte
}

func put(k, v string) kv { return kv{[]byte(k), []byte(v)} }
func tomb(k string) kv   { return kv{key: []byte(k)} }

// kvBatch builds a batch of records at timestamp ts.
func kvBatch(t testing.TB, ts int64, kvs ...kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value}
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: ts}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// storedRecord is a record as the log serves it.
type storedRecord struct {
	offset     int64
	ts         int64
	key, value []byte
}

// readAll reads the whole log, checking that batches tile the offsets
// (each starts where the one before ended) and that record offsets
// increase, and returns the records.
func readAll(t testing.TB, l *Log, maxBytes int) []storedRecord {
	t.Helper()
	var out []storedRecord
	end := l.EndOffset()
	next := l.StartOffset()
	for next < end {
		b, err := l.ReadBytes(next, end, maxBytes)
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		if len(b) == 0 {
			t.Fatalf("empty read at %d below the end %d", next, end)
		}
		for len(b) > 0 {
			batch, rest, h, err := record.Next(b)
			if err != nil {
				t.Fatalf("batch at %d: %v", next, err)
			}
			if err := record.CheckCRC(batch); err != nil {
				t.Fatalf("batch at %d: %v", h.BaseOffset, err)
			}
			if h.BaseOffset > next || h.LastOffset() < next {
				t.Fatalf("batch [%d, %d] read at %d", h.BaseOffset, h.LastOffset(), next)
			}
			err = record.Iterate(batch, 0, func(r *record.Record) error {
				off := r.Offset(&h)
				if off > h.LastOffset() || len(out) > 0 && off <= out[len(out)-1].offset {
					return fmt.Errorf("record offset %d out of order in batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
				}
				if off >= next {
					out = append(out, storedRecord{offset: off, ts: r.Timestamp(&h), key: bytes.Clone(r.Key), value: bytes.Clone(r.Value)})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			next = h.LastOffset() + 1
			b = rest
		}
	}
	return out
}

// latestView is the latest value per key (a tombstone deletes the key), and
// the offset it was appended at.
type latestEntry struct {
	value  string
	offset int64
}

func latestView(recs []storedRecord) map[string]latestEntry {
	m := map[string]latestEntry{}
	for _, r := range recs {
		if r.key == nil {
			continue
		}
		if r.value == nil {
			delete(m, string(r.key))
			continue
		}
		m[string(r.key)] = latestEntry{string(r.value), r.offset}
	}
	return m
}

func cleanConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 128
	return cfg
}

func mustClean(t testing.TB, l *Log, o CleanOptions) CleanResult {
	t.Helper()
	res, err := l.Clean(context.Background(), o)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return res
}

func mustFlush(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

// offsetsOf returns the offsets of recs with key.
func offsetsOf(recs []storedRecord, key string) []int64 {
	var out []int64
	for _, r := range recs {
		if string(r.key) == key {
			out = append(out, r.offset)
		}
	}
	return out
}

func TestCleanKeepsLatestValuePerKeyAtItsOffset(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	offsets := map[string]int64{}
	for i := range 200 {
		k := fmt.Sprintf("k%d", i%10)
		res, err := tl.Append(kvBatch(t, ts+int64(i), put(k, fmt.Sprintf("v%d", i)), kv{nil, []byte("nokey")}), 0)
		if err != nil {
			t.Fatal(err)
		}
		offsets[k] = res.BaseOffset
	}
	mustFlush(t, tl.Log)
	before := readAll(t, tl.Log, 1<<20)
	want := latestView(before)
	activeBase := tl.segs[len(tl.segs)-1].base
	activeBefore := readActive(t, tl.Log)

	res := mustClean(t, tl.Log, CleanOptions{})
	if res.RecordsRemoved == 0 || res.BytesAfter >= res.BytesBefore {
		t.Fatalf("pass removed nothing: %+v", res)
	}
	if res.CleanedTo != activeBase {
		t.Fatalf("cleaned to %d, want the active segment's base %d", res.CleanedTo, activeBase)
	}
	for _, maxBytes := range []int{1, 100, 1 << 20} {
		after := readAll(t, tl.Log, maxBytes)
		if got := latestView(after); !equalViews(got, want) {
			t.Fatalf("maxBytes %d: latest view after cleaning %v, want %v", maxBytes, got, want)
		}
		// Every key has at most one record below the active segment:
		// its latest there.
		for k, e := range want {
			offs := offsetsOf(after, k)
			if e.offset != offsets[k] || offs[len(offs)-1] != offsets[k] {
				t.Fatalf("key %s at %v, appended last at %d", k, offs, offsets[k])
			}
			if len(offs) > 1 && offs[1] < activeBase {
				t.Fatalf("key %s keeps old records at %v below the active segment %d", k, offs, activeBase)
			}
		}
		// Records without key stay, at their offsets.
		var nokey int
		for _, r := range after {
			if r.key == nil {
				nokey++
			}
		}
		if nokey != 200 {
			t.Fatalf("%d records without key, want 200", nokey)
		}
	}
	if got := readActive(t, tl.Log); !bytes.Equal(got, activeBefore) || tl.segs[len(tl.segs)-1].base != activeBase {
		t.Fatal("the active segment changed")
	}
	// A second pass over a clean log finds nothing dirty.
	if res := mustClean(t, tl.Log, CleanOptions{}); res.RecordsRemoved != 0 || res.SegmentsBefore != 0 {
		t.Fatalf("second pass: %+v", res)
	}
	// And everything survives a reopen, with no damage and nothing for
	// the scrubber to complain about.
	tl.reopen()
	if got := latestView(readAll(t, tl.Log, 1<<20)); !equalViews(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	st, err := tl.Scrub(context.Background(), nil)
	if err != nil || st.Damaged != 0 || len(tl.Damaged()) != 0 {
		t.Fatalf("scrub after cleaning: %+v %v %v", st, err, tl.Damaged())
	}
	c, err := tl.CleanableState(CleanOptions{})
	if err != nil || c.FirstDirtyOffset != activeBase || c.DirtyBytes != 0 || c.DirtyRatio != 0 || c.LastCleaned.IsZero() {
		t.Fatalf("cleanable after reopen: %+v %v", c, err)
	}
}

func equalViews(a, b map[string]latestEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func readActive(t testing.TB, l *Log) []byte {
	t.Helper()
	l.mu.RLock()
	seg := l.active()
	b := make([]byte, seg.size)
	_, err := seg.file.ReadAt(b, 0)
	l.mu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCleanKeepsTombstonesForTheDeleteRetention(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 50 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("k%d", i%5), "value")), 0)
	}
	tl.append(kvBatch(t, ts, tomb("k1"), tomb("k2")), 0)
	for i := range 40 { // push the tombstones out of the active segment
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("x%d", i), "value")), 0)
	}
	mustFlush(t, tl.Log)
	retention := time.Hour
	now := testStart.Add(time.Minute)
	o := CleanOptions{Now: now, DeleteRetention: retention}
	res := mustClean(t, tl.Log, o)
	if res.TombstonesRemoved != 0 {
		t.Fatalf("first pass removed %d tombstones", res.TombstonesRemoved)
	}
	recs := readAll(t, tl.Log, 1<<20)
	for _, k := range []string{"k1", "k2"} {
		offs := offsetsOf(recs, k)
		if len(offs) != 1 || recs[slices.IndexFunc(recs, func(r storedRecord) bool { return r.offset == offs[0] })].value != nil {
			t.Fatalf("key %s: records at %v, want the tombstone alone", k, offs)
		}
	}
	// Dirty the log again so that passes have work, within the
	// retention: the tombstones stay.
	more := func() {
		for i := range 40 {
			tl.append(kvBatch(t, ts, put(fmt.Sprintf("x%d", i), "again")), 0)
		}
		mustFlush(t, tl.Log)
	}
	more()
	o.Now = now.Add(retention - time.Millisecond)
	if res := mustClean(t, tl.Log, o); res.TombstonesRemoved != 0 {
		t.Fatalf("pass within the retention removed %d tombstones", res.TombstonesRemoved)
	}
	tl.reopen() // the cleaned-at times are checkpointed
	more()
	o.Now = now.Add(retention)
	if res := mustClean(t, tl.Log, o); res.TombstonesRemoved != 2 {
		t.Fatalf("pass after the retention removed %d tombstones, want 2", res.TombstonesRemoved)
	}
	recs = readAll(t, tl.Log, 1<<20)
	for _, k := range []string{"k1", "k2"} {
		if offs := offsetsOf(recs, k); len(offs) != 0 {
			t.Fatalf("key %s still at %v", k, offs)
		}
	}
	if v := latestView(recs); v["k0"].value != "value" || v["k3"].value != "value" {
		t.Fatalf("other keys lost: %v", v)
	}
}

func TestCleanHonoursMinCompactionLag(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 100 {
		tl.append(kvBatch(t, ts+int64(i)*1000, put("k", fmt.Sprint(i))), 0)
	}
	mustFlush(t, tl.Log)
	tl.mu.RLock()
	second := tl.segs[1]
	tl.mu.RUnlock()
	secondTS, _, _ := func() (int64, uint32, error) { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.segMaxTSLocked(second) }()
	// Only the first segment is older than the lag.
	now := time.UnixMilli(secondTS).Add(time.Hour - time.Millisecond)
	o := CleanOptions{Now: now, MinCompactionLag: time.Hour}
	c, err := tl.CleanableState(o)
	if err != nil {
		t.Fatal(err)
	}
	if c.EndOffset != second.base {
		t.Fatalf("cleanable up to %d, want %d (the second segment is too recent)", c.EndOffset, second.base)
	}
	res := mustClean(t, tl.Log, o)
	if res.CleanedTo != second.base {
		t.Fatalf("cleaned to %d, want %d", res.CleanedTo, second.base)
	}
	recs := readAll(t, tl.Log, 1<<20)
	if recs[0].offset != second.base-1 {
		t.Fatalf("first record at %d, want only the latest of the first segment (%d)", recs[0].offset, second.base-1)
	}
	for i, r := range recs[1:] {
		if r.offset != second.base+int64(i) {
			t.Fatalf("record %d at %d: a segment within the lag was cleaned", i, r.offset)
		}
	}
	// With no lag a pass would clean everything closed.
	if c, _ := tl.CleanableState(CleanOptions{Now: now}); c.EndOffset != tl.active().base || c.DirtyRatio <= 0 {
		t.Fatalf("without lag: %+v", c)
	}
}

func TestCleanableStateReportsMaxCompactionLag(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 60 {
		tl.append(kvBatch(t, ts+int64(i), put("k", fmt.Sprint(i))), 0)
	}
	mustFlush(t, tl.Log)
	o := CleanOptions{Now: testStart.Add(time.Minute), MaxCompactionLag: time.Hour}
	if c, _ := tl.CleanableState(o); c.MustClean || c.DirtyRatio != 1 {
		t.Fatalf("young log: %+v", c)
	}
	o.Now = testStart.Add(time.Hour + time.Second)
	if c, _ := tl.CleanableState(o); !c.MustClean {
		t.Fatalf("log older than the max lag: %+v", c)
	}
	mustClean(t, tl.Log, o)
	if c, _ := tl.CleanableState(o); c.MustClean || c.DirtyBytes != 0 {
		t.Fatalf("after cleaning: %+v", c)
	}
}

func TestCleanMergesSegmentsAndRebuildsIndexes(t *testing.T) {
	cfg := cleanConfig()
	tl := openTestLog(t, cfg)
	ts := testStart.UnixMilli()
	for i := range 300 {
		tl.append(kvBatch(t, ts+int64(i)*10, put(fmt.Sprintf("k%d", i%40), fmt.Sprintf("value-%04d", i))), 0)
	}
	mustFlush(t, tl.Log)
	segsBefore := tl.NumSegments()
	want := latestView(readAll(t, tl.Log, 1<<20))
	res := mustClean(t, tl.Log, CleanOptions{SegmentBytes: 4096})
	if tl.NumSegments() >= segsBefore || res.SegmentsAfter >= res.SegmentsBefore {
		t.Fatalf("%d segments before, %d after: %+v", segsBefore, tl.NumSegments(), res)
	}
	tl.mu.RLock()
	for _, seg := range tl.segs[:len(tl.segs)-1] {
		if seg.size > 4096 {
			t.Errorf("segment %d of %d bytes, over the merge target", seg.base, seg.size)
		}
	}
	tl.mu.RUnlock()
	// Merge everything closed into one, on the next pass with dirt.
	for i := range 30 {
		tl.append(kvBatch(t, ts+3000+int64(i)*10, put(fmt.Sprintf("k%d", i%40), fmt.Sprintf("value-%04d", 300+i))), 0)
	}
	mustFlush(t, tl.Log)
	want = latestView(readAll(t, tl.Log, 1<<20))
	mustClean(t, tl.Log, CleanOptions{SegmentBytes: 1 << 20})
	if n := tl.NumSegments(); n != 2 {
		t.Fatalf("%d segments after merging into one", n)
	}
	tl.reopen()
	recs := readAll(t, tl.Log, 1<<20)
	if got := latestView(recs); !equalViews(got, want) {
		t.Fatalf("after merge: %v, want %v", got, want)
	}
	// The rebuilt indexes are what a rebuild from the data gives, and
	// lookups by offset and by time land on each record.
	tl.mu.Lock()
	seg := tl.segs[0]
	if err := tl.openSegmentLocked(seg); err != nil {
		t.Fatal(err)
	}
	idx, tidx := bytes.Clone(seg.idx), bytes.Clone(seg.tidx)
	tl.mu.Unlock()
	if len(tidx) == 0 {
		t.Fatal("merged segment has an empty time index")
	}
	_, indexPath, timeIndexPath := segmentPaths(tl.dir, seg.base)
	_ = os.Remove(indexPath)
	_ = os.Remove(timeIndexPath)
	sf, ridx, rtidx, err := tl.loadSegmentFiles(seg.base, seg.size, tl.cfg.IndexIntervalBytes)
	if err != nil {
		t.Fatal(err)
	}
	sf.release()
	if !bytes.Equal(idx, ridx) || !bytes.Equal(tidx, rtidx) {
		t.Fatal("the cleaner's indexes differ from those rebuilt from the data")
	}
	for _, r := range recs {
		b, err := tl.ReadBytes(r.offset, tl.EndOffset(), 1)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := record.ParseHeader(b)
		if r.offset < h.BaseOffset || r.offset > h.LastOffset() {
			t.Fatalf("read at %d returned batch [%d, %d]", r.offset, h.BaseOffset, h.LastOffset())
		}
		off, gotTS, err := tl.OffsetForTimestamp(r.ts)
		if err != nil || off != r.offset || gotTS != r.ts {
			t.Fatalf("offset for time %d: %d %d %v, want %d", r.ts, off, gotTS, err, r.offset)
		}
	}
}

func TestCleanIsStoppedByConcurrentTruncation(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 100 {
		tl.append(kvBatch(t, ts, put("k", fmt.Sprint(i))), 0)
	}
	mustFlush(t, tl.Log)
	l := tl.Log
	l.mu.Lock()
	p, err := l.planLocked(CleanOptions{})
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(p.segs[1].base); err != nil {
		t.Fatal(err)
	}
	out := &groupOutput{base: p.segs[0].base}
	f, err := l.fs.OpenFile(l.path(segmentName(out.base, logExt)+cleanedSuffix), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	out.f = f
	ok, err := l.commitGroup(p, []int{0}, out)
	if ok || err != nil {
		t.Fatalf("commit after a truncation: %v %v", ok, err)
	}
	if _, err := os.Stat(l.path(segmentName(out.base, logExt) + cleanedSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cleaned file left behind: %v", err)
	}
}

func TestCleanIdempotentProducerStaysCorrect(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	const pid = 7
	var batches [][]byte
	idem := func(seq int32, kvs ...kv) []byte {
		recs := make([]record.Record, len(kvs))
		for i, r := range kvs {
			recs[i] = record.Record{Key: r.key, Value: r.value}
		}
		b, err := record.Build(record.BuildOptions{BaseTimestamp: ts, Idempotent: true, ProducerID: pid, ProducerEpoch: 3, BaseSequence: seq}, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var seq int32
	var last AppendResult
	for i := range 20 {
		b := idem(seq, put("p", fmt.Sprint(i)), put("q", fmt.Sprint(i)))
		batches = append(batches, bytes.Clone(b))
		res, err := tl.Append(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		last = res
		seq += 2
	}
	// Another writer overwrites the producer's keys, so that a pass
	// leaves nothing of the producer's batches.
	for i := range 60 {
		tl.append(kvBatch(t, ts, put("p", fmt.Sprint(-i)), put("q", fmt.Sprint(-i))), 0)
	}
	mustFlush(t, tl.Log)
	res := mustClean(t, tl.Log, CleanOptions{})
	if res.RecordsRemoved < 40 {
		t.Fatalf("removed %d records", res.RecordsRemoved)
	}
	for _, r := range readAll(t, tl.Log, 1<<20) {
		if r.offset <= last.LastOffset {
			t.Fatalf("record of the producer at %d survived", r.offset)
		}
	}
	// The producer's last batch keeps its header, records gone.
	b, err := tl.ReadBytes(last.BaseOffset, tl.EndOffset(), 1)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := record.ParseHeader(b)
	if h.BaseOffset != last.BaseOffset || h.LastOffset() != last.LastOffset || h.ProducerID != pid || h.ProducerEpoch != 3 ||
		h.BaseSequence != seq-2 || h.NumRecords != 0 {
		t.Fatalf("producer's last batch after cleaning: %+v", h)
	}
	check := func(label string) {
		t.Helper()
		// A retry of the last batch is a duplicate with its offsets.
		res, err := tl.Append(bytes.Clone(batches[len(batches)-1]), 0)
		if err != nil || !res.Duplicate || res.BaseOffset != last.BaseOffset {
			t.Fatalf("%s: retry of the last batch: %+v %v", label, res, err)
		}
		// A sequence gap is still refused.
		if _, err := tl.Append(idem(seq+1, put("p", "x")), 0); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("%s: out of order sequence: %v", label, err)
		}
	}
	check("after cleaning")
	tl.reopen()
	check("after reopen")
	// Without the snapshot the producer state is rebuilt from the
	// cleaned log: the kept header tells the last sequence.
	tl.crash()
	if err := os.Remove(filepath.Join(tl.dir, producerStateFile)); err != nil {
		t.Fatal(err)
	}
	tl.open()
	check("rebuilt from the log")
	res2, err := tl.Append(idem(seq, put("p", "next")), 0)
	if err != nil || res2.Duplicate {
		t.Fatalf("next sequence: %+v %v", res2, err)
	}
	// Once the producer has a newer batch, the empty one goes.
	for i := range 60 {
		tl.append(kvBatch(t, ts, put("q", fmt.Sprint(i))), 0)
	}
	mustFlush(t, tl.Log)
	mustClean(t, tl.Log, CleanOptions{})
	b, err = tl.ReadBytes(last.BaseOffset, tl.EndOffset(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := record.ParseHeader(b); h.ProducerID == pid {
		t.Fatalf("the producer's old batch without records stayed: %+v", h)
	}
}

func TestCleanStopsWhereTheDedupeBufferFills(t *testing.T) {
	cfg := cleanConfig()
	cfg.SegmentBytes = 64 << 10
	tl := openTestLog(t, cfg)
	ts := testStart.UnixMilli()
	for i := range 8000 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("key-%d", i), "v")), 0)
	}
	for i := range 100 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("key-%d", i), "w")), 0)
	}
	mustFlush(t, tl.Log)
	want := latestView(readAll(t, tl.Log, 1<<20))
	o := CleanOptions{DedupeBufferBytes: minDedupeBufferBytes}
	capacity := newOffsetMap(minDedupeBufferBytes).maxKeys()
	end := tl.active().base
	passes := 0
	for {
		c, err := tl.CleanableState(o)
		if err != nil {
			t.Fatal(err)
		}
		if c.FirstDirtyOffset >= end {
			break
		}
		res := mustClean(t, tl.Log, o)
		passes++
		if res.CleanedTo <= res.FirstDirtyOffset || res.CleanedTo-res.FirstDirtyOffset > int64(capacity) {
			t.Fatalf("pass %d: %+v, map holds %d", passes, res, capacity)
		}
		if got := latestView(readAll(t, tl.Log, 1<<20)); !equalViews(got, want) {
			t.Fatalf("pass %d: latest view differs", passes)
		}
	}
	if passes < 2 {
		t.Fatalf("%d passes for %d keys in a map of %d", passes, 8100, capacity)
	}
	seen := map[string]bool{}
	for _, r := range readAll(t, tl.Log, 1<<20) {
		if r.offset < end && seen[string(r.key)] {
			t.Fatalf("key %s twice below the active segment", r.key)
		}
		seen[string(r.key)] = true
	}
}

// cleanedAt returns when offset was first cleaned, ok false when never.
func cleanedAt(s *cleanerState, offset int64) (int64, bool) {
	i, ok := s.rangeOf(offset)
	if !ok {
		return 0, false
	}
	return s.ranges[i].at, true
}

func TestCleanedRangesCheckpoint(t *testing.T) {
	var s cleanerState
	s.add(0, 10, 100)
	s.add(5, 20, 200)
	s.add(30, 40, 300)
	if at, ok := cleanedAt(&s, 7); !ok || at != 100 {
		t.Fatalf("7: %d %v", at, ok)
	}
	if at, ok := cleanedAt(&s, 15); !ok || at != 200 {
		t.Fatalf("15: %d %v", at, ok)
	}
	if _, ok := cleanedAt(&s, 25); ok {
		t.Fatal("25 was never cleaned")
	}
	s.firstDirty = 40
	s.ranges[1].tombstones = false
	got, err := decodeCleanerState(encodeCleanerState(s))
	if err != nil || got.firstDirty != 40 || !slices.Equal(got.ranges, s.ranges) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// A line without the tombstones field may hold some.
	old, err := decodeCleanerState([]byte("mq cleaner-offset 1\n40\n1\n0 10 100\n"))
	if err != nil || !slices.Equal(old.ranges, []cleanedRange{{from: 0, to: 10, at: 100, tombstones: true}}) {
		t.Fatalf("a line of three fields: %+v %v", old, err)
	}
	for i := range 200 {
		s.add(int64(100+i), int64(101+i), int64(1000+i))
	}
	s.prune(0, math.MaxInt64)
	if len(s.ranges) > maxCleanedRanges {
		t.Fatalf("%d ranges", len(s.ranges))
	}
	// Joining only ever makes tombstones stay longer.
	for i := range 200 {
		if at, ok := cleanedAt(&s, int64(100+i)); !ok || at < int64(1000+i) {
			t.Fatalf("offset %d: cleaned at %d, was %d", 100+i, at, 1000+i)
		}
	}
	s.prune(0, 15)
	if _, ok := cleanedAt(&s, 15); ok || s.firstDirty != 15 {
		t.Fatalf("truncated state: %+v", s)
	}
}

func TestCleanRunsAlongsideAppendsAndReads(t *testing.T) {
	tl := openTestLogWith(t, cleanConfig(), Options{FS: crashfs.New(crashfs.Strict, 1)})
	ts := testStart.UnixMilli()
	m := newCleanModel()
	var mmu sync.Mutex
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // appender
		defer wg.Done()
		defer close(done)
		for i := range 1500 {
			kvs := []kv{put(fmt.Sprintf("k%d", i%23), fmt.Sprint(i))}
			if i%31 == 0 {
				kvs = []kv{tomb(fmt.Sprintf("k%d", i%23))}
			}
			mmu.Lock()
			res, err := tl.Append(kvBatch(t, ts, kvs...), 0)
			if err == nil {
				m.appended(res.BaseOffset, ts, kvs)
			}
			mmu.Unlock()
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // reader: every record it sees was appended at its offset
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			end := tl.EndOffset()
			for next := tl.StartOffset(); next < end; {
				b, err := tl.ReadBytes(next, end, 4096)
				if err != nil {
					errs <- fmt.Errorf("read %d: %w", next, err)
					return
				}
				for len(b) > 0 {
					batch, rest, h, err := record.Next(b)
					if err != nil || h.BaseOffset > next {
						errs <- fmt.Errorf("batch at %d read at %d: %v", h.BaseOffset, next, err)
						return
					}
					err = record.Iterate(batch, 0, func(r *record.Record) error {
						mmu.Lock()
						w := m.records[r.Offset(&h)]
						mmu.Unlock()
						if !bytes.Equal(w.key, r.Key) {
							return fmt.Errorf("record at %d has key %q, appended %q", r.Offset(&h), r.Key, w.key)
						}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
					next, b = h.LastOffset()+1, rest
				}
			}
		}
	}()
	passes := 0
loop:
	for {
		select {
		case <-done:
			break loop
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if err := tl.Flush(); err != nil {
			t.Fatal(err)
		}
		mustClean(t, tl.Log, CleanOptions{SegmentBytes: 4096})
		passes++
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	mustFlush(t, tl.Log)
	mustClean(t, tl.Log, CleanOptions{SegmentBytes: 4096})
	m.check(t, tl.Log, "after the appends")
	t.Logf("%d passes alongside 1500 appends", passes)
}

func TestCleanFailingWriteLeavesTheLogAsItWas(t *testing.T) {
	for _, ft := range []faultfs.Fault{
		{Op: faultfs.OpWrite, Suffix: logExt + cleanedSuffix, Times: 1},
		{Op: faultfs.OpSync, Suffix: logExt + cleanedSuffix, Times: 1},
		{Op: faultfs.OpWrite, Suffix: timeIndexExt + cleanedSuffix, After: 5, Times: 1},
		{Op: faultfs.OpWrite, Suffix: cleanerFile + vfs.TempSuffix, Times: 1},
	} {
		t.Run(fmt.Sprintf("%d%s", ft.Op, ft.Suffix), func(t *testing.T) {
			ffs := faultfs.New(nil)
			tl := openTestLogWith(t, cleanConfig(), Options{FS: ffs})
			ts := testStart.UnixMilli()
			m := newCleanModel()
			for i := range 100 {
				kvs := []kv{put(fmt.Sprintf("k%d", i%7), fmt.Sprint(i))}
				res := tl.append(kvBatch(t, ts, kvs...), 0)
				m.appended(res.base, ts, kvs)
			}
			mustFlush(t, tl.Log)
			ffs.Inject(ft)
			if _, err := tl.Clean(context.Background(), CleanOptions{}); err == nil {
				t.Fatal("clean did not fail")
			}
			ffs.Clear()
			m.check(t, tl.Log, "after the failed pass")
			entries, err := os.ReadDir(tl.dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); ext == cleanedSuffix || ext == swapSuffix {
					t.Fatalf("%s left behind", e.Name())
				}
			}
			if _, err := tl.Append(kvBatch(t, ts, put("k0", "after")), 0); err != nil {
				t.Fatalf("append after the failed pass: %v", err)
			}
			mustFlush(t, tl.Log)
			mustClean(t, tl.Log, CleanOptions{})
			tl.reopen()
			if v := latestView(readAll(t, tl.Log, 1<<20)); v["k0"].value != "after" || v["k6"].value != "97" {
				t.Fatalf("after a good pass and reopen: %v", v)
			}
		})
	}
}

func TestCleanStaysBelowMaxOffsetAndStopsOnCancel(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 100 {
		tl.append(kvBatch(t, ts, put("k", fmt.Sprint(i))), 0)
	}
	mustFlush(t, tl.Log)
	tl.mu.RLock()
	third := tl.segs[2].base
	tl.mu.RUnlock()
	before := readAll(t, tl.Log, 1<<20)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tl.Clean(ctx, CleanOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pass: %v", err)
	}
	if got := readAll(t, tl.Log, 1<<20); len(got) != len(before) {
		t.Fatalf("a cancelled pass removed %d records", len(before)-len(got))
	}

	// A high-water mark inside the third segment: two segments cleaned.
	o := CleanOptions{MaxOffset: third + 1}
	if c, _ := tl.CleanableState(o); c.EndOffset != third {
		t.Fatalf("cleanable to %d, want %d", c.EndOffset, third)
	}
	res := mustClean(t, tl.Log, o)
	if res.CleanedTo != third {
		t.Fatalf("cleaned to %d, want %d", res.CleanedTo, third)
	}
	after := readAll(t, tl.Log, 1<<20)
	if after[0].offset != third-1 || after[1].offset != third {
		t.Fatalf("records from %d, %d: want the latest below %d, then everything", after[0].offset, after[1].offset, third)
	}
	if len(after) != int(tl.EndOffset()-third)+1 {
		t.Fatalf("%d records left", len(after))
	}
}

// TestCleanedSegmentsAgeByTheirTimestamps: compact,delete. A segment the
// cleaner left without records keeps the largest timestamp of what it
// held, so retention.ms deletes it when it would have deleted the segment
// before the pass, not from the time of the pass (the file's mtime).
func TestCleanedSegmentsAgeByTheirTimestamps(t *testing.T) {
	cfg := cleanConfig()
	cfg.RetentionMS = 3600_000
	tl := openTestLog(t, cfg)
	old := testStart.UnixMilli()
	for i := range 60 {
		tl.append(kvBatch(t, old+int64(i), put("k", fmt.Sprint(i))), 0)
	}
	tl.clock.Advance(2 * time.Hour)
	recent := tl.clock.Now().UnixMilli()
	var firstRecent int64 = -1
	for i := range 40 {
		a := tl.append(kvBatch(t, recent+int64(i), put(fmt.Sprint("r", i), "v")), 0)
		if firstRecent < 0 {
			firstRecent = a.base
		}
	}
	mustFlush(t, tl.Log)
	res := mustClean(t, tl.Log, CleanOptions{Now: tl.clock.Now()})
	if res.CleanedTo <= firstRecent {
		t.Fatalf("cleaned to %d; the old records end at %d", res.CleanedTo, firstRecent)
	}
	if _, err := tl.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	// Every segment holding only old records is gone (the recent ones all
	// stay: the active segment, and any sealed one holds recent records).
	if recs := readAll(t, tl.Log, 1<<20); len(recs) == 0 || recs[len(recs)-1].ts != recent+39 {
		t.Fatal("retention deleted the recent records")
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, s := range tl.segs[:len(tl.segs)-1] {
		ts, _, err := tl.segMaxTSLocked(s)
		if err != nil {
			t.Fatal(err)
		}
		if ts < recent {
			t.Fatalf("segment %d, whose largest timestamp %d is older than retention.ms, survived retention", s.base, ts)
		}
	}
	if start := tl.segs[0].base; start > firstRecent {
		t.Fatalf("log starts at %d, past the first recent record %d", start, firstRecent)
	}
}

// TestCleanLeavesNoBatchWithoutRecords: batches of three records from a
// producer without a producer id, in segments of about two batches, some
// holding only values that later ones replace (kafka-go's compacted-read
// test writes this). After cleaning, no batch is left without records: a
// batch a consumer fetches alone (the last of a segment) must hold a record,
// or a client that moves on by the records it reads fetches it forever.
// The offsets of the batches that lost everything are covered by their
// neighbours, so a read at any of them moves on.
func TestCleanLeavesNoBatchWithoutRecords(t *testing.T) {
	// kafka-go's layout: a unique key with 0 to 4 duplicates after it,
	// each pattern thirty times, then ten end markers.
	var dupsLayout []kv
	n := 0
	for dups := range 5 {
		for range 30 {
			dupsLayout = append(dupsLayout, put(fmt.Sprintf("%04d", n), fmt.Sprintf("%04d", n)))
			n++
			for range dups {
				dupsLayout = append(dupsLayout, put("dup_", "dup_"))
			}
		}
	}
	for i := range 10 {
		dupsLayout = append(dupsLayout, put(fmt.Sprintf("e-%02d", i), fmt.Sprintf("e-%02d", i)))
	}
	// One key written over and over: every segment but the last one it
	// is in loses everything, a long run of groups left without records.
	var oneKey []kv
	for i := range 300 {
		oneKey = append(oneKey, put("k", fmt.Sprint(i)))
	}
	for i := range 10 {
		oneKey = append(oneKey, put(fmt.Sprintf("e-%02d", i), "end"))
	}
	for name, layout := range map[string][]kv{"dups": dupsLayout, "one key": oneKey} {
		for _, logAppendTime := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, LogAppendTime=%v", name, logAppendTime), func(t *testing.T) {
				testCleanLeavesNoBatchWithoutRecords(t, slices.Clone(layout), logAppendTime)
			})
		}
	}
}

func testCleanLeavesNoBatchWithoutRecords(t *testing.T, recs []kv, logAppendTime bool) {
	cfg := cleanConfig()
	cfg.SegmentBytes = 200
	cfg.LogAppendTime = logAppendTime
	tl := openTestLog(t, cfg)
	ts := testStart.UnixMilli()
	for len(recs) > 0 {
		k := min(3, len(recs))
		tl.append(kvBatch(t, ts, recs[:k]...), 0)
		recs = recs[k:]
	}
	mustFlush(t, tl.Log)
	before := readAll(t, tl.Log, 1<<20)
	want := latestView(before)
	stamped := map[int64]int64{} // offset → timestamp, as read
	for _, r := range before {
		stamped[r.offset] = r.ts
	}
	for pass := range 2 {
		mustClean(t, tl.Log, CleanOptions{SegmentBytes: 200})
		tl.mu.RLock()
		activeBase := tl.active().base
		tl.mu.RUnlock()
		for off := tl.StartOffset(); off < activeBase; {
			b, err := tl.ReadBytes(off, tl.EndOffset(), 1)
			if err != nil {
				t.Fatalf("pass %d: read %d: %v", pass, off, err)
			}
			_, _, h, err := record.Next(b)
			if err != nil {
				t.Fatalf("pass %d: batch at %d: %v", pass, off, err)
			}
			if h.NumRecords == 0 {
				t.Fatalf("pass %d: batch [%d, %d] has no records", pass, h.BaseOffset, h.LastOffset())
			}
			off = h.LastOffset() + 1
		}
		after := readAll(t, tl.Log, 1)
		if got := latestView(after); !equalViews(got, want) {
			t.Fatalf("pass %d: latest view %v, want %v", pass, got, want)
		}
		for _, r := range after {
			if r.ts != stamped[r.offset] {
				t.Fatalf("pass %d: record at %d has timestamp %d, was %d", pass, r.offset, r.ts, stamped[r.offset])
			}
		}
	}
}

// TestCleanRemovesDueTombstonesWithoutNewWrites: once the pass that first
// cleaned a tombstone is a delete retention old, CleanableState reports
// TombstonesDue and a pass removes the tombstone, though nothing was
// written since (no dirty bytes): a quiet log does not keep deleted keys
// forever. A log whose passes kept no tombstone reports none due, so it is
// not read again for nothing; both survive a reopen.
func TestCleanRemovesDueTombstonesWithoutNewWrites(t *testing.T) {
	tl := openTestLog(t, cleanConfig())
	ts := testStart.UnixMilli()
	for i := range 100 {
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("k%d", i%10), fmt.Sprint(i))), 0)
	}
	tl.append(kvBatch(t, ts, tomb("k1"), tomb("k2")), 0)
	for i := range 40 { // push the tombstones out of the active segment
		tl.append(kvBatch(t, ts, put(fmt.Sprintf("x%d", i), "value")), 0)
	}
	mustFlush(t, tl.Log)
	retention := time.Hour
	now := testStart.Add(time.Minute)
	state := func(at time.Time) Cleanable {
		t.Helper()
		c, err := tl.CleanableState(CleanOptions{Now: at, DeleteRetention: retention})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if res := mustClean(t, tl.Log, CleanOptions{Now: now, DeleteRetention: retention}); res.TombstonesRemoved != 0 || res.RecordsRemoved == 0 {
		t.Fatalf("first pass: %+v", res)
	}
	if c := state(now.Add(retention - time.Millisecond)); c.TombstonesDue || c.DirtyBytes != 0 {
		t.Fatalf("within the retention: %+v", c)
	}
	tl.reopen() // what the pass kept is checkpointed
	due := now.Add(retention)
	if c := state(due); !c.TombstonesDue || c.DirtyBytes != 0 {
		t.Fatalf("after the retention, nothing written: %+v, want tombstones due", c)
	}
	if res := mustClean(t, tl.Log, CleanOptions{Now: due, DeleteRetention: retention}); res.TombstonesRemoved != 2 {
		t.Fatalf("pass after the retention removed %d tombstones, want 2 (%+v)", res.TombstonesRemoved, res)
	}
	recs := readAll(t, tl.Log, 1<<20)
	for _, k := range []string{"k1", "k2"} {
		if offs := offsetsOf(recs, k); len(offs) != 0 {
			t.Fatalf("key %s still at %v", k, offs)
		}
	}
	if v := latestView(recs); v["k0"].value != "90" || v["k9"].value != "99" {
		t.Fatalf("other keys lost: %v", v)
	}
	later := due.Add(24 * time.Hour)
	if c := state(later); c.TombstonesDue {
		t.Fatalf("no tombstone left, yet %+v", c)
	}
	tl.reopen()
	if c := state(later); c.TombstonesDue {
		t.Fatalf("after a reopen, no tombstone left, yet %+v", c)
	}
}
