package broker

import (
	"context"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/version"
	"github.com/mqproject/mq/lib/vfs"
)

// Config is what a Broker needs from its surroundings.
type Config struct {
	Settings   config.Broker          // mqd settings (data dir, node id, defaults for topics…)
	Controller *controller.Controller // the cluster metadata quorum this node belongs to
	Logger     *slog.Logger           // nil = silent
	Clock      clock.Clock            // drives the logs, replicas, fetch waits; nil = real time
	// LogFS is the file system of the partition logs; nil is the real
	// one. Tests pass a faultfs.FS to fail writes.
	LogFS vfs.FS
	// AwaitRegistration keeps the node from leading any partition until
	// its own registration is in the image (see Broker.mayLead): the
	// Daemon sets it, and tells the Broker its broker epoch once it has
	// registered. Without it the node leads where the image says at once.
	AwaitRegistration bool
}

// handlerFunc answers one request. It runs on the connection's reader
// goroutine (see server.Handler); anything that may block goes in the
// returned Reply.
type handlerFunc func(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply

// api is one supported request type: its handler and version range.
type api struct {
	min, max int16
	handle   handlerFunc
}

// Broker answers the Kafka APIs for one node. It implements server.Handler.
type Broker struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	ctrl   *controller.Controller
	apis   map[int16]api
	data   *dataPlane        // partitions, produce, fetch, offsets (data.go)
	groups *groupCoordinator // consumer groups and committed offsets (groups*.go)
	// shareCoord holds the share groups this node coordinates (share.go),
	// shares the share-partitions this node leads (share_fetch.go).
	shareCoord *shareCoordinator
	shares     *sharePartitions
	// fetchers replicate the partitions this node follows (fetcher.go).
	fetchers *replicaFetchers
	// sessions are the fetch sessions of followers and consumers with
	// this broker (fetchsession.go).
	sessions *fetchSessions

	// isr counts the ISR changes this node made as leader, and lagTimes
	// caches the record timestamps of group lag (metrics.go).
	isr      isrCounters
	lagTimes lagTimeCache

	// scrubWake wakes an idle scrubber: a partition was opened, with
	// bytes no one has checked since mqd started (scrub.go).
	scrubWake chan struct{}

	// opened is closed when the follow loop has opened the partitions of
	// the first image, openErr (written before) what that failed to open.
	opened  chan struct{}
	openErr error

	// regEpoch is the broker epoch of this process's first registration
	// (0 until the Daemon registered, see registered); regWake wakes the
	// follow loop to apply the image again once it is set, and leading is
	// closed (leadingOnce) once an image was applied that lets this node
	// lead.
	regEpoch    atomic.Int64
	regWake     chan struct{}
	leading     chan struct{}
	leadingOnce sync.Once

	stop       chan struct{} // closed by Close: the follow and maintain loops end
	done       chan struct{} // closed when the follow loop has ended
	maintained chan struct{} // closed when the maintain loop has ended (isr.go)
	closeOnce  sync.Once
}

// New builds a Broker on an open controller. It opens the logs of every
// partition this node hosts under cfg.Settings.DataDir and returns once
// they are open.
func New(cfg Config) (*Broker, error) {
	b, err := NewOpening(cfg)
	if err != nil {
		return nil, err
	}
	<-b.opened
	if b.openErr != nil {
		b.Close()
		return nil, b.openErr
	}
	return b, nil
}

// NewOpening is New returning at once, while the partitions open: a
// request for one not open yet gets the retriable error of a partition
// not hosted here yet (NOT_LEADER_OR_FOLLOWER; Metadata says
// LEADER_NOT_AVAILABLE). Opened waits for them.
func NewOpening(cfg Config) (*Broker, error) {
	b := &Broker{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, ctrl: cfg.Controller,
		sessions: newFetchSessions(), scrubWake: make(chan struct{}, 1), shareCoord: newShareCoordinator(),
		opened: make(chan struct{}), regWake: make(chan struct{}, 1), leading: make(chan struct{})}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.clock == nil {
		b.clock = clock.Real()
	}
	b.apis = make(map[int16]api)
	for k, a := range b.dataAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.adminAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.groupAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.shareAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.extensionAPIs() {
		b.apis[k] = a
	}
	// Changes from here on are applied by follow, after the image the
	// parts are built from.
	changes := b.ctrl.Changes()
	d, err := newDataPlane(b)
	if err != nil {
		return nil, err
	}
	b.data = d
	b.groups = newGroupCoordinator(b)
	b.shares = newSharePartitions(b)
	b.fetchers = newReplicaFetchers(b)
	b.stop, b.done, b.maintained = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go b.follow(changes)
	go b.maintain()
	return b, nil
}

// Opened waits until the partitions of the image the Broker was built
// on are open and returns what failed to open, or ctx's error.
func (b *Broker) Opened(ctx context.Context) error {
	select {
	case <-b.opened:
		return b.openErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// follow is the one loop that applies the controller's images to this
// node, in order: first the partitions (opened, led, reconfigured,
// deleted), then the replica fetchers (which leader each followed
// partition is fetched from), then the group coordinator's ownership of
// the partitions of __consumer_offsets, which needs them open. It runs
// until Close.
func (b *Broker) follow(changes <-chan struct{}) {
	defer close(b.done)
	img := b.ctrl.Image()
	b.openErr = b.data.openFirst(img)
	close(b.opened)
	synced, syncedChanges := img, b.data.changes.Load()
	b.fetchers.sync(img)
	b.groups.syncOwnership()
	for {
		select {
		case <-changes:
		case <-b.regWake: // the same image may now let this node lead
		case <-b.stop:
			return
		}
		changes = b.ctrl.Changes()
		img := b.ctrl.Image()
		if err := b.data.apply(img); err != nil {
			b.log.Error("apply metadata image", "err", err)
		}
		// The fetchers follow the replicas' states and the leaders'
		// addresses: an image changing neither (another node's ISR, a
		// group's config) leaves them as they are.
		if n := b.data.changes.Load(); n != syncedChanges || brokersMoved(synced, img) {
			synced, syncedChanges = img, n
			b.fetchers.sync(img)
		}
		b.groups.syncOwnership()
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

// mayLead reports whether this node may lead the partitions img names it
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
func (b *Broker) mayLead(img *controller.Image) bool {
	if !b.cfg.AwaitRegistration {
		return true
	}
	epoch := b.regEpoch.Load()
	if epoch <= 0 {
		return false
	}
	br, ok := img.Brokers[b.cfg.Settings.NodeID]
	return ok && br.Epoch >= epoch
}

// registered tells the Broker the broker epoch of this process's
// registration: the follow loop applies the image again, leading where
// it names this node once the image holds it. Only the first call counts
// (later registrations of the same process lost nothing).
func (b *Broker) registered(epoch int64) {
	if epoch <= 0 || !b.regEpoch.CompareAndSwap(0, epoch) {
		return
	}
	select {
	case b.regWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// led records that an image was applied under which this node leads
// where it names it (mayLead).
func (b *Broker) led() {
	b.leadingOnce.Do(func() { close(b.leading) })
}

// awaitLeading waits until an image that lets this node lead has been
// applied (mayLead), or ctx ends.
func (b *Broker) awaitLeading(ctx context.Context) error {
	select {
	case <-b.leading:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Handle implements server.Handler.
func (b *Broker) Handle(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	a, ok := b.apis[req.Key]
	if !ok || req.Version < a.min || req.Version > a.max {
		// The server only passes the keys and versions ApiVersions lists.
		return func() server.Response { return server.Response{CloseAfter: true} }
	}
	return a.handle(ctx, c, req)
}

// ApiVersions implements server.Handler.
func (b *Broker) ApiVersions() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(b.apis))
	for k, a := range b.apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// ApiVersionsTags implements server.ApiVersionsTagger: mq's name and
// release (kafkaext.ApiVersions), so that mqctl cluster describe can say
// which mq each broker runs.
func (b *Broker) ApiVersionsTags() kmsg.Tags {
	var t kmsg.Tags
	if err := kafkaext.Set(&t, kafkaext.ApiVersions, kafkaext.Software{Name: "mq", Version: version.String()}); err != nil {
		b.log.Warn("ApiVersions responses will not name mq's version", "err", err)
	}
	return t
}

// Close stops following the controller, stops the replica fetchers and the
// group coordinator, then checkpoints the high-water marks and flushes and
// closes every partition log. Closing twice returns nil.
func (b *Broker) Close() error {
	closed := false
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.done
		<-b.maintained
		closed = true
	})
	if !closed {
		return nil
	}
	b.fetchers.close()
	b.groups.close()
	b.shares.store.peers.Close()
	return b.data.close() // high-water marks checkpointed first
}

// reply wraps a ready response.
func reply(m kmsg.Response) server.Reply {
	return func() server.Response { return server.Response{Msg: m} }
}
