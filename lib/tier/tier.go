package tier

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/record"
)

// Metadata is where the remote-log metadata lives: the controller's
// image and commands (*controller.Controller). Its methods may be called
// concurrently.
type Metadata interface {
	Image() *controller.Image
	RecordRemoteSegment(ctx context.Context, p controller.RemotePartition, epoch int32, s controller.RemoteSegment) error
	DeleteRemoteSegments(ctx context.Context, p controller.RemotePartition, epoch int32, before int64) error
	RemotePurged(ctx context.Context, topic controller.TopicID) error
}

// Config is what a Tier needs.
type Config struct {
	Store    *Store
	Metadata Metadata
	// CacheBytes is remote.log.reader.cache.bytes: the bound of the
	// remote read cache.
	CacheBytes int64
	// ReadTimeout bounds one remote read (a fetch's, a ListOffsets'):
	// remote.log.reader.timeout.ms; 0 is 10 s.
	ReadTimeout time.Duration
	Logger      *slog.Logger // nil = silent
	Clock       clock.Clock  // nil = real time
}

// Tier copies closed segments of tiered partitions to the store, records
// them in the remote-log metadata, applies retention to the remote part,
// deletes the remote data of deleted topics and reads remote segments
// back. Its methods may be called concurrently; Sync of one partition is
// called by one goroutine at a time (lib/partition's tiering task).
type Tier struct {
	cfg    Config
	store  *Store
	meta   Metadata
	log    *slog.Logger
	clock  clock.Clock
	ranges rangeReader
	cache  *Cache

	// discarding runs the deletions of failed uploads' objects (discard),
	// which closing ends.
	discarding sync.WaitGroup
	closing    context.Context
	close      context.CancelFunc

	idxMu   sync.Mutex
	indexes map[string][]byte // index objects by key, at most maxIndexes
	idxLRU  []string

	stats Stats

	lagMu sync.Mutex
	lag   map[controller.RemotePartition]int64 // the last lag Sync found of each partition
	// swept is the leader epoch each partition's stray objects were last
	// deleted in (sweep), under lagMu.
	swept map[controller.RemotePartition]int32
}

// rangeReader reads p from the object key of size bytes at off.
type rangeReader func(ctx context.Context, key string, size int64, p []byte, off int64) (int, error)

// maxIndexes bounds the index objects kept in memory.
const maxIndexes = 256

// Stats are the tiering counters since the Tier was made, and its lag.
type Stats struct {
	SegmentsUploaded atomic.Int64
	BytesUploaded    atomic.Int64
	UploadFailures   atomic.Int64
	SegmentsDeleted  atomic.Int64
	RemoteReads      atomic.Int64
	RemoteReadBytes  atomic.Int64
	RemoteReadErrors atomic.Int64
	// LagBytes is the bytes of closed segments below the high-water mark
	// of the partitions led here that are not recorded remotely yet, as
	// the last Sync of each found.
	LagBytes atomic.Int64
	// Failing is 1 while the last upload attempt of some partition
	// failed.
	Failing atomic.Int64
}

// New returns a Tier over cfg.Store.
func New(cfg Config) *Tier {
	t := &Tier{cfg: cfg, store: cfg.Store, meta: cfg.Metadata, log: cfg.Logger, clock: cfg.Clock, indexes: map[string][]byte{}}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.clock == nil {
		t.clock = clock.Real()
	}
	if t.cfg.ReadTimeout <= 0 {
		t.cfg.ReadTimeout = 10 * time.Second
	}
	t.cache = NewCache(cfg.Store, CacheConfig{MaxBytes: cfg.CacheBytes, Logger: t.log})
	t.ranges = t.cache.ReadAt
	t.closing, t.close = context.WithCancel(context.Background())
	return t
}

// Close stops the cache's reads and closes the store.
func (t *Tier) Close() error {
	t.close()
	t.discarding.Wait()
	t.cache.Close()
	return t.store.Close()
}

// CacheStats returns the remote read cache's counters.
func (t *Tier) CacheStats() CacheStats { return t.cache.Stats() }

// Stats returns the Tier's counters.
func (t *Tier) Stats() *Stats { return &t.stats }

// Store returns the Tier's store.
func (t *Tier) Store() *Store { return t.store }

// Object keys: every object of a partition is under
// "<topic id>/<partition>/", a segment's objects share the stem
// "<base offset, 20 digits>-<leader epoch>-<8 random hex>" and end in
// these extensions.
const (
	extLog       = ".log"
	extIndex     = ".index"
	extTimeIndex = ".timeindex"
	extEpochs    = ".epochs"
	extProducers = ".producers"
	// extTxnIndex is the aborted-transaction index (lib/log's .txnindex
	// entries), only of segments holding abort markers
	// (RemoteSegment.TxnIndex).
	extTxnIndex = ".txnindex"
)

var segmentExts = []string{extLog, extIndex, extTimeIndex, extEpochs, extProducers}

// objectExts are the extensions of a segment's objects: segmentExts,
// and extTxnIndex when it has one.
func objectExts(txnIndex bool) []string {
	if txnIndex {
		return append(slices.Clip(segmentExts), extTxnIndex)
	}
	return segmentExts
}

// PartitionPrefix is the key prefix of a partition's objects.
func PartitionPrefix(p controller.RemotePartition) string {
	return fmt.Sprintf("%s/%d/", p.Topic, p.Partition)
}

// TopicPrefix is the key prefix of a topic's objects.
func TopicPrefix(id controller.TopicID) string { return id.String() + "/" }

func segmentStem(p controller.RemotePartition, base int64, epoch int32) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%020d-%d-%s", PartitionPrefix(p), base, epoch, hex.EncodeToString(r[:]))
}

// Partition is one partition led here, as Sync needs it.
type Partition struct {
	ID controller.RemotePartition
	// Name is TOPIC-PARTITION, for logs.
	Name string
	// LeaderEpoch is this node's leader epoch of the partition.
	LeaderEpoch int32
	Log         *log.Log
	// HighWatermark bounds what is uploaded: only segments wholly below
	// it (committed) are. lib/partition passes the last stable offset
	// when lower, so that no open transaction's records go remote (a
	// remote read is not cut at the last stable offset).
	HighWatermark int64
	// RetentionMS and RetentionBytes are the topic's retention.ms and
	// retention.bytes (-1: unlimited), applied to the whole log.
	RetentionMS, RetentionBytes int64
}

// Sync brings one partition led here up to date: it uploads and records
// the closed segments below the high-water mark that the remote log does
// not hold yet, oldest first, tells the log where the remote copy ends,
// and deletes the remote segments retention condemns. It stops at the
// first failure; the next Sync starts over from the metadata.
func (t *Tier) Sync(ctx context.Context, p Partition) error {
	if err := t.sweep(ctx, p); err != nil {
		return err
	}
	rl := t.meta.Image().RemoteLog(p.ID.Topic, p.ID.Partition)
	end := rl.EndOffset()
	segs, err := p.Log.ClosedSegments(max(end, 0))
	if err != nil {
		return err
	}
	var lag int64
	for _, s := range segs {
		if s.Next <= p.HighWatermark {
			lag += s.Size
		}
	}
	defer func() { t.addLag(p.ID, lag) }()
	for _, s := range segs {
		if s.Next > p.HighWatermark {
			break
		}
		if end >= 0 && s.Base > end {
			// The local log starts after the remote one ends: the
			// offsets between are on no replica here, and recording a
			// segment with a gap is refused.
			return fmt.Errorf("tier: %s: local segment at %d, remote log ends at %d", p.Name, s.Base, end)
		}
		seg, err := t.upload(ctx, p, s, max(end, s.Base))
		if err != nil {
			return err
		}
		end = seg.EndOffset + 1
		lag -= s.Size
		p.Log.SetRemoteEnd(end)
	}
	p.Log.SetRemoteEnd(end)
	return t.enforceRetention(ctx, p)
}

// upload copies one closed segment and records it as starting at from.
func (t *Tier) upload(ctx context.Context, p Partition, s log.SegmentInfo, from int64) (controller.RemoteSegment, error) {
	region, idx, tidx, epochs, err := p.Log.SegmentData(s.Base)
	if err != nil {
		return controller.RemoteSegment{}, err
	}
	defer region.Release()
	stem := segmentStem(p.ID, s.Base, p.LeaderEpoch)
	var eb strings.Builder
	fmt.Fprintf(&eb, "mq leader-epoch 1\n%d\n", len(epochs))
	for _, e := range epochs {
		fmt.Fprintf(&eb, "%d %d\n", e.Epoch, e.StartOffset)
	}
	producers, err := producerState(&region, region.Len)
	if err != nil {
		return controller.RemoteSegment{}, err
	}
	txnIndex, err := p.Log.SegmentTxnIndex(s.Base)
	if err != nil {
		return controller.RemoteSegment{}, err
	}
	hasTxn := len(txnIndex) > 0
	objects := []struct {
		ext string
		r   io.Reader
	}{
		{extProducers, strings.NewReader(producers)},
		{extLog, io.NewSectionReader(&region, 0, region.Len)},
		{extIndex, strings.NewReader(string(idx))},
		{extTimeIndex, strings.NewReader(string(tidx))},
		{extEpochs, strings.NewReader(eb.String())},
	}
	if hasTxn {
		objects = append(objects, struct {
			ext string
			r   io.Reader
		}{extTxnIndex, bytes.NewReader(txnIndex)})
	}
	for _, o := range objects {
		if err := t.store.Put(ctx, stem+o.ext, o.r); err != nil {
			t.discard(stem, hasTxn)
			return controller.RemoteSegment{}, err
		}
	}
	skipped, err := positionOf(&region, idx, s.Base, from)
	if err != nil {
		t.deleteObjects(stem, hasTxn)
		return controller.RemoteSegment{}, err
	}
	seg := controller.RemoteSegment{
		BaseOffset: from, ObjectBase: s.Base, EndOffset: s.Next - 1, MaxTimestamp: s.MaxTimestamp,
		Size: s.Size, Skipped: skipped, LeaderEpoch: p.LeaderEpoch, Key: stem, TxnIndex: hasTxn,
	}
	if err := t.meta.RecordRemoteSegment(ctx, p.ID, p.LeaderEpoch, seg); err != nil {
		// Not recorded: nobody will read these objects.
		t.deleteObjects(stem, hasTxn)
		return controller.RemoteSegment{}, fmt.Errorf("tier: record %s segment %d: %w", p.Name, s.Base, err)
	}
	t.stats.SegmentsUploaded.Add(1)
	t.stats.BytesUploaded.Add(s.Size)
	t.log.Info("uploaded segment", "partition", p.Name, "base_offset", from, "end_offset", seg.EndOffset, "bytes", s.Size)
	return seg, nil
}

// discard deletes the objects of an upload the store failed in the
// background: a store that is down makes each deletion wait out the
// client's retries, and the failure is to be reported (Stats.Failing) and
// retried without waiting for them. Objects left behind are recorded nowhere: nobody
// reads them.
func (t *Tier) discard(stem string, txnIndex bool) {
	t.discarding.Add(1)
	go func() {
		defer t.discarding.Done()
		t.deleteObjects(stem, txnIndex)
	}()
}

// deleteObjects removes a segment's objects, with a context of its own
// (ended by Close): it runs after a failure, when the caller's may be
// done.
func (t *Tier) deleteObjects(stem string, txnIndex bool) {
	ctx, cancel := context.WithTimeout(t.closing, 30*time.Second)
	defer cancel()
	for _, ext := range objectExts(txnIndex) {
		if err := t.store.Delete(ctx, stem+ext); err != nil {
			t.log.Warn("delete remote object", "key", stem+ext, "err", err)
		}
	}
	t.forgetIndexes(stem)
	t.cache.Forget(stem + extLog)
}

// RetentionPlan returns the offset the remote log should start at after
// retention (the first segment kept; r.EndOffset() when none is, and
// r.StartOffset() when nothing is due): whole remote segments, oldest
// first, whose max timestamp is older than retentionMS before now, or
// while the whole log stays at least retentionBytes without them. The
// whole log's size is the remote bytes plus localAbove, the local bytes
// from the remote end on: the offsets held both remotely and locally
// count once.
func RetentionPlan(r *controller.RemoteLog, localAbove, now, retentionMS, retentionBytes int64) int64 {
	if r == nil || len(r.Segments) == 0 {
		return -1
	}
	total := r.Size() + localAbove
	before := r.StartOffset()
	for _, s := range r.Segments {
		expired := retentionBytes >= 0 && total-s.Bytes() >= retentionBytes
		if !expired && retentionMS >= 0 && s.MaxTimestamp >= 0 {
			expired = now-s.MaxTimestamp > retentionMS
		}
		if !expired {
			break
		}
		total -= s.Bytes()
		before = s.EndOffset + 1
	}
	return before
}

// ApplyRetention deletes the remote segments retention condemns, and
// uploads nothing: for a partition whose topic no longer has
// remote.storage.enable, whose remote part still ages out.
func (t *Tier) ApplyRetention(ctx context.Context, p Partition) error {
	return t.enforceRetention(ctx, p)
}

// enforceRetention deletes the remote segments retention condemns: first
// from the metadata (by this leader's epoch, refused when it is stale),
// then their objects.
func (t *Tier) enforceRetention(ctx context.Context, p Partition) error {
	rl := t.meta.Image().RemoteLog(p.ID.Topic, p.ID.Partition)
	if rl == nil {
		return nil
	}
	localAbove := p.Log.SizeFrom(rl.EndOffset())
	before := RetentionPlan(rl, localAbove, t.clock.Now().UnixMilli(), p.RetentionMS, p.RetentionBytes)
	if before <= rl.StartOffset() {
		return nil
	}
	if err := t.meta.DeleteRemoteSegments(ctx, p.ID, p.LeaderEpoch, before); err != nil {
		return fmt.Errorf("tier: delete %s remote segments below %d: %w", p.Name, before, err)
	}
	n := 0
	for _, s := range rl.Segments {
		if s.EndOffset >= before {
			break
		}
		t.deleteObjects(s.Key, s.TxnIndex)
		n++
	}
	t.stats.SegmentsDeleted.Add(int64(n))
	t.log.Info("remote retention deleted segments", "partition", p.Name, "segments", n, "remote_log_start_offset", before)
	return nil
}

// Purge deletes the objects of the deleted topics the image lists
// (Image.RemotePurges) and tells the metadata they are gone.
func (t *Tier) Purge(ctx context.Context) error {
	var errs []error
	for _, id := range t.meta.Image().RemotePurges {
		if err := t.store.DeletePrefix(ctx, TopicPrefix(id)); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := t.meta.RemotePurged(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		t.log.Info("deleted the remote data of a deleted topic", "topic_id", id)
	}
	return errors.Join(errs...)
}

func (t *Tier) addLag(p controller.RemotePartition, lag int64) {
	t.lagMu.Lock()
	defer t.lagMu.Unlock()
	if t.lag == nil {
		t.lag = map[controller.RemotePartition]int64{}
	}
	t.stats.LagBytes.Add(lag - t.lag[p])
	t.lag[p] = lag
}

// Forget drops what the Tier keeps of a partition no longer led here
// (its upload lag).
func (t *Tier) Forget(p controller.RemotePartition) {
	t.lagMu.Lock()
	defer t.lagMu.Unlock()
	t.stats.LagBytes.Add(-t.lag[p])
	delete(t.lag, p)
}

// sweep deletes, once per leadership, the objects of the partition that
// no record names and that an earlier leader epoch wrote: a leader that
// stopped between uploading and recording left them, and its epoch can
// never record them now (the controller refuses a stale epoch).
func (t *Tier) sweep(ctx context.Context, p Partition) error {
	t.lagMu.Lock()
	done := t.swept != nil && t.swept[p.ID] == p.LeaderEpoch
	t.lagMu.Unlock()
	if done {
		return nil
	}
	keys, err := t.store.List(ctx, PartitionPrefix(p.ID))
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, s := range segmentsOf(t.meta.Image().RemoteLog(p.ID.Topic, p.ID.Partition)) {
		recorded[s.Key] = true
	}
	for _, k := range keys {
		stem := strings.TrimSuffix(k, path.Ext(k))
		var base int64
		var epoch int32
		var rnd string
		if _, err := fmt.Sscanf(path.Base(stem), "%d-%d-%s", &base, &epoch, &rnd); err != nil || recorded[stem] || epoch >= p.LeaderEpoch {
			continue
		}
		if err := t.store.Delete(ctx, k); err != nil {
			return err
		}
		t.log.Info("deleted an object no record names", "partition", p.Name, "key", k)
	}
	t.lagMu.Lock()
	if t.swept == nil {
		t.swept = map[controller.RemotePartition]int32{}
	}
	t.swept[p.ID] = p.LeaderEpoch
	t.lagMu.Unlock()
	return nil
}

func segmentsOf(r *controller.RemoteLog) []controller.RemoteSegment {
	if r == nil {
		return nil
	}
	return r.Segments
}

// positionOf returns the position in a segment's data (base: its base
// offset, idx: its offset index) of the batch starting at offset, 0 for
// offset at or below base.
func positionOf(r io.ReaderAt, idx []byte, base, offset int64) (int64, error) {
	if offset <= base {
		return 0, nil
	}
	pos := int64(0)
	for i := 0; i+indexEntrySize <= len(idx); i += indexEntrySize {
		if int64(binary.BigEndian.Uint32(idx[i:])) > offset-base {
			break
		}
		pos = int64(binary.BigEndian.Uint32(idx[i+4:]))
	}
	var h [batchHeaderPrefix]byte
	for {
		if _, err := r.ReadAt(h[:], pos); err != nil {
			return 0, fmt.Errorf("tier: find offset %d in segment %d: %w", offset, base, err)
		}
		b, length, last := batchFields(h[:])
		switch {
		case b == offset:
			return pos, nil
		case last >= offset || length <= 0:
			return 0, fmt.Errorf("tier: offset %d is not a batch start in segment %d", offset, base)
		}
		pos += record.LengthPrefixSize + length
	}
}

// producerState is the .producers object of a segment: the last batch
// of each idempotent producer in it, "mq producer-state 1", the count,
// and one "<producer id> <epoch> <first sequence> <last sequence> <base
// offset> <last offset>" line each, by producer id: what rebuilds the
// producers' state from that segment on.
func producerState(r io.ReaderAt, size int64) (string, error) {
	type last struct {
		epoch                int16
		firstSeq, lastSeq    int32
		baseOffset, lastOffs int64
	}
	byID := map[int64]last{}
	var hb [record.HeaderSize]byte
	for pos := int64(0); pos < size; {
		if _, err := r.ReadAt(hb[:], pos); err != nil {
			return "", fmt.Errorf("tier: producer state at %d: %w", pos, err)
		}
		h, err := record.ParseHeader(hb[:])
		if err != nil {
			return "", fmt.Errorf("tier: producer state at %d: %w", pos, err)
		}
		if h.Idempotent() {
			byID[h.ProducerID] = last{h.ProducerEpoch, h.BaseSequence, h.LastSequence(), h.BaseOffset, h.LastOffset()}
		}
		pos += int64(h.Size())
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "mq producer-state 1\n%d\n", len(ids))
	for _, id := range ids {
		p := byID[id]
		fmt.Fprintf(&b, "%d %d %d %d %d %d\n", id, p.epoch, p.firstSeq, p.lastSeq, p.baseOffset, p.lastOffs)
	}
	return b.String(), nil
}
