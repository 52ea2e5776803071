package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// storeURLs are the stores every test here runs against.
func storeURLs(t *testing.T) map[string]string {
	return map[string]string{
		"mem":  "mem://",
		"file": "file://" + filepath.Join(t.TempDir(), "remote"),
	}
}

// fixture is a one-node controller with one topic of one partition led
// by node 1, and that partition's log with small segments.
type fixture struct {
	ctrl  *controller.Controller
	id    controller.RemotePartition
	log   *log.Log
	tier  *Tier
	store *Store
}

func newFixture(t *testing.T, url string) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	ctrl, err := controller.Open(controller.Config{NodeID: 1, Dir: filepath.Join(dir, "ctrl")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	if _, err := ctrl.RegisterBroker(ctx, controller.Broker{ID: 1, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	tid, err := ctrl.CreateTopic(ctx, controller.CreateTopic{Name: "t", Partitions: 1, Assignments: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.RemoteStorage = true
	cfg.LocalRetentionMS, cfg.LocalRetentionBytes = -1, 0
	l, err := log.Open(filepath.Join(dir, "t-0"), cfg, log.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	store, err := OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &fixture{ctrl: ctrl, id: controller.RemotePartition{Topic: tid, Partition: 0}, log: l, store: store,
		tier: New(Config{Store: store, Metadata: ctrl})}
}

// appendBatches appends n batches of 3 records, timestamps 1000+offset.
func (f *fixture) appendBatches(t *testing.T, n int) {
	t.Helper()
	for range n {
		base := f.log.EndOffset()
		var recs []record.Record
		for j := range 3 {
			recs = append(recs, record.Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("value-%d-%s", base+int64(j), strings.Repeat("x", 40))), TimestampDelta: int64(j)})
		}
		b, err := record.Build(record.BuildOptions{BaseTimestamp: 1000 + base}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) partition(epoch int32) Partition {
	return Partition{ID: f.id, Name: "t-0", LeaderEpoch: epoch, Log: f.log, HighWatermark: f.log.EndOffset(), RetentionMS: -1, RetentionBytes: -1}
}

func TestSyncUploadsOnceAndReadsBackEveryOffset(t *testing.T) {
	for name, url := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, url)
			f.appendBatches(t, 60)
			if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
				t.Fatal(err)
			}
			rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
			closed, _ := f.log.ClosedSegments(0)
			if len(closed) < 3 || rl == nil || len(rl.Segments) != len(closed) || rl.StartOffset() != 0 || rl.EndOffset() != closed[len(closed)-1].Next {
				t.Fatalf("remote log %+v after syncing %d closed segments", rl, len(closed))
			}
			keys, _ := f.store.List(ctx, "")
			if len(keys) != 5*len(closed) {
				t.Fatalf("%d objects for %d segments: %v", len(keys), len(closed), keys)
			}
			// A second Sync finds nothing to upload.
			if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
				t.Fatal(err)
			}
			if keys2, _ := f.store.List(ctx, ""); len(keys2) != len(keys) || f.tier.Stats().SegmentsUploaded.Load() != int64(len(closed)) {
				t.Fatalf("second sync: %d objects (was %d), %d uploads", len(keys2), len(keys), f.tier.Stats().SegmentsUploaded.Load())
			}
			// Every offset reads back as the local log has it.
			for o := int64(0); o < rl.EndOffset(); o++ {
				got, err := f.tier.Read(ctx, rl, o, 300)
				if err != nil {
					t.Fatalf("read %d: %v", o, err)
				}
				want, err := f.log.ReadBytes(o, rl.EndOffset(), 300)
				if err != nil {
					t.Fatal(err)
				}
				// A local read may continue into the next segment's
				// batches only within its segment, as the remote one.
				if !bytes.HasPrefix(want, got) && !bytes.HasPrefix(got, want) || len(got) == 0 {
					t.Fatalf("read %d: remote %d bytes, local %d bytes, differ", o, len(got), len(want))
				}
				h, err := record.ParseHeader(got)
				if err != nil || h.BaseOffset > o || h.LastOffset() < o {
					t.Fatalf("read %d: first batch %d-%d (%v)", o, h.BaseOffset, h.LastOffset(), err)
				}
			}
			if _, err := f.tier.Read(ctx, rl, rl.EndOffset(), 100); !errors.Is(err, ErrNoRemoteData) {
				t.Fatalf("read past the remote end: %v", err)
			}
			// By timestamp: offset o has timestamp 1000+o.
			for _, o := range []int64{0, 7, 40, rl.EndOffset() - 1} {
				got, ts, found, err := f.tier.OffsetForTimestamp(ctx, rl, 1000+o)
				if err != nil || !found || got != o || ts != 1000+o {
					t.Fatalf("offset for timestamp %d = %d %d %v %v; want %d", 1000+o, got, ts, found, err, o)
				}
			}
			// Local retention (0 bytes) now deletes exactly the
			// uploaded segments.
			if _, err := f.log.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			if f.log.StartOffset() != rl.EndOffset() {
				t.Fatalf("local log start %d after local retention, remote end %d", f.log.StartOffset(), rl.EndOffset())
			}
		})
	}
}

func TestLocalRetentionKeepsWhatIsNotUploaded(t *testing.T) {
	f := newFixture(t, "mem://")
	f.appendBatches(t, 60)
	if n, err := f.log.EnforceRetention(); err != nil || n != 0 || f.log.StartOffset() != 0 {
		t.Fatalf("local retention before any upload deleted %d segments (%v), log start %d", n, err, f.log.StartOffset())
	}
}

func TestStaleLeaderUploadsAndDeletesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	f.appendBatches(t, 60)
	p := f.partition(0)
	p.LeaderEpoch = -1 // an epoch older than the partition's
	if err := f.tier.Sync(ctx, p); !errors.Is(err, controller.ErrStaleLeaderEpoch) {
		t.Fatalf("sync by a stale leader: %v", err)
	}
	if keys, _ := f.store.List(ctx, ""); len(keys) != 0 || f.ctrl.Image().RemoteLog(f.id.Topic, 0) != nil {
		t.Fatalf("a stale leader left objects %v or metadata", keys)
	}
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	p.RetentionBytes = 0
	if err := f.tier.Sync(ctx, p); !errors.Is(err, controller.ErrStaleLeaderEpoch) {
		t.Fatalf("retention by a stale leader: %v", err)
	}
	if rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0); rl.StartOffset() != 0 {
		t.Fatalf("a stale leader deleted remote segments: start %d", rl.StartOffset())
	}
}

func TestRemoteRetentionDeletesOldestSegments(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	f.appendBatches(t, 60)
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	before := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
	p := f.partition(0)
	p.RetentionBytes = before.Size() - before.Segments[0].Size + f.log.SizeFrom(before.EndOffset())
	if err := f.tier.Sync(ctx, p); err != nil {
		t.Fatal(err)
	}
	after := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
	if after.StartOffset() != before.Segments[1].BaseOffset {
		t.Fatalf("remote start %d after retention, want %d", after.StartOffset(), before.Segments[1].BaseOffset)
	}
	keys, _ := f.store.List(ctx, "")
	for _, k := range keys {
		if strings.HasPrefix(k, before.Segments[0].Key) {
			t.Fatalf("object %s of a deleted segment is still there", k)
		}
	}
	if len(keys) != 5*len(after.Segments) {
		t.Fatalf("%d objects for %d segments", len(keys), len(after.Segments))
	}
}

// TestRetentionPlanCountsOverlapOnce: the offsets both remote and local
// count once in retention.bytes; counting them twice makes a new leader
// delete data within retention (the KAFKA-20732 case).
func TestRetentionPlanCountsOverlapOnce(t *testing.T) {
	r := &controller.RemoteLog{Segments: []controller.RemoteSegment{
		{BaseOffset: 0, EndOffset: 9, Size: 100, MaxTimestamp: 10},
		{BaseOffset: 10, EndOffset: 19, Size: 100, MaxTimestamp: 20},
		{BaseOffset: 20, EndOffset: 29, Size: 100, MaxTimestamp: 30},
	}}
	// 300 remote + 100 local above the remote end: 400 in all, within
	// retention.bytes 400, so nothing goes, whatever the local log
	// holds below the remote end.
	if got := RetentionPlan(r, 100, 1000, -1, 400); got != 0 {
		t.Fatalf("plan within retention.bytes deletes below %d", got)
	}
	if got := RetentionPlan(r, 100, 1000, -1, 300); got != 10 {
		t.Fatalf("plan 100 bytes over retention.bytes = %d, want 10", got)
	}
	if got := RetentionPlan(r, 0, 1000, 975, -1); got != 20 {
		t.Fatalf("plan by time = %d, want 20", got)
	}
	if got := RetentionPlan(r, 0, 1000, -1, -1); got != 0 {
		t.Fatalf("plan without retention = %d", got)
	}
}

// TestSyncDeletesStrayObjectsOfEarlierLeaders: objects a leader of an
// earlier epoch uploaded and never recorded go at the next leader's
// first Sync; recorded ones and the current epoch's stay.
func TestSyncDeletesStrayObjectsOfEarlierLeaders(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	f.appendBatches(t, 60)
	stray := PartitionPrefix(f.id) + fmt.Sprintf("%020d-%d-deadbeef.log", 0, -1)
	current := PartitionPrefix(f.id) + fmt.Sprintf("%020d-%d-cafecafe.log", 0, 0)
	for _, k := range []string{stray, current} {
		if err := f.store.Put(ctx, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	keys, _ := f.store.List(ctx, "")
	rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
	if len(keys) != 5*len(rl.Segments)+1 {
		t.Fatalf("%d objects for %d segments: %v", len(keys), len(rl.Segments), keys)
	}
	for _, k := range keys {
		if k == stray {
			t.Fatalf("stray object %s of an earlier epoch kept", k)
		}
	}
}

// TestSyncContinuesInsideASegment: a new leader whose segment starts
// before the remote end (replicas roll at their own sizes) records it
// from the remote end on, counts only its bytes from there, and reads
// serve those offsets.
func TestSyncContinuesInsideASegment(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	f.appendBatches(t, 60)
	// An earlier leader recorded offsets 0-8 (three batches).
	if err := f.ctrl.RecordRemoteSegment(ctx, f.id, 0, controller.RemoteSegment{BaseOffset: 0, ObjectBase: 0, EndOffset: 8, MaxTimestamp: 1008, Size: 1, LeaderEpoch: 0, Key: "earlier"}); err != nil {
		t.Fatal(err)
	}
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	rl := f.ctrl.Image().RemoteLog(f.id.Topic, 0)
	closed, _ := f.log.ClosedSegments(0)
	head, err := f.log.ReadBytes(0, 9, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	s := rl.Segments[1]
	if s.BaseOffset != 9 || s.ObjectBase != 0 || s.Skipped != int64(len(head)) || s.Bytes() != closed[0].Size-int64(len(head)) {
		t.Fatalf("segment recorded inside a local one: %+v (bytes before offset 9: %d, segment %d)", s, len(head), closed[0].Size)
	}
	got, err := f.tier.Read(ctx, rl, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := record.ParseHeader(got); err != nil || h.BaseOffset != 9 {
		t.Fatalf("read at 9: batch %d (%v)", h.BaseOffset, err)
	}
}

// TestUploadKeepsTheSegmentsProducerState: a segment's .producers object
// holds the last batch of each idempotent producer in it.
func TestUploadKeepsTheSegmentsProducerState(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "mem://")
	for i := range 40 {
		recs := []record.Record{{Value: []byte(strings.Repeat("v", 200))}}
		b, err := record.Build(record.BuildOptions{Idempotent: true, ProducerID: 7, ProducerEpoch: 1, BaseSequence: int32(i)}, recs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.tier.Sync(ctx, f.partition(0)); err != nil {
		t.Fatal(err)
	}
	seg := f.ctrl.Image().RemoteLog(f.id.Topic, 0).Segments[0]
	got, err := f.store.ReadAll(ctx, seg.Key+extProducers)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mq producer-state 1\n1\n7 1 %d %d %d %d\n", seg.EndOffset, seg.EndOffset, seg.EndOffset, seg.EndOffset)
	if string(got) != want {
		t.Fatalf("producer state of segment %d-%d:\n%s\nwant\n%s", seg.BaseOffset, seg.EndOffset, got, want)
	}
}
