package partition

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/log"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/replica"
	"github.com/mqproject/mq/lib/vfs"
)

// key names one partition.
type key struct {
	topic     string
	partition int32
}

// Hosted is one partition replica this node holds, with the topic config
// its log was last configured with. Its methods are the replica's, and
// safe for concurrent use.
type Hosted struct {
	*replica.Partition
	topicID controller.TopicID
	cfg     atomic.Pointer[config.Topic] // replaced, never modified
	// Traffic counts the client traffic of the partition's topic on this
	// node: the broker adds to it as it serves produce and fetch.
	Traffic *Traffic
	// cleanerPasses and cleanerReclaimed count the compaction passes over
	// this log since mqd started and the bytes they freed (clean.go).
	cleanerPasses, cleanerReclaimed atomic.Int64
}

// Config returns the partition's current topic config.
func (h *Hosted) Config() *config.Topic { return h.cfg.Load() }

// TopicID returns the ID of the topic the replica belongs to.
func (h *Hosted) TopicID() controller.TopicID { return h.topicID }

// Errors of a lookup (Manager.Leader).
var (
	// ErrUnknownPartition: the topic does not exist or has no such
	// partition.
	ErrUnknownPartition = errors.New("partition: unknown topic or partition")
	// ErrNotHosted: the partition exists, and this node holds no replica
	// of it, or has not opened it yet.
	ErrNotHosted = errors.New("partition: not hosted by this node")
)

// Config is what a Manager needs from its surroundings.
type Config struct {
	Settings   config.Broker          // mqd settings (data dir, node id, defaults for topics…)
	Controller *controller.Controller // the image the partitions follow, and where ISR changes go
	Logger     *slog.Logger           // nil = silent
	Clock      clock.Clock            // drives the logs, replicas and tasks; nil = real time
	// FS is the file system of the data directory; nil is vfs.OS. Tests
	// pass a faultfs or a crashfs.
	FS vfs.FS
	// AwaitRegistration keeps the node from leading any partition until
	// its own registration is in the image (see mayLead): mqd sets it,
	// and tells the Manager its broker epoch once it has registered
	// (Registered). Without it the node leads where the image says at
	// once.
	AwaitRegistration bool
	// Watch hears how the followers' connections to their leaders fare
	// (peer.Watch); nil: nobody listens.
	Watch *peer.Watch
	// PeerTLS, when set (security.inter.broker.protocol SSL), is the TLS
	// of the followers' connections, called at each dial: they fetch
	// from their leader's ssl:// listener, presenting this node's
	// certificate. A leader with no ssl:// listener is not fetched from.
	PeerTLS func() *tls.Config
}

// Manager holds the partition replicas this node hosts and keeps them
// in step with the controller's image: one follow loop applies every
// image in order (open new partitions, give each its leader, epochs and
// ISR, apply config changes, delete the data of topics gone), then hands
// the followed partitions to the replica fetchers, then calls the hooks
// (AfterApply). A maintain loop proposes the ISR changes and resignations
// of the partitions it leads and checkpoints the high-water marks, and
// the log tasks (StartLogTasks) enforce retention, compact and scrub.
// Its methods are safe for concurrent use.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock
	ctrl  *controller.Controller

	// syncMu serializes applying images (the follow loop, and Refresh by
	// handlers that need a just-created topic at once).
	syncMu  sync.Mutex
	applied *controller.Image // last image applied; under syncMu
	// appliedLead is whether this node led where applied names it
	// (mayLead); under syncMu.
	appliedLead bool
	// closed is set by Close, under syncMu, before it closes the logs:
	// an apply after it (Refresh by a handler still answering) opens
	// nothing.
	closed bool

	mu    sync.RWMutex
	parts map[key]*Hosted
	// gen counts the changes to parts, under mu: a lookup made at one gen
	// (and image) stands while gen is the same (Gen).
	gen atomic.Uint64
	// changes counts the applies that changed a hosted replica's state or
	// the set hosted: the replica fetchers need syncing only after one
	// (follow).
	changes atomic.Uint64
	// shared is the hosted partitions this node leads, in the image
	// applied last, with a replica besides itself or without itself in the
	// ISR: the only ones whose ISR or leadership the maintain loop may have
	// a change to propose for. A partition alone on this node has no
	// follower to drop or add and no one to hand over to, so 10,000 of
	// them cost the loop nothing. Set by apply.
	shared atomic.Pointer[[]*Hosted]
	// applies tells lookups waiting for an image that it was applied
	// (catchup.go).
	applies applies

	// fs is the data directory's file system: Config.FS, or vfs.OS.
	fs vfs.FS

	// files bounds the segment descriptors of every hosted log
	// (log.max.open.files).
	files *log.Files

	// checkpoints are every hosted log's recovery point, leader-epoch
	// history and high-water mark, one file in the data directory
	// (CheckpointsFile).
	checkpoints *log.Checkpoints

	// storage counts the failed writes of the data directory's logs since
	// mqd started.
	storage log.StorageCounters

	// traffic counts the client traffic of each topic hosted here.
	traffic trafficCounters

	// isr counts the ISR changes this node made as leader (isr.go).
	isr isrCounters

	// fetchers replicate the partitions this node follows (fetchers.go).
	fetchers *replicaFetchers

	// throttles are the replication throttle's quotas (throttle.go).
	throttles throttles

	// cleanMu guards clean: what the previous run's clean shutdown left
	// of each log (by directory name), each given to the first Open of
	// its log only.
	cleanMu sync.Mutex
	clean   map[string]log.CleanShutdown
	// synced is set while the first image is applied after a syncfs of
	// the data directory's file system (log.Options.Synced).
	synced bool

	// scrubWake wakes an idle scrubber: a partition was opened, with
	// bytes no one has checked since mqd started (scrub.go).
	scrubWake chan struct{}

	// hooksMu guards hooks, called by the follow loop after each image
	// (AfterApply).
	hooksMu sync.Mutex
	hooks   []func()

	// opened is closed when the follow loop has opened the partitions of
	// the first image, openErr (written before) what that failed to open.
	opened  chan struct{}
	openErr error

	// regEpoch is the broker epoch of this process's first registration
	// (0 until Registered); regWake wakes the follow loop to apply the
	// image again once it is set, and leading is closed (leadingOnce)
	// once an image was applied that lets this node lead.
	regEpoch    atomic.Int64
	regWake     chan struct{}
	leading     chan struct{}
	leadingOnce sync.Once

	// tiering is the node's tiered storage (tier.go).
	tiering tiering

	// tasks stops the log tasks (StartLogTasks), tasksDone is closed
	// once they all ended.
	tasks     context.CancelFunc
	tasksDone chan struct{}

	stop       chan struct{} // closed by Close: the follow and maintain loops end
	done       chan struct{} // closed when the follow loop has ended
	maintained chan struct{} // closed when the maintain loop has ended (isr.go)
	closeOnce  sync.Once
}

// CleanShutdownFile, in the data directory, is written once every log
// was closed cleanly (log.WriteCleanShutdownFile) and removed at start
// before any log is opened.
const CleanShutdownFile = "clean-shutdown"

// CheckpointsFile, in the data directory, holds the recovery point,
// leader-epoch history and high-water mark of every hosted partition
// (log.Checkpoints), written every
// replica.high.watermark.checkpoint.interval.ms and after the logs close.
const CheckpointsFile = "log-checkpoints"

// Open prepares the partitions this node hosts under
// cfg.Settings.DataDir and starts the follow loop, which opens them, and
// the maintain loop. It returns at once, while the partitions open: a
// lookup of one not open yet finds none. Opened waits for them.
func Open(cfg Config) (*Manager, error) {
	m := &Manager{
		cfg: cfg, log: cfg.Logger, clock: cfg.Clock, ctrl: cfg.Controller, fs: cfg.FS,
		parts:     map[key]*Hosted{},
		files:     log.NewFiles(int(cfg.Settings.LogMaxOpenFiles)),
		scrubWake: make(chan struct{}, 1),
		opened:    make(chan struct{}), regWake: make(chan struct{}, 1), leading: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), maintained: make(chan struct{}),
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.clock == nil {
		m.clock = clock.Real()
	}
	if m.fs == nil {
		m.fs = vfs.OS
	}
	limit := openFilesLimit()
	m.log.Info("segment files", "log.max.open.files", m.files.Max(), "open_files_limit", limit)
	if limit > 0 && int64(m.files.Max()) > limit-64 {
		m.log.Warn("log.max.open.files leaves less than 64 of the open-files limit to connections and checkpoints; opens may fail with too many open files",
			"log.max.open.files", m.files.Max(), "open_files_limit", limit)
	}
	dataDir := cfg.Settings.DataDir
	if dataDir == "" {
		return nil, errors.New("partition: no data directory")
	}
	if err := m.fs.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("partition: data directory: %w", err)
	}
	clean, err := log.TakeCleanShutdownFile(cfg.FS, filepath.Join(dataDir, CleanShutdownFile))
	switch {
	case err != nil:
		m.log.Warn("cannot read the clean-shutdown record; recovering every log", "err", err)
	case len(clean) == 0 && HostsPartitions(m.fs, dataDir):
		m.log.Info("no clean-shutdown record: recovering every log past its recovery point")
	}
	m.clean = clean
	m.checkpoints, err = log.OpenCheckpoints(cfg.FS, filepath.Join(dataDir, CheckpointsFile), m.log)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if len(clean) == 0 && cfg.FS == nil && HostsPartitions(m.fs, dataDir) {
		// After a crash: one syncfs makes what the files hold durable, so
		// that the Opens rewrite only the checkpoints recovery changes
		// (ten fsyncs a partition otherwise). Without syncfs each Open
		// fsyncs what it needs.
		m.synced = vfs.SyncFileSystem(m.fs, dataDir) == nil
	}
	m.throttles = throttles{leader: replica.NewQuota(m.clock), follower: replica.NewQuota(m.clock), commitLatency: new(replica.LatencyWindow)}
	m.throttles.auto = newAutoThrottle(m.clock, m.log, m.throttles.leader, m.throttles.follower, m.throttles.commitLatency)
	m.setThrottleRates(cfg.Settings)
	m.fetchers = newReplicaFetchers(m)
	// Changes from here on are applied by follow, after the first image.
	changes := m.ctrl.Changes()
	go m.follow(changes)
	go m.maintain()
	return m, nil
}

// Opened waits until the partitions of the first image are open and
// returns what failed to open, or ctx's error.
func (m *Manager) Opened(ctx context.Context) error {
	select {
	case <-m.opened:
		return m.openErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterApply has fn called after each image the follow loop applies,
// with the partitions of that image open, and once now: a part of the
// node that follows the partitions' leadership (a coordinator of an
// internal topic) stays in step with them. fn runs on the follow loop's
// goroutine and must not block on it (Refresh).
func (m *Manager) AfterApply(fn func()) {
	m.hooksMu.Lock()
	m.hooks = append(m.hooks, fn)
	m.hooksMu.Unlock()
	fn()
}

// applied calls the AfterApply hooks.
func (m *Manager) afterApply() {
	m.hooksMu.Lock()
	hooks := slices.Clone(m.hooks)
	m.hooksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// follow is the one loop that applies the controller's images to this
// node, in order: first the partitions (opened, led, reconfigured,
// deleted), then the replica fetchers (which leader each followed
// partition is fetched from), then the hooks (AfterApply), which need
// the partitions open. It runs until Close.
func (m *Manager) follow(changes <-chan struct{}) {
	defer close(m.done)
	img := m.ctrl.Image()
	m.openErr = m.openFirst(img)
	close(m.opened)
	synced, syncedChanges := img, m.changes.Load()
	m.fetchers.sync(img)
	m.trackPeers(img)
	m.afterApply()
	for {
		select {
		case <-changes:
		case <-m.regWake: // the same image may now let this node lead
		case <-m.stop:
			return
		}
		if !m.awaitHold() {
			return
		}
		changes = m.ctrl.Changes()
		img := m.ctrl.Image()
		if err := m.apply(img); err != nil {
			m.log.Error("apply metadata image", "err", err)
		}
		// The fetchers follow the replicas' states and the leaders'
		// addresses: an image changing neither (another node's ISR, a
		// group's config) leaves them as they are.
		if n, moved := m.changes.Load(), brokersMoved(synced, img); n != syncedChanges || moved {
			synced, syncedChanges = img, n
			m.fetchers.sync(img)
			if moved {
				m.trackPeers(img)
			}
		}
		m.afterApply()
	}
}

// brokersMoved reports whether a broker of img has an address or a
// fencing other than in old, or is new or gone: what the replica fetchers
// take from the brokers (replicaFetchers.sync).
func brokersMoved(old, img *controller.Image) bool {
	return !maps.EqualFunc(old.Brokers, img.Brokers, func(a, b controller.Broker) bool {
		return a.Host == b.Host && a.Port == b.Port && a.Fenced == b.Fenced
	})
}

// MayLead reports whether this node may lead the partitions img names it
// leader of. Without Config.AwaitRegistration, always. With it, only once
// img holds this process's own registration (the broker epoch it was
// given, or a later one): until then the image may be one the node
// recovered from disk, naming it leader in the epochs of its previous
// incarnation, whose unflushed records a crash may have taken. Leading
// there would take produces, serve followers and acknowledge acks=all on
// a log that lost records its followers still hold in the same epoch.
// The registration gives every partition the old incarnation led a new
// leader epoch (or another leader), and the followers reconcile their
// logs with it through OffsetForLeaderEpoch. Broker epochs are Raft
// indexes and only grow, so a later image never takes this back.
func (m *Manager) MayLead(img *controller.Image) bool {
	if !m.cfg.AwaitRegistration {
		return true
	}
	epoch := m.regEpoch.Load()
	if epoch <= 0 {
		return false
	}
	br, ok := img.Brokers[m.cfg.Settings.NodeID]
	return ok && br.Epoch >= epoch
}

// Registered tells the Manager the broker epoch of this process's
// registration: the follow loop applies the image again, leading where
// it names this node once the image holds it. Only the first call counts
// (later registrations of the same process lost nothing).
func (m *Manager) Registered(epoch int64) {
	if epoch <= 0 || !m.regEpoch.CompareAndSwap(0, epoch) {
		return
	}
	select {
	case m.regWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// led records that an image was applied under which this node leads
// where it names it (MayLead).
func (m *Manager) led() {
	m.leadingOnce.Do(func() { close(m.leading) })
}

// AwaitLeading waits until an image that lets this node lead has been
// applied (MayLead), or ctx ends.
func (m *Manager) AwaitLeading(ctx context.Context) error {
	select {
	case <-m.leading:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops following the controller, the log tasks and the replica
// fetchers, then checkpoints the high-water marks and flushes and closes
// every partition log, recording the clean shutdown for the next start.
// Closing twice returns nil.
func (m *Manager) Close() error {
	closed := false
	m.closeOnce.Do(func() {
		close(m.stop)
		<-m.done
		<-m.maintained
		m.syncMu.Lock()
		stop, done := m.tasks, m.tasksDone
		m.tasks = func() {} // no StartLogTasks from here on
		m.syncMu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
		closed = true
	})
	if !closed {
		return nil
	}
	m.fetchers.close()
	if m.cfg.Watch != nil {
		m.cfg.Watch.Track(nil, "")
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.closed = true
	err := m.closeAll(true) // high-water marks checkpointed first
	return errors.Join(err, m.closeTier())
}

// openFirst opens the partitions of img, the first image applied: those
// of the data directory are recovered (m.synced, m.clean) and served as
// they open, up to batchMax at a time.
func (m *Manager) openFirst(img *controller.Image) error {
	start := m.clock.Now()
	m.cleanMu.Lock()
	records := len(m.clean)
	m.cleanMu.Unlock()
	err := m.apply(img)
	m.syncMu.Lock()
	m.synced = false
	m.syncMu.Unlock()
	m.cleanMu.Lock()
	used := records - len(m.clean)
	m.cleanMu.Unlock()
	m.mu.RLock()
	n := len(m.parts)
	m.mu.RUnlock()
	m.log.Info("partitions opened", "partitions", n, "clean_shutdown_records", used,
		"took", m.clock.Now().Sub(start).Round(time.Millisecond))
	m.reportStrayDirs(img)
	return err
}

// Refresh applies the controller's current image now, so that a handler
// that just created a topic finds its partitions open.
func (m *Manager) Refresh() {
	if err := m.apply(m.ctrl.Image()); err != nil {
		m.log.Error("apply metadata image", "err", err)
	}
}

// partitionDir is where the log of a partition lives.
func (m *Manager) partitionDir(topic string, partition int32) string {
	return filepath.Join(m.cfg.Settings.DataDir, fmt.Sprintf("%s-%d", topic, partition))
}

// apply makes the hosted partitions match img. Errors opening one
// partition are logged and returned joined; the other partitions are
// still applied.
func (m *Manager) apply(img *controller.Image) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if m.closed {
		return nil
	}
	lead := m.MayLead(img)
	if m.applied != nil && img.Version <= m.applied.Version && m.applied.Version != 0 && lead == m.appliedLead {
		return nil
	}
	self := m.cfg.Settings.NodeID
	var errs []error
	// Dynamic broker configs (cluster defaults, then this node's) change the
	// defaults of every topic.
	settings, err := m.cfg.Settings.WithDynamic(img.BrokerConfigs[controller.ClusterDefaultBroker], img.BrokerConfigs[self])
	if err != nil {
		m.log.Warn("dynamic broker config", "err", err)
	}
	m.setThrottleRates(settings)
	want := map[key]bool{}
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
					m.log.Warn("topic config", "topic", name, "err", err)
				}
				resolved = true
			}
			if p.Leader == self && !lead {
				// Not before this node's registration is in the image:
				// followed by nobody, it answers NOT_LEADER_OR_FOLLOWER.
				p.Leader = -1
			}
			tp := key{name, p.ID}
			want[tp] = true
			h := m.lookup(tp)
			if h != nil && h.topicID != t.ID {
				// Deleted and re-created under the same name between two
				// images: the old data belongs to the old topic.
				m.remove(tp, true)
				h = nil
			}
			if h == nil {
				work = append(work, openWork{t: t, p: p, cfg: tcfg})
				continue
			}
			if *h.Config() != tcfg {
				if err := m.reconfigure(h, tcfg); err != nil {
					errs = append(errs, err)
				}
			}
			work = append(work, openWork{t: t, p: p, h: h})
		}
	}
	errs = append(errs, m.openAndBecome(work)...)
	m.mu.RLock()
	var gone []key
	for tp := range m.parts {
		if !want[tp] {
			gone = append(gone, tp)
		}
	}
	m.mu.RUnlock()
	for _, tp := range gone {
		m.remove(tp, true)
	}
	if len(gone) > 0 {
		m.changes.Add(1)
	}
	hostedTopics := map[string]bool{}
	for tp := range want {
		hostedTopics[tp.topic] = true
	}
	m.traffic.retain(hostedTopics)
	m.shared.Store(m.sharedIn(work))
	m.applied, m.appliedLead = img, lead
	m.applies.done(img)
	if lead {
		m.led()
	}
	return errors.Join(errs...)
}

// sharedIn returns the hosted partitions of work, an image applied, that
// this node leads and shares (LeadShared). The image, not the
// replica's state, decides: a replica whose Become failed and that still
// has an older state could only propose under stale epochs, which the
// controller refuses.
func (m *Manager) sharedIn(work []openWork) *[]*Hosted {
	self := m.cfg.Settings.NodeID
	var out []*Hosted
	for _, w := range work {
		p := w.p
		if p.Leader != self || (len(p.Replicas) == 1 && len(p.ISR) == 1 && p.ISR[0] == self) {
			continue
		}
		if h := m.lookup(key{w.t.Name, p.ID}); h != nil {
			out = append(out, h)
		}
	}
	return &out
}

// LeadShared returns the partitions the maintain loop watches: those this
// node leads, in the image applied last, with a replica besides itself
// or without itself in the ISR.
func (m *Manager) LeadShared() []*Hosted {
	if s := m.shared.Load(); s != nil {
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
	h   *Hosted
}

// state is the replica state the image gives w's partition.
func (w openWork) state() replica.PartitionState {
	p := w.p
	return replica.PartitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR}
}

// openWorkers bounds how many partitions are opened (or given a new
// state) at once. Opening a log and becoming its leader are mostly
// fsyncs of small files, which the file system commits together when
// many are waiting: one at a time, the opens would mostly wait for the
// disk.
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
func (m *Manager) openParallelism() int {
	limit := openFilesLimit()
	if limit <= 0 {
		return openWorkers
	}
	spare := limit - int64(m.files.Max())
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
func (m *Manager) openAndBecome(work []openWork) []error {
	var mu sync.Mutex
	var errs []error
	failed := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	become := func(h *Hosted, w openWork) {
		if err := h.Become(w.state()); err != nil && !errors.Is(err, replica.ErrStaleLeaderEpoch) {
			failed(fmt.Errorf("partition %s-%d: %w", w.t.Name, w.p.ID, err))
		}
	}
	// A replica already in the image's state is left alone: an image
	// changes a few partitions at a time (an ISR change each), and giving
	// every hosted replica its state again takes each one's locks
	// exclusively, for every image.
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
		defer m.changes.Add(1)
	}
	par := m.openParallelism()
	forEachBounded(len(known), par, func(i int) { become(known[i].h, known[i]) })
	dirsDurable := m.makeDirs(fresh)
	for len(fresh) > 0 {
		chunk := fresh[:min(len(fresh), batchMax)]
		fresh = fresh[len(chunk):]
		var batch *log.SyncBatch
		if len(chunk) >= batchMin {
			batch = log.NewSyncBatch(m.cfg.FS, m.cfg.Settings.DataDir)
		}
		opened := make([]*Hosted, len(chunk))
		forEachBounded(len(chunk), par, func(i int) {
			h, err := m.open(chunk[i].t, chunk[i].p.ID, chunk[i].cfg, dirsDurable, batch)
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
				m.register(h)
			}
		}
	}
	return errs
}

// makeDirs creates the directories of the new partitions of work that do
// not exist yet, with one fsync of the data directory for them all, and
// reports whether it did (else each Open makes its own durable).
func (m *Manager) makeDirs(work []openWork) bool {
	var names []string
	exists := m.dirExists(len(work))
	for _, w := range work {
		if w.h != nil {
			continue
		}
		if name := filepath.Base(m.partitionDir(w.t.Name, w.p.ID)); !exists(name) {
			names = append(names, name)
		}
	}
	if len(names) < 2 {
		return false
	}
	for _, name := range names {
		m.checkpoints.Forget(name)
	}
	if err := log.MakeDirs(m.cfg.FS, m.cfg.Settings.DataDir, names); err != nil {
		m.log.Warn("create partition directories", "err", err)
		return false
	}
	return true
}

// dirExists returns whether an entry of the data directory exists, for n
// lookups: a stat each when n is small, else one listing of the directory
// (a node opening its 10,000 partitions at start stats none of them).
func (m *Manager) dirExists(n int) func(name string) bool {
	dataDir := m.cfg.Settings.DataDir
	stat := func(name string) bool {
		_, err := m.fs.Stat(filepath.Join(dataDir, name))
		return !errors.Is(err, os.ErrNotExist)
	}
	if n < 64 {
		return stat
	}
	entries, err := m.fs.ReadDir(dataDir)
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
	localMS, localBytes := t.LocalRetention()
	return log.Config{
		SegmentBytes:        t.SegmentBytes,
		SegmentMS:           segmentMS,
		RetentionMS:         retentionMS,
		RetentionBytes:      retentionBytes,
		IndexIntervalBytes:  t.IndexIntervalBytes,
		FlushPolicy:         policy,
		FlushInterval:       time.Duration(t.FlushMS) * time.Millisecond,
		LogAppendTime:       t.MessageTimestampType == "LogAppendTime",
		RemoteStorage:       t.RemoteStorageEnable,
		LocalRetentionMS:    localMS,
		LocalRetentionBytes: localBytes,
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
func (m *Manager) open(t *controller.Topic, partition int32, tcfg config.Topic, dirDurable bool, batch *log.SyncBatch) (*Hosted, error) {
	lcfg, err := logConfig(tcfg)
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", t.Name, partition, err)
	}
	dir := m.partitionDir(t.Name, partition)
	if err := m.setAsideOtherTopics(dir, t.ID.String()); err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, partition, err)
	}
	opts := log.Options{
		Logger:     m.log.With("topic", t.Name, "partition", partition),
		FS:         m.cfg.FS,
		Files:      m.files,
		Clock:      m.clock,
		Counters:   &m.storage,
		DirDurable: dirDurable,
		Synced:     m.synced,
		Batch:      batch,

		Checkpoints: m.checkpoints,
		Owner:       t.ID.String(),
	}
	m.cleanMu.Lock()
	if c, ok := m.clean[filepath.Base(dir)]; ok {
		opts.Clean = &c
		delete(m.clean, filepath.Base(dir))
	}
	m.cleanMu.Unlock()
	l, err := log.Open(dir, lcfg, opts)
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, partition, err)
	}
	p := replica.New(replica.Config{
		Topic:             t.Name,
		Partition:         partition,
		TopicID:           t.ID,
		NodeID:            m.cfg.Settings.NodeID,
		MinInsyncReplicas: tcfg.MinInsyncReplicas,
		ReplicaLagTime:    m.cfg.Settings.ReplicaLagTime,
		Clock:             m.clock,
	}, l)
	if lost := p.LostCommitted(); lost.Lost() {
		m.log.Error("partition lost records it knew as committed: its log ends below its checkpointed high-water mark (a power loss took what was not flushed); it stays out of the ISR until it caught up, and leads only after an unclean election",
			"topic", t.Name, "partition", partition, "log_end_offset", lost.EndOffset, "checkpointed_high_watermark", lost.HighWatermark)
	}
	h := &Hosted{Partition: p, topicID: t.ID, Traffic: m.traffic.of(t.Name)}
	h.cfg.Store(&tcfg)
	m.setThrottled(h, &tcfg)
	return h, nil
}

// setAsideOtherTopics moves a partition directory that the log checkpoints
// say a topic other than topicID wrote (a topic of the same name deleted
// while this node was down, and created again) out of the way, to
// DIR.TOPICID.stale, so that the new topic starts empty rather than serve
// the old one's records. It is kept, not deleted, and logged: a surprise
// is no reason to delete data. A directory without an owner (written by
// an mq before owners were recorded) is taken as the topic's.
func (m *Manager) setAsideOtherTopics(dir, topicID string) error {
	name := filepath.Base(dir)
	owner, ok := m.checkpoints.Owner(name)
	if !ok || owner == topicID {
		return nil
	}
	aside := fmt.Sprintf("%s.%s.stale", dir, owner)
	switch err := vfs.MoveDir(m.cfg.FS, dir, aside); {
	case errors.Is(err, os.ErrNotExist):
		m.checkpoints.Forget(name)
		return nil
	case err != nil:
		return fmt.Errorf("set aside the directory of an earlier topic of the same name: %w", err)
	}
	m.checkpoints.Forget(name)
	m.log.Warn("partition directory belongs to an earlier topic of the same name (deleted while this node was away); moved aside, the partition starts empty here",
		"dir", dir, "moved_to", aside, "earlier_topic_id", owner, "topic_id", topicID)
	return nil
}

// register serves an opened partition.
func (m *Manager) register(h *Hosted) {
	m.mu.Lock()
	m.parts[key{h.Topic(), h.Partition.Partition()}] = h
	m.gen.Add(1)
	m.mu.Unlock()
	l := h.Log()
	m.log.Debug("partition opened", "topic", h.Topic(), "partition", h.Partition.Partition(),
		"log_start_offset", l.StartOffset(), "log_end_offset", l.EndOffset())
	select {
	case m.scrubWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// reconfigure applies a changed topic config to an open partition.
func (m *Manager) reconfigure(h *Hosted, tcfg config.Topic) error {
	lcfg, err := logConfig(tcfg)
	if err != nil {
		return fmt.Errorf("partition %s: %w", h, err)
	}
	h.Log().SetConfig(lcfg)
	h.SetMinInsyncReplicas(tcfg.MinInsyncReplicas)
	h.cfg.Store(&tcfg)
	m.setThrottled(h, &tcfg)
	m.log.Info("partition reconfigured", "partition", h.String())
	return nil
}

// remove unregisters a partition and closes it, deleting its data when
// del is set.
func (m *Manager) remove(tp key, del bool) {
	m.mu.Lock()
	h := m.parts[tp]
	delete(m.parts, tp)
	m.gen.Add(1)
	m.mu.Unlock()
	if h == nil {
		return
	}
	var err error
	if del {
		err = h.Delete()
		m.log.Info("partition deleted", "topic", tp.topic, "partition", tp.partition)
	} else {
		err = h.Close()
	}
	if err != nil {
		m.log.Error("close partition", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
}

// partitionDirName matches TOPIC-PARTITION directory names.
var partitionDirName = regexp.MustCompile(`^([a-zA-Z0-9._-]+)-([0-9]+)$`)

// reportStrayDirs deals with the partition-like directories of the data
// directory that no hosted partition uses. One that the log checkpoints
// say the image's topic of that name wrote, of a partition that no longer
// names this node among its replicas, is a replica moved away while this
// node was down (a completed reassignment): its data is deleted, as it
// would have been had the node been up. Any other is logged and left
// alone: a surprise is no reason to delete someone's data.
func (m *Manager) reportStrayDirs(img *controller.Image) {
	entries, err := m.fs.ReadDir(m.cfg.Settings.DataDir)
	if err != nil {
		m.log.Warn("list data directory", "err", err)
		return
	}
	m.mu.RLock()
	hostedDirs := make(map[string]bool, len(m.parts))
	for tp := range m.parts {
		hostedDirs[fmt.Sprintf("%s-%d", tp.topic, tp.partition)] = true
	}
	m.mu.RUnlock()
	for _, e := range entries {
		match := partitionDirName.FindStringSubmatch(e.Name())
		if !e.IsDir() || match == nil || hostedDirs[e.Name()] {
			continue
		}
		dir := filepath.Join(m.cfg.Settings.DataDir, e.Name())
		if m.movedAway(img, match[1], match[2], e.Name()) {
			if err := m.deleteDir(dir); err != nil {
				m.log.Warn("delete a replica moved away while this node was down", "dir", dir, "err", err)
				continue
			}
			m.checkpoints.Forget(e.Name())
			m.log.Info("deleted a replica moved away while this node was down", "dir", dir, "image_version", img.Version)
			continue
		}
		m.log.Warn("data directory holds a partition this node does not host; leaving it alone",
			"dir", dir, "image_version", img.Version)
	}
}

// movedAway reports whether the directory name of topic's partition
// (its number as text) holds a replica of the image's topic, by the
// owner the log checkpoints record, that the image no longer places on
// this node.
func (m *Manager) movedAway(img *controller.Image, topic, partition, name string) bool {
	t := img.Topics[topic]
	id, err := strconv.ParseInt(partition, 10, 32)
	if t == nil || err != nil || int(id) >= len(t.Partitions) {
		return false
	}
	owner, ok := m.checkpoints.Owner(name)
	return ok && owner == t.ID.String() && !slices.Contains(t.Partitions[id].Replicas, m.cfg.Settings.NodeID)
}

// deleteDir removes dir's files, then dir.
func (m *Manager) deleteDir(dir string) error {
	entries, err := m.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := m.fs.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return m.fs.Remove(dir)
}

// LostCommitted lists the hosted replicas whose log, when opened, ended
// below its checkpointed high-water mark (replica.LostCommitted).
func (m *Manager) LostCommitted() []controller.LostReplica {
	var out []controller.LostReplica
	for _, h := range m.All() {
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

// HostsPartitions reports whether dir of fsys holds partition
// directories: a restarted node's, whose logs may have lost what they
// had.
func HostsPartitions(fsys vfs.FS, dir string) bool {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() && partitionDirName.MatchString(e.Name()) })
}

// lookup returns a hosted partition, or nil.
func (m *Manager) lookup(tp key) *Hosted {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// Lookup returns the hosted partition of a topic, or nil.
func (m *Manager) Lookup(topic string, partition int32) *Hosted {
	return m.lookup(key{topic, partition})
}

// Replica returns the hosted partition of topic t. When the hosted
// replica is behind t (not open though t places it here, as for a topic
// created a moment ago; or in an earlier leader epoch, as on a follower
// just elected leader), it brings the partitions up to the controller's
// image first (catchUp): a client that acted on a newer image, from this
// broker or another, is not sent away to retry.
func (m *Manager) Replica(t *controller.Topic, partition int32) *Hosted {
	h := m.Lookup(t.Name, partition)
	if m.behind(h, t, partition) {
		m.catchUp()
		h = m.Lookup(t.Name, partition)
	}
	if h == nil || h.topicID != t.ID {
		return nil
	}
	return h
}

// Leader returns the hosted partition of topic t if this node leads it,
// else ErrUnknownPartition, ErrNotHosted or replica.ErrNotLeader.
func (m *Manager) Leader(t *controller.Topic, partition int32) (*Hosted, error) {
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, ErrUnknownPartition
	}
	h := m.Replica(t, partition)
	if h == nil {
		return nil, ErrNotHosted
	}
	if !h.IsLeader() {
		return nil, replica.ErrNotLeader
	}
	return h, nil
}

// StateChanges counts the applies that changed a hosted replica's state
// or the set hosted, since the Manager opened.
func (m *Manager) StateChanges() uint64 { return m.changes.Load() }

// Applied returns the version of the last image applied to the hosted
// partitions (0 before the first).
func (m *Manager) Applied() uint64 {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if m.applied == nil {
		return 0
	}
	return m.applied.Version
}

// Gen counts the changes to the set of hosted partitions: a lookup made
// at one Gen (and image) stands while Gen is the same, which fetch
// sessions use to keep theirs.
func (m *Manager) Gen() uint64 { return m.gen.Load() }

// All returns every hosted partition.
func (m *Manager) All() []*Hosted {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Hosted, 0, len(m.parts))
	for _, h := range m.parts {
		out = append(out, h)
	}
	return out
}

// closeAll checkpoints the high-water mark of every partition and closes
// it, in parallel; many share one log.SyncBatch, committed before the log
// checkpoints (which then hold every log's recovery point at its end) and
// the record are written. With record set, the logs that closed cleanly are written to
// the clean-shutdown file for the next start.
func (m *Manager) closeAll(record bool) error {
	m.mu.Lock()
	parts := m.parts
	m.parts = map[key]*Hosted{}
	m.gen.Add(1)
	m.mu.Unlock()
	all := slices.Collect(maps.Keys(parts))
	errs := make([]error, len(all))
	var batch *log.SyncBatch
	if len(all) >= batchMin {
		batch = log.NewSyncBatch(m.cfg.FS, m.cfg.Settings.DataDir)
	}
	// Closing is fsyncs too (see openWorkers).
	forEachBounded(len(all), m.openParallelism(), func(i int) {
		tp := all[i]
		h := parts[tp]
		batch.Add(h.Log())
		if err := h.Log().CheckpointHighWatermark(h.HighWatermarkToCheckpoint()); err != nil && !errors.Is(err, log.ErrClosed) {
			m.log.Warn("checkpoint high-water mark", "partition", h.String(), "err", err)
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
	if err := m.checkpoints.Write(); err != nil {
		errs = append(errs, fmt.Errorf("write the log checkpoints: %w", err))
	}
	if record && len(all) > 0 {
		clean := make(map[string]log.CleanShutdown, len(all))
		for _, tp := range all {
			if c, ok := parts[tp].Log().CleanShutdown(); ok {
				clean[filepath.Base(m.partitionDir(tp.topic, tp.partition))] = c
			}
		}
		if err := log.WriteCleanShutdownFile(m.cfg.FS, filepath.Join(m.cfg.Settings.DataDir, CleanShutdownFile), clean); err != nil {
			errs = append(errs, fmt.Errorf("record the clean shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// EnforceRetention applies retention (retention.ms, retention.bytes) to
// every hosted partition. The retention task (StartLogTasks) calls it
// every log.retention.check.interval.ms.
func (m *Manager) EnforceRetention() {
	for _, h := range m.All() {
		n, err := h.Log().EnforceRetention()
		if err != nil {
			if !errors.Is(err, log.ErrClosed) {
				m.log.Error("retention", "partition", h.String(), "err", err)
			}
			continue
		}
		if n > 0 {
			m.log.Info("retention deleted segments", "partition", h.String(), "segments", n,
				"log_start_offset", h.Log().StartOffset())
		}
	}
}
