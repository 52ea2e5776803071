package log

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/record"
	"github.com/mqproject/mq/lib/vfs/crashfs"
)

var cleanSteps = flag.Int("clean.steps", 0, "steps of the randomized cleaner test (0: a quick run)")

// cleanModel is what was appended: every record by offset, and the latest
// value per key.
type cleanModel struct {
	records map[int64]storedRecord
	latest  map[string]latestEntry
}

func newCleanModel() *cleanModel {
	return &cleanModel{records: map[int64]storedRecord{}, latest: map[string]latestEntry{}}
}

func (m *cleanModel) appended(base int64, ts int64, kvs []kv) {
	for i, r := range kvs {
		off := base + int64(i)
		m.records[off] = storedRecord{offset: off, ts: ts, key: r.key, value: r.value}
		switch {
		case r.key == nil:
		case r.value == nil:
			delete(m.latest, string(r.key))
		default:
			m.latest[string(r.key)] = latestEntry{string(r.value), off}
		}
	}
}

// check compares the log with the model: the same latest value per key
// at the same offset, and every record served is one appended at its
// offset.
func (m *cleanModel) check(t *testing.T, l *Log, label string) []storedRecord {
	t.Helper()
	recs := readAll(t, l, 1<<20)
	for _, r := range recs {
		w, ok := m.records[r.offset]
		if !ok || !bytes.Equal(w.key, r.key) || !bytes.Equal(w.value, r.value) || (w.value == nil) != (r.value == nil) || w.ts != r.ts {
			t.Fatalf("%s: record at %d is %q=%q, appended %q=%q (%v)", label, r.offset, r.key, r.value, w.key, w.value, ok)
		}
	}
	if got := latestView(recs); !equalViews(got, m.latest) {
		for k, e := range m.latest {
			if got[k] != e {
				t.Errorf("%s: key %s: got %+v, want %+v", label, k, got[k], e)
			}
		}
		for k, e := range got {
			if _, ok := m.latest[k]; !ok {
				t.Errorf("%s: key %s back from the dead: %+v", label, k, e)
			}
		}
		t.FailNow()
	}
	return recs
}

// randomKVs returns 1 to 4 records over keys of a small key space, some
// tombstones, some without key.
func randomKVs(rng *rand.Rand, keys int) []kv {
	kvs := make([]kv, 1+rng.IntN(4))
	for i := range kvs {
		k := []byte(fmt.Sprintf("key-%d", rng.IntN(keys)))
		switch n := rng.IntN(20); {
		case n < 2:
			kvs[i] = kv{key: k}
		case n < 3:
			kvs[i] = kv{value: []byte("no key")}
		case n < 4:
			kvs[i] = kv{key: k, value: []byte{}}
		default:
			kvs[i] = kv{key: k, value: []byte(fmt.Sprintf("v%d-%s", rng.IntN(1000), bytes.Repeat([]byte("x"), rng.IntN(60))))}
		}
	}
	return kvs
}

var testCodecs = []record.Codec{record.CodecNone, record.CodecNone, record.CodecNone, record.CodecGzip, record.CodecLZ4, record.CodecZstd, record.CodecSnappy}

func randomBatch(t testing.TB, rng *rand.Rand, ts int64, kvs []kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value, TimestampDelta: 0}
		if rng.IntN(4) == 0 {
			recs[i].Headers = []record.RecordHeader{{Key: "h", Value: []byte("hv")}, {Key: "null"}}
		}
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: ts, Codec: testCodecs[rng.IntN(len(testCodecs))]}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// idempotentBatch is a batch of producer 1, epoch 0, from sequence seq.
func idempotentBatch(t testing.TB, ts int64, seq int32, kvs []kv) []byte {
	t.Helper()
	recs := make([]record.Record, len(kvs))
	for i, r := range kvs {
		recs[i] = record.Record{Key: r.key, Value: r.value, OffsetDelta: int32(i)}
	}
	b, err := record.Build(record.BuildOptions{BaseTimestamp: ts, Idempotent: true, ProducerID: 1, BaseSequence: seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCleanRandomizedAgainstModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 17))
	steps := *cleanSteps
	if steps == 0 {
		steps = 600
		if testing.Short() {
			steps = 200
		}
	}
	cfg := cleanConfig()
	cfg.SegmentBytes = int64(512 + rng.IntN(2048))
	// An in-memory file system: the test is about the cleaner, not fsync
	// latency.
	tl := openTestLogWith(t, cfg, Options{FS: crashfs.New(crashfs.Strict, seed)})
	m := newCleanModel()
	keys := 5 + rng.IntN(60)
	passes := 0
	var removed int64
	// One idempotent producer among the appends: a retry of its last
	// batch must stay a duplicate, its next sequence accepted, whatever
	// the cleaner removed.
	var prod struct {
		seq     int32
		last    []byte
		lastRes AppendResult
	}
	checkProducer := func(label string) {
		t.Helper()
		if prod.last == nil {
			return
		}
		res, err := tl.Append(bytes.Clone(prod.last), 0)
		if err != nil || !res.Duplicate || res.BaseOffset != prod.lastRes.BaseOffset || res.LastOffset != prod.lastRes.LastOffset {
			t.Fatalf("%s: retry of the producer's last batch: %+v %v, first appended as %+v", label, res, err, prod.lastRes)
		}
	}
	for step := range steps {
		switch n := rng.IntN(100); {
		case n < 80:
			kvs := randomKVs(rng, keys)
			ts := tl.clock.Now().UnixMilli()
			b := randomBatch(t, rng, ts, kvs)
			idempotent := rng.IntN(5) == 0
			if idempotent {
				b = idempotentBatch(t, ts, prod.seq, kvs)
			}
			res, err := tl.Append(b, int32(step/200))
			if err != nil || res.Duplicate {
				t.Fatalf("step %d: append: %+v %v", step, res, err)
			}
			if idempotent {
				prod.last, prod.lastRes = b, res
				prod.seq += int32(len(kvs))
			}
			m.appended(res.BaseOffset, ts, kvs)
			tl.clock.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond)
		case n < 93:
			mustFlush(t, tl.Log)
			o := CleanOptions{
				DeleteRetention:   []time.Duration{0, time.Second, time.Minute}[rng.IntN(3)],
				MinCompactionLag:  []time.Duration{0, 0, 5 * time.Second}[rng.IntN(3)],
				DedupeBufferBytes: []int{minDedupeBufferBytes, 0}[rng.IntN(2)],
				SegmentBytes:      []int64{0, 1500, 1 << 20}[rng.IntN(3)],
			}
			if rng.IntN(4) == 0 {
				o.MaxOffset = 1 + rng.Int64N(tl.EndOffset()+1)
			}
			res, err := tl.Clean(context.Background(), o)
			if err != nil {
				t.Fatalf("step %d: clean %+v: %v", step, o, err)
			}
			passes++
			removed += res.RecordsRemoved
			m.check(t, tl.Log, fmt.Sprintf("step %d, after clean %+v", step, res))
			checkProducer(fmt.Sprintf("step %d, after clean", step))
		case n < 97:
			tl.reopen()
			m.check(t, tl.Log, fmt.Sprintf("step %d, after reopen", step))
			checkProducer(fmt.Sprintf("step %d, after reopen", step))
		default:
			tl.crash()
			if rng.IntN(2) == 0 {
				// Rebuild the producer state from the cleaned log.
				_ = tl.opts.FS.Remove(filepath.Join(tl.dir, producerStateFile))
			}
			tl.open()
			m.check(t, tl.Log, fmt.Sprintf("step %d, after a kill", step))
			checkProducer(fmt.Sprintf("step %d, after a kill", step))
		}
	}
	mustFlush(t, tl.Log)
	mustClean(t, tl.Log, CleanOptions{})
	m.check(t, tl.Log, "at the end")
	if damaged := tl.Damaged(); len(damaged) > 0 {
		t.Fatalf("damage: %v", damaged)
	}
	// The leader-epoch history rebuilt from the cleaned log is the one
	// checkpointed.
	epochs := tl.LeaderEpochs()
	tl.crash()
	if err := tl.opts.FS.Remove(filepath.Join(tl.dir, leaderEpochFile)); err != nil {
		t.Fatal(err)
	}
	tl.open()
	if got := tl.LeaderEpochs(); !slices.Equal(got, epochs) {
		t.Fatalf("leader epochs rebuilt from the cleaned log: %v, want %v", got, epochs)
	}
	m.check(t, tl.Log, "after rebuilding the leader epochs")
	t.Logf("%d steps, %d passes removed %d records, %d segments, %d bytes", steps, passes, removed, tl.NumSegments(), tl.Size())
}
