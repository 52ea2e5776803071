package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/vfs"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// hosted is one partition replica this node holds, with the topic config
// its log was last configured with.
type hosted struct {
	*replica.Partition
	topicID controller.TopicID
	cfg     atomic.Pointer[config.Topic] // replaced, never modified
	traffic *topicTraffic                // the topic's client traffic (metrics.go)
	// cleanerPasses and cleanerReclaimed count the compaction passes over
	// this log since mqd started and the bytes they freed (clean.go).
	cleanerPasses, cleanerReclaimed atomic.Int64
}

// config returns the partition's current topic config.
func (h *hosted) config() *config.Topic { return h.cfg.Load() }

// dataPlane is the set of partition replicas this node hosts. It follows
// the controller's image: the broker's follow loop applies every image
// change (open new partitions, apply leadership and ISR, apply config
// changes, delete the data of topics that disappeared).
type dataPlane struct {
	b *Broker

	// syncMu serializes applying images (the follow loop, and handlers
	// that need a just-created topic at once).
	syncMu  sync.Mutex
	applied *controller.Image // last image applied; under syncMu
	// appliedLead is whether this node led where applied names it
	// (Broker.mayLead); under syncMu.
	appliedLead bool

	mu    sync.RWMutex
	parts map[topicPartition]*hosted
	// gen counts the changes to parts, under mu: a lookup made at one gen
	// (and image) stands while gen is the same, which fetch sessions use
	// to keep theirs (fetch.lookup).
	gen atomic.Uint64
	// changes counts the applies that changed a hosted replica's state or
	// the set hosted: the replica fetchers need syncing only after one
	// (Broker.follow).
	changes atomic.Uint64
	// shared is the hosted partitions this node leads, in the image
	// applied last, with a replica besides itself or without itself in the
	// ISR: the only ones whose ISR or leadership the maintain loop may have
	// a change to propose for (Broker.maintain). A partition alone on this
	// node has no follower to drop or add and no one to hand over to, so
	// 10,000 of them cost the loop nothing. Set by apply.
	shared atomic.Pointer[[]*hosted]

	producerIDs producerIDBlock // InitProducerId (metadata.go)

	// fs is the data directory's file system: Config.LogFS, or vfs.OS.
	fs vfs.FS

	// files bounds the segment descriptors of every hosted log
	// (log.max.open.files).
	files *log.Files

	// checkpoints are every hosted log's recovery point, leader-epoch
	// history and high-water mark, one file in the data directory
	// (checkpointsFile).
	checkpoints *log.Checkpoints

	// storage counts the failed writes of the data directory's logs since
	// mqd started (logdirs.go).
	storage log.StorageCounters

	// traffic counts the client traffic of each topic hosted here (metrics.go).
	traffic trafficCounters

	// cleanMu guards clean: what the previous run's clean shutdown left
	// of each log (by directory name), each given to the first Open of
	// its log only.
	cleanMu sync.Mutex
	clean   map[string]log.CleanShutdown
	// synced is set while the first image is applied after a syncfs of
	// the data directory's file system (log.Options.Synced).
	synced bool
}

// cleanShutdownFile, in the data directory, is written once every log
// was closed cleanly (log.WriteCleanShutdownFile) and removed at start
// before any log is opened.
const cleanShutdownFile = "clean-shutdown"

// checkpointsFile, in the data directory, holds the recovery point,
// leader-epoch history and high-water mark of every hosted partition
// (log.Checkpoints), written every
// replica.high.watermark.checkpoint.interval.ms and after the logs close.
const checkpointsFile = "log-checkpoints"

// newDataPlane prepares the partitions this node hosts: Broker.follow
// opens them (openFirst) and applies the image's changes after.
func newDataPlane(b *Broker) (*dataPlane, error) {
	d := &dataPlane{
		b:     b,
		parts: map[topicPartition]*hosted{},
		fs:    b.cfg.LogFS,
		files: log.NewFiles(int(b.cfg.Settings.LogMaxOpenFiles)),
	}
	if d.fs == nil {
		d.fs = vfs.OS
	}
	limit := openFilesLimit()
	b.log.Info("segment files", "log.max.open.files", d.files.Max(), "open_files_limit", limit)
	if limit > 0 && int64(d.files.Max()) > limit-64 {
		b.log.Warn("log.max.open.files leaves less than 64 of the open-files limit to connections and checkpoints; opens may fail with too many open files",
			"log.max.open.files", d.files.Max(), "open_files_limit", limit)
	}
	if b.cfg.Settings.DataDir == "" {
		return nil, errors.New("broker: no data directory")
	}
	if err := d.fs.MkdirAll(b.cfg.Settings.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	clean, err := log.TakeCleanShutdownFile(b.cfg.LogFS, filepath.Join(b.cfg.Settings.DataDir, cleanShutdownFile))
	switch {
	case err != nil:
		b.log.Warn("cannot read the clean-shutdown record; recovering every log", "err", err)
	case len(clean) == 0 && hostsPartitions(d.fs, b.cfg.Settings.DataDir):
		b.log.Info("no clean-shutdown record: recovering every log past its recovery point")
	}
	d.clean = clean
	d.checkpoints, err = log.OpenCheckpoints(b.cfg.LogFS, filepath.Join(b.cfg.Settings.DataDir, checkpointsFile), b.log)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if len(clean) == 0 && b.cfg.LogFS == nil && hostsPartitions(d.fs, b.cfg.Settings.DataDir) {
		// After a crash: one syncfs makes what the files hold durable, so
		// that the Opens rewrite only the checkpoints recovery changes
		// (ten fsyncs a partition otherwise). Without syncfs each Open
		// fsyncs what it needs.
		d.synced = vfs.SyncFileSystem(d.fs, b.cfg.Settings.DataDir) == nil
	}
	return d, nil
}

// openFirst opens the partitions of img, the first image applied: those
// of the data directory are recovered (d.synced, d.clean) and served as
// they open, up to batchMax at a time.
func (d *dataPlane) openFirst(img *controller.Image) error {
	start := d.b.clock.Now()
	d.cleanMu.Lock()
	records := len(d.clean)
	d.cleanMu.Unlock()
	err := d.apply(img)
	d.syncMu.Lock()
	d.synced = false
	d.syncMu.Unlock()
	d.cleanMu.Lock()
	used := records - len(d.clean)
	d.cleanMu.Unlock()
	d.mu.RLock()
	n := len(d.parts)
	d.mu.RUnlock()
	d.b.log.Info("partitions opened", "partitions", n, "clean_shutdown_records", used,
		"took", d.b.clock.Now().Sub(start).Round(time.Millisecond))
	d.reportStrayDirs(img)
	return err
}

// refresh applies the controller's current image now, so that a handler
// that just created a topic finds its partitions open.
func (d *dataPlane) refresh() {
	if err := d.apply(d.b.ctrl.Image()); err != nil {
		d.b.log.Error("apply metadata image", "err", err)
	}
}

// refreshIfIdle is refresh unless an image is being applied already (the
// follow loop opening many partitions): a produce or fetch for a
// partition still opening is answered at once with a retriable error
// rather than made to wait for every other partition of the image.
func (d *dataPlane) refreshIfIdle() {
	if !d.syncMu.TryLock() {
		return
	}
	d.syncMu.Unlock()
	d.refresh()
}

// partitionDir is where the log of a partition lives.
func (d *dataPlane) partitionDir(topic string, partition int32) string {
	return filepath.Join(d.b.cfg.Settings.DataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// apply makes the hosted partitions match img. Errors opening one
// partition are logged and returned joined; the other partitions are
// still applied.
func (d *dataPlane) apply(img *controller.Image) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	lead := d.b.mayLead(img)
	if d.applied != nil && img.Version <= d.applied.Version && d.applied.Version != 0 && lead == d.appliedLead {
		return nil
	}
	self := d.b.cfg.Settings.NodeID
	var errs []error
	// Dynamic broker configs (cluster defaults, then this node's) change the
	// defaults of every topic.
	settings, err := d.b.cfg.Settings.WithDynamic(img.BrokerConfigs[-1], img.BrokerConfigs[self])
	if err != nil {
		d.b.log.Warn("dynamic broker config", "err", err)
	}
	want := map[topicPartition]bool{}
	var work []openWork

	// Topics sorted for a deterministic order of logs and opens.
	names := slices.Sorted(maps.Keys(img.Topics))
	for _, name := range names {
		t := img.Topics[name]
		var tcfg config.Topic
		resolved := false
		for _, p := range t.Partitions {
			if !slices.Contains(p.Replicas, self) {
				continue
			}
			if !resolved {
				var err error
				// ResolveTopic applies every valid override even when one
				// is bad; serve the topic with those rather than not at all.
				tcfg, err = config.ResolveTopic(settings, t.Configs)
				if err != nil {
					d.b.log.Warn("topic config", "topic", name, "err", err)
				}
				resolved = true
			}
			if p.Leader == self && !lead {
				// Not before this node's registration is in the image:
				// followed by nobody, it answers NOT_LEADER_OR_FOLLOWER.
				p.Leader = -1
			}
			tp := topicPartition{name, p.ID}
			want[tp] = true
			h := d.lookup(tp)
			if h != nil && h.topicID != t.ID {
				// Deleted and re-created under the same name between two
				// images: the old data belongs to the old topic.
				d.remove(tp, true)
				h = nil
			}
			if h == nil {
				work = append(work, openWork{t: t, p: p, cfg: tcfg})
				continue
			}
			if *h.config() != tcfg {
				if err := d.reconfigure(h, tcfg); err != nil {
					errs = append(errs, err)
				}
			}
			work = append(work, openWork{t: t, p: p, h: h})
		}
	}
	errs = append(errs, d.openAndBecome(work)...)
	d.mu.RLock()
	var gone []topicPartition
	for tp := range d.parts {
		if !want[tp] {
			gone = append(gone, tp)
		}
	}
	d.mu.RUnlock()
	for _, tp := range gone {
		d.remove(tp, true)
	}
	if len(gone) > 0 {
		d.changes.Add(1)
	}
	hostedTopics := map[string]bool{}
	for tp := range want {
		hostedTopics[tp.topic] = true
	}
	d.traffic.retain(hostedTopics)
	d.shared.Store(d.sharedIn(work))
	d.applied, d.appliedLead = img, lead
	if lead {
		d.b.led()
	}
	return errors.Join(errs...)
}

// sharedIn returns the hosted partitions of work, an image applied, that
// this node leads and shares (dataPlane.shared). The image, not the
// replica's state, decides: a replica whose Become failed and that still
// has an older state could only propose under stale epochs, which the
// controller refuses.
func (d *dataPlane) sharedIn(work []openWork) *[]*hosted {
	self := d.b.cfg.Settings.NodeID
	var out []*hosted
	for _, w := range work {
		p := w.p
		if p.Leader != self || (len(p.Replicas) == 1 && len(p.ISR) == 1 && p.ISR[0] == self) {
			continue
		}
		if h := d.lookup(topicPartition{w.t.Name, p.ID}); h != nil {
			out = append(out, h)
		}
	}
	return &out
}

// leadShared returns the partitions of dataPlane.shared.
func (d *dataPlane) leadShared() []*hosted {
	if s := d.shared.Load(); s != nil {
		return *s
	}
	return nil
}

// openWork is one partition of an image to apply: opened first when h is
// nil, then given its state.
type openWork struct {
	t   *controller.Topic
	p   controller.Partition
	cfg config.Topic // when h is nil: the config to open it with
	h   *hosted
}

// state is the replica state the image gives w's partition.
func (w openWork) state() replica.PartitionState {
	p := w.p
	return replica.PartitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR}
}

// openWorkers bounds how many partitions are opened (or given a new
// state) at once. Opening a log and becoming its leader are mostly
// fsyncs of small files, which the file system commits together when
// many are waiting: creating 10,000 partitions one at a time took 25
// ms each here, almost all of it waiting for the disk.
const openWorkers = 128

// batchMin is how many partitions to open at least for them to share a
// log.SyncBatch (two syncfs of the data directory's file system) rather
// than fsync their checkpoints one by one; batchMax is how many share one
// at most, so that the first ones are served while the others open.
const (
	batchMin = 16
	batchMax = 1024
)

// openParallelism is how many partitions are opened or closed at once:
// openWorkers, fewer when the open-files limit is low. Each open holds a
// few short-lived descriptors (checkpoints, indexes, the directory) beside
// the segment files, which log.max.open.files bounds: a quarter of what
// the limit leaves them, so that clients still get sockets.
func (d *dataPlane) openParallelism() int {
	limit := openFilesLimit()
	if limit <= 0 {
		return openWorkers
	}
	spare := limit - int64(d.files.Max())
	return int(max(min(spare/4, openWorkers), 4))
}

// openFilesLimit is the soft RLIMIT_NOFILE (which the Go runtime raised to
// the hard one at start), 0 when unknown.
func openFilesLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int64(min(rl.Cur, 1<<30))
}

// openAndBecome opens the partitions of work that are not open yet and
// applies each one's state, openParallelism at a time, and returns the errors.
// Only a handful of partitions change in most images: those are applied
// on the caller's goroutine. New partitions are opened and given their
// state up to batchMax at a time in one log.SyncBatch, and registered
// (served) once it committed.
func (d *dataPlane) openAndBecome(work []openWork) []error {
	var mu sync.Mutex
	var errs []error
	failed := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	become := func(h *hosted, w openWork) {
		if err := h.Become(w.state()); err != nil && !errors.Is(err, replica.ErrStaleLeaderEpoch) {
			failed(fmt.Errorf("partition %s-%d: %w", w.t.Name, w.p.ID, err))
		}
	}
	// A replica already in the image's state is left alone: an image
	// changes a few partitions at a time (an ISR change each), and giving
	// each of 10,000 its state again, every lock taken exclusively, was
	// most of a broker's CPU while a restarted node rejoined the ISRs.
	var fresh, known []openWork
	for _, w := range work {
		switch {
		case w.h == nil:
			fresh = append(fresh, w)
		case !w.h.InState(w.state()):
			known = append(known, w)
		}
	}
	if len(fresh) > 0 || len(known) > 0 {
		defer d.changes.Add(1)
	}
	par := d.openParallelism()
	forEachBounded(len(known), par, func(i int) { become(known[i].h, known[i]) })
	dirsDurable := d.makeDirs(fresh)
	for len(fresh) > 0 {
		chunk := fresh[:min(len(fresh), batchMax)]
		fresh = fresh[len(chunk):]
		var batch *log.SyncBatch
		if len(chunk) >= batchMin {
			batch = log.NewSyncBatch(d.b.cfg.LogFS, d.b.cfg.Settings.DataDir)
		}
		opened := make([]*hosted, len(chunk))
		forEachBounded(len(chunk), par, func(i int) {
			h, err := d.open(chunk[i].t, chunk[i].p.ID, chunk[i].cfg, dirsDurable, batch)
			if err != nil {
				failed(err)
				return
			}
			become(h, chunk[i])
			opened[i] = h
		})
		if err := batch.Commit(); err != nil {
			// Not durable: served by none, opened again at the next image.
			failed(fmt.Errorf("open %d partitions: %w", len(chunk), err))
			forEachBounded(len(chunk), par, func(i int) {
				if opened[i] != nil {
					_ = opened[i].Close()
				}
			})
			continue
		}
		for _, h := range opened {
			if h != nil {
				d.register(h)
			}
		}
	}
	return errs
}

// makeDirs creates the directories of the new partitions of work that do
// not exist yet, with one fsync of the data directory for them all, and
// reports whether it did (else each Open makes its own durable).
func (d *dataPlane) makeDirs(work []openWork) bool {
	var names []string
	exists := d.dirExists(len(work))
	for _, w := range work {
		if w.h != nil {
			continue
		}
		if name := filepath.Base(d.partitionDir(w.t.Name, w.p.ID)); !exists(name) {
			names = append(names, name)
		}
	}
	if len(names) < 2 {
		return false
	}
	for _, name := range names {
		d.checkpoints.Forget(name)
	}
	if err := log.MakeDirs(d.b.cfg.LogFS, d.b.cfg.Settings.DataDir, names); err != nil {
		d.b.log.Warn("create partition directories", "err", err)
		return false
	}
	return true
}

// dirExists returns whether an entry of the data directory exists, for n
// lookups: a stat each when n is small, else one listing of the directory
// (a node opening its 10,000 partitions at start stats none of them).
func (d *dataPlane) dirExists(n int) func(name string) bool {
	dataDir := d.b.cfg.Settings.DataDir
	stat := func(name string) bool {
		_, err := d.fs.Stat(filepath.Join(dataDir, name))
		return !errors.Is(err, os.ErrNotExist)
	}
	if n < 64 {
		return stat
	}
	entries, err := d.fs.ReadDir(dataDir)
	if err != nil {
		return stat
	}
	listed := make(map[string]bool, len(entries))
	for _, e := range entries {
		listed[e.Name()] = true
	}
	return func(name string) bool { return listed[name] }
}

// forEachBounded calls fn(0) … fn(n-1), at most workers at once, and
// returns when all have returned. A small n runs on the caller's goroutine.
func forEachBounded(n, workers int, fn func(i int)) {
	if n <= 4 || workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// logConfig turns a topic's effective configuration into its log's.
//
// A topic whose cleanup.policy is compact alone keeps its segments whatever
// retention.ms and retention.bytes say, as in Kafka: retention applies only
// to topics whose policy includes delete. Until mq compacts, such a topic
// keeps everything, so __consumer_offsets (compact) never loses a group's
// latest commit to retention.
func logConfig(t config.Topic) (log.Config, error) {
	policy, err := log.ParseFlushPolicy(t.FlushPolicy)
	if err != nil {
		return log.Config{}, err
	}
	retentionMS, retentionBytes := t.RetentionMS, t.RetentionBytes
	if !cleanupDeletes(t.CleanupPolicy) {
		retentionMS, retentionBytes = -1, -1
	}
	// A compacted topic's active segment rolls by max.compaction.lag.ms
	// too, as Kafka's does: the cleaner never touches the active segment,
	// and a quiet topic's records would otherwise wait segment.ms (a week)
	// to become cleanable.
	segmentMS := t.SegmentMS
	if cleanupCompacts(t.CleanupPolicy) && t.MaxCompactionLagMS > 0 {
		segmentMS = min(segmentMS, t.MaxCompactionLagMS)
	}
	return log.Config{
		SegmentBytes:       t.SegmentBytes,
		SegmentMS:          segmentMS,
		RetentionMS:        retentionMS,
		RetentionBytes:     retentionBytes,
		IndexIntervalBytes: t.IndexIntervalBytes,
		FlushPolicy:        policy,
		FlushInterval:      time.Duration(t.FlushMS) * time.Millisecond,
		LogAppendTime:      t.MessageTimestampType == "LogAppendTime",
	}, nil
}

// cleanupDeletes reports whether a cleanup.policy (normalized: delete,
// compact or compact,delete) deletes old segments, and cleanupCompacts
// whether it compacts the log.
func cleanupDeletes(policy string) bool  { return policy != "compact" }
func cleanupCompacts(policy string) bool { return policy != "delete" }

// open opens (or creates) the log of one partition, in batch when not
// nil; register serves it. dirDurable says its directory was made
// durable already (makeDirs).
func (d *dataPlane) open(t *controller.Topic, partition int32, tcfg config.Topic, dirDurable bool, batch *log.SyncBatch) (*hosted, error) {
	lcfg, err := logConfig(tcfg)
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", t.Name, partition, err)
	}
	dir := d.partitionDir(t.Name, partition)
	if err := d.setAsideOtherTopics(dir, t.ID.String()); err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, partition, err)
	}
	opts := log.Options{
		Logger:     d.b.log.With("topic", t.Name, "partition", partition),
		FS:         d.b.cfg.LogFS,
		Files:      d.files,
		Clock:      d.b.clock,
		Counters:   &d.storage,
		DirDurable: dirDurable,
		Synced:     d.synced,
		Batch:      batch,

		Checkpoints: d.checkpoints,
		Owner:       t.ID.String(),
	}
	d.cleanMu.Lock()
	if c, ok := d.clean[filepath.Base(dir)]; ok {
		opts.Clean = &c
		delete(d.clean, filepath.Base(dir))
	}
	d.cleanMu.Unlock()
	l, err := log.Open(dir, lcfg, opts)
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, partition, err)
	}
	p := replica.New(replica.Config{
		Topic:             t.Name,
		Partition:         partition,
		TopicID:           t.ID,
		NodeID:            d.b.cfg.Settings.NodeID,
		MinInsyncReplicas: tcfg.MinInsyncReplicas,
		ReplicaLagTime:    d.b.cfg.Settings.ReplicaLagTime,
		Clock:             d.b.clock,
	}, l)
	if lost := p.LostCommitted(); lost.Lost() {
		d.b.log.Error("partition lost records it knew as committed: its log ends below its checkpointed high-water mark (a power loss took what was not flushed); it stays out of the ISR until it caught up, and leads only after an unclean election",
			"topic", t.Name, "partition", partition, "log_end_offset", lost.EndOffset, "checkpointed_high_watermark", lost.HighWatermark)
	}
	h := &hosted{Partition: p, topicID: t.ID, traffic: d.traffic.of(t.Name)}
	h.cfg.Store(&tcfg)
	return h, nil
}

// setAsideOtherTopics moves a partition directory that the log checkpoints
// say a topic other than topicID wrote (a topic of the same name deleted
// while this node was down, and created again) out of the way, to
// DIR.TOPICID.stale, so that the new topic starts empty rather than serve
// the old one's records. It is kept, not deleted, and logged: a surprise
// is no reason to delete data. A directory without an owner (written by
// an mq before owners were recorded) is taken as the topic's.
func (d *dataPlane) setAsideOtherTopics(dir, topicID string) error {
	name := filepath.Base(dir)
	owner, ok := d.checkpoints.Owner(name)
	if !ok || owner == topicID {
		return nil
	}
	aside := fmt.Sprintf("%s.%s.stale", dir, owner)
	switch err := vfs.MoveDir(d.b.cfg.LogFS, dir, aside); {
	case errors.Is(err, os.ErrNotExist):
		d.checkpoints.Forget(name)
		return nil
	case err != nil:
		return fmt.Errorf("set aside the directory of an earlier topic of the same name: %w", err)
	}
	d.checkpoints.Forget(name)
	d.b.log.Warn("partition directory belongs to an earlier topic of the same name (deleted while this node was away); moved aside, the partition starts empty here",
		"dir", dir, "moved_to", aside, "earlier_topic_id", owner, "topic_id", topicID)
	return nil
}

// register serves an opened partition.
func (d *dataPlane) register(h *hosted) {
	d.mu.Lock()
	d.parts[topicPartition{h.Topic(), h.Partition.Partition()}] = h
	d.gen.Add(1)
	d.mu.Unlock()
	l := h.Log()
	d.b.log.Debug("partition opened", "topic", h.Topic(), "partition", h.Partition.Partition(),
		"log_start_offset", l.StartOffset(), "log_end_offset", l.EndOffset())
	select {
	case d.b.scrubWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// reconfigure applies a changed topic config to an open partition.
func (d *dataPlane) reconfigure(h *hosted, tcfg config.Topic) error {
	lcfg, err := logConfig(tcfg)
	if err != nil {
		return fmt.Errorf("partition %s: %w", h, err)
	}
	h.Log().SetConfig(lcfg)
	h.SetMinInsyncReplicas(tcfg.MinInsyncReplicas)
	h.cfg.Store(&tcfg)
	d.b.log.Info("partition reconfigured", "partition", h.String())
	return nil
}

// remove unregisters a partition and closes it, deleting its data when
// del is set.
func (d *dataPlane) remove(tp topicPartition, del bool) {
	d.mu.Lock()
	h := d.parts[tp]
	delete(d.parts, tp)
	d.gen.Add(1)
	d.mu.Unlock()
	if h == nil {
		return
	}
	var err error
	if del {
		err = h.Delete()
		d.b.log.Info("partition deleted", "topic", tp.topic, "partition", tp.partition)
	} else {
		err = h.Close()
	}
	if err != nil {
		d.b.log.Error("close partition", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
}

// partitionDirName matches TOPIC-PARTITION directory names.
var partitionDirName = regexp.MustCompile(`^([a-zA-Z0-9._-]+)-([0-9]+)$`)

// reportStrayDirs logs partition-like directories of the data directory
// that no hosted partition uses. They are left alone: a surprise is no
// reason to delete someone's data.
func (d *dataPlane) reportStrayDirs(img *controller.Image) {
	entries, err := d.fs.ReadDir(d.b.cfg.Settings.DataDir)
	if err != nil {
		d.b.log.Warn("list data directory", "err", err)
		return
	}
	d.mu.RLock()
	hostedDirs := make(map[string]bool, len(d.parts))
	for tp := range d.parts {
		hostedDirs[fmt.Sprintf("%s-%d", tp.topic, tp.partition)] = true
	}
	d.mu.RUnlock()
	for _, e := range entries {
		if !e.IsDir() || !partitionDirName.MatchString(e.Name()) {
			continue
		}
		if !hostedDirs[e.Name()] {
			d.b.log.Warn("data directory holds a partition this node does not host; leaving it alone",
				"dir", filepath.Join(d.b.cfg.Settings.DataDir, e.Name()), "image_version", img.Version)
		}
	}
}

// lostCommitted lists the hosted replicas whose log, when opened, ended
// below its checkpointed high-water mark (replica.LostCommitted).
func (d *dataPlane) lostCommitted() []controller.LostReplica {
	var out []controller.LostReplica
	for _, h := range d.all() {
		if lost := h.LostCommitted(); lost.Lost() {
			out = append(out, controller.LostReplica{Topic: h.Topic(), Partition: h.Partition.Partition(), EndOffset: lost.EndOffset, HighWatermark: lost.HighWatermark})
		}
	}
	slices.SortFunc(out, func(a, b controller.LostReplica) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// hostsPartitions reports whether dir of fsys holds partition
// directories: a restarted node's, whose logs may have lost what they
// had.
func hostsPartitions(fsys vfs.FS, dir string) bool {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() && partitionDirName.MatchString(e.Name()) })
}

// lookup returns a hosted partition, or nil.
func (d *dataPlane) lookup(tp topicPartition) *hosted {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.parts[tp]
}

// partition returns the hosted partition of a topic, or nil.
func (d *dataPlane) partition(topic string, partition int32) *hosted {
	return d.lookup(topicPartition{topic, partition})
}

// hostedReplica returns the hosted partition of topic t. When t places a
// replica on this node that the follow loop has not opened yet (a topic
// created a moment ago), it applies the current image first, so a client
// that creates a topic and produces at once is not sent away to retry.
func (d *dataPlane) hostedReplica(t *controller.Topic, partition int32) *hosted {
	h := d.partition(t.Name, partition)
	if h == nil && slices.Contains(t.Partitions[partition].Replicas, d.b.cfg.Settings.NodeID) {
		d.refreshIfIdle()
		h = d.partition(t.Name, partition)
	}
	if h == nil || h.topicID != t.ID {
		return nil
	}
	return h
}

// all returns every hosted partition.
func (d *dataPlane) all() []*hosted {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*hosted, 0, len(d.parts))
	for _, h := range d.parts {
		out = append(out, h)
	}
	return out
}

// close flushes and closes every log; the broker has stopped following
// the image.
func (d *dataPlane) close() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	return d.closeAll(true)
}

// closeAll checkpoints the high-water mark of every partition and closes
// it, in parallel; many share one log.SyncBatch, committed before the log
// checkpoints (which then hold every log's recovery point at its end) and
// the record are written. With record set, the logs that closed cleanly are written to
// the clean-shutdown file for the next start.
func (d *dataPlane) closeAll(record bool) error {
	d.mu.Lock()
	parts := d.parts
	d.parts = map[topicPartition]*hosted{}
	d.gen.Add(1)
	d.mu.Unlock()
	all := slices.Collect(maps.Keys(parts))
	errs := make([]error, len(all))
	var batch *log.SyncBatch
	if len(all) >= batchMin {
		batch = log.NewSyncBatch(d.b.cfg.LogFS, d.b.cfg.Settings.DataDir)
	}
	// Closing is fsyncs too (see openWorkers).
	forEachBounded(len(all), d.openParallelism(), func(i int) {
		tp := all[i]
		h := parts[tp]
		batch.Add(h.Log())
		if err := h.Log().CheckpointHighWatermark(h.HighWatermarkToCheckpoint()); err != nil && !errors.Is(err, log.ErrClosed) {
			d.b.log.Warn("checkpoint high-water mark", "partition", h.String(), "err", err)
		}
		if err := h.Close(); err != nil {
			errs[i] = fmt.Errorf("close %s-%d: %w", tp.topic, tp.partition, err)
		}
	})
	if err := batch.Commit(); err != nil {
		// What the logs wrote may not be durable: no record, the next
		// start recovers them.
		return errors.Join(append(errs, fmt.Errorf("close %d partitions: %w", len(all), err))...)
	}
	if err := d.checkpoints.Write(); err != nil {
		errs = append(errs, fmt.Errorf("write the log checkpoints: %w", err))
	}
	if record && len(all) > 0 {
		clean := make(map[string]log.CleanShutdown, len(all))
		for _, tp := range all {
			if c, ok := parts[tp].Log().CleanShutdown(); ok {
				clean[filepath.Base(d.partitionDir(tp.topic, tp.partition))] = c
			}
		}
		if err := log.WriteCleanShutdownFile(d.b.cfg.LogFS, filepath.Join(d.b.cfg.Settings.DataDir, cleanShutdownFile), clean); err != nil {
			errs = append(errs, fmt.Errorf("record the clean shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// EnforceRetention applies retention (retention.ms, retention.bytes) to
// every hosted partition. The daemon calls it every
// log.retention.check.interval.ms.
func (b *Broker) EnforceRetention() {
	for _, h := range b.data.all() {
		n, err := h.Log().EnforceRetention()
		if err != nil {
			if !errors.Is(err, log.ErrClosed) {
				b.log.Error("retention", "partition", h.String(), "err", err)
			}
			continue
		}
		if n > 0 {
			b.log.Info("retention deleted segments", "partition", h.String(), "segments", n,
				"log_start_offset", h.Log().StartOffset())
		}
	}
}

// dataAPIs lists the data-plane APIs and the versions implemented.
func (b *Broker) dataAPIs() map[int16]api {
	return map[int16]api{
		kmsg.Produce.Int16():        {min: 3, max: 11, handle: b.handleProduce},
		kmsg.Fetch.Int16():          {min: 4, max: 18, handle: b.handleFetch},
		kmsg.ListOffsets.Int16():    {min: 1, max: 8, handle: b.handleListOffsets},
		kmsg.Metadata.Int16():       {min: 0, max: 13, handle: b.handleMetadata},
		kmsg.DeleteRecords.Int16():  {min: 0, max: 2, handle: b.handleDeleteRecords},
		kmsg.InitProducerID.Int16(): {min: 0, max: 4, handle: b.handleInitProducerID},

		kmsg.OffsetForLeaderEpoch.Int16(): {min: 0, max: 4, handle: b.handleOffsetForLeaderEpoch}, // epochs.go
	}
}

// waitContext bounds a wait by a request's timeout in milliseconds (<= 0:
// no wait beyond ctx).
func waitContext(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	if timeoutMillis <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
}
