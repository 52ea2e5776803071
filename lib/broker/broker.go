package broker

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/kafkaext"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/server"
	"github.com/mqproject/mq/lib/txn"
	"github.com/mqproject/mq/lib/version"
)

// Config is what a Broker needs from its surroundings: the node's parts
// it maps the Kafka APIs onto. The Broker owns none of them; whoever
// built them (lib/node) closes them after the Broker served its last
// request.
type Config struct {
	Settings   config.Broker          // mqd settings (node id, defaults for topics…)
	Controller *controller.Controller // the cluster metadata quorum this node belongs to
	Partitions *partition.Manager     // the partitions this node hosts
	// Peers are the connections to other brokers, for share requests
	// forwarded there.
	Peers *peer.Pool
	// Coordinators are the group, transaction and share coordinators
	// this node runs on their internal topics.
	Coordinators *coordinator.Set
	// Authorizer decides what a principal may do, with the ACLs of the
	// image at hand.
	Authorizer *auth.Authorizer
	// ProducerIDs hands out the producer IDs of InitProducerId; the node
	// runs its prefetch.
	ProducerIDs *controller.ProducerIDs
	Logger      *slog.Logger // nil = silent
	Clock       clock.Clock  // drives fetch waits; nil = real time

	// VerifyTransactions makes a partition leader ask the transaction
	// coordinator (AddPartitionsToTxn v4) before it appends the first
	// batch of a producer's transaction (KIP-890; Kafka's
	// transaction.partition.verification.enable). TxnVerifier, when set,
	// is asked instead (tests).
	VerifyTransactions bool
	TxnVerifier        TxnVerifier
	// TxnPeers sends a partition leader's questions to another node's
	// transaction coordinator; nil: Coordinators.TxnPeers.
	TxnPeers txn.Peers
	// GroupTxnCompleted is called once a transaction marker written by
	// WriteTxnMarkers to a __consumer_offsets partition reached its
	// high-water mark; nil: the group coordinator's CompleteTransaction.
	GroupTxnCompleted GroupTxnCompleted
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
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
	cfg   Config
	log   *slog.Logger
	clock clock.Clock
	ctrl  *controller.Controller
	parts *partition.Manager
	apis  map[int16]api
	peers *peer.Pool
	// coords are Config.Coordinators; groups and txns their group and
	// transaction coordinators (groups*.go, txn*.go), shareGroups the
	// share groups this node coordinates (share.go), shares the
	// share-partitions this node leads (share_fetch.go).
	coords      *coordinator.Set
	groups      *groupCoordinator
	txns        *txnCoordinator
	shareGroups *queue.Groups
	shares      *queue.Leader
	// sessions are the fetch sessions of followers and consumers with
	// this broker (fetchsession.go).
	sessions    *fetchSessions
	producerIDs *controller.ProducerIDs
	authz       *auth.Authorizer // authorize.go
	// txnVerifier asks the transaction coordinators about transactional
	// produces (txn_verify.go); nil: nobody is asked. groupTxnCompleted
	// is Config.GroupTxnCompleted.
	txnVerifier       TxnVerifier
	groupTxnCompleted GroupTxnCompleted
	txnPeers          txn.Peers // Config.TxnPeers, or the coordinators'
}

// New builds a Broker on the parts of cfg.
func New(cfg Config) *Broker {
	co := cfg.Coordinators
	b := &Broker{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, ctrl: cfg.Controller, parts: cfg.Partitions,
		peers: cfg.Peers, coords: co, sessions: newFetchSessions(), authz: cfg.Authorizer, producerIDs: cfg.ProducerIDs,
		groups: &groupCoordinator{c: co.Groups, offsets: co.Offsets}, txns: &txnCoordinator{c: co.Txns, state: co.TxnState},
		shareGroups: co.ShareGroups, shares: co.Shares}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.clock == nil {
		b.clock = clock.Real()
	}
	b.txnPeers = cfg.TxnPeers
	if b.txnPeers == nil {
		b.txnPeers = co.TxnPeers
	}
	b.txnVerifier, b.groupTxnCompleted = cfg.TxnVerifier, cfg.GroupTxnCompleted
	if b.txnVerifier == nil && cfg.VerifyTransactions {
		b.txnVerifier = coordinatorVerifier{b}
	}
	if b.groupTxnCompleted == nil {
		b.groupTxnCompleted = co.Groups.CompleteTransaction
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
	for k, a := range b.txnAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.aclAPIs() {
		b.apis[k] = a
	}
	for k, a := range b.extensionAPIs() {
		b.apis[k] = a
	}
	return b
}

// Handle implements server.Handler.
func (b *Broker) Handle(ctx context.Context, c *server.ConnInfo, req *server.Request) server.Reply {
	a, ok := b.apis[req.Key]
	if !ok || req.Version < a.min || req.Version > a.max {
		// The server only passes the keys and versions ApiVersions lists.
		return func() server.Response { return server.Response{CloseAfter: true} }
	}
	if code := b.authorize(c, b.ctrl.Image(), req); code != 0 {
		return reply(denied(req, code))
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

// ApiVersionsFeatures implements server.ApiVersionsFeaturer: the
// transaction.version feature (KIP-1022), finalized at the level of the
// setting (txn.go, transactionVersion).
func (b *Broker) ApiVersionsFeatures() server.Features {
	level := b.transactionVersion()
	return server.Features{
		Supported: []kmsg.ApiVersionsResponseSupportedFeature{
			{Name: transactionVersionFeature, MinVersion: 0, MaxVersion: maxTransactionVersion},
		},
		Finalized: []kmsg.ApiVersionsResponseFinalizedFeature{
			{Name: transactionVersionFeature, MinVersionLevel: level, MaxVersionLevel: level},
		},
		FinalizedEpoch: 0,
	}
}

// reply wraps a ready response.
func reply(m kmsg.Response) server.Reply {
	return func() server.Response { return server.Response{Msg: m} }
}

// dataAPIs lists the data-plane APIs and the versions implemented.
func (b *Broker) dataAPIs() map[int16]api {
	return map[int16]api{
		kmsg.Produce.Int16():        {min: 3, max: b.txnVersionMax(11, 12), handle: b.handleProduce},
		kmsg.Fetch.Int16():          {min: 4, max: 18, handle: b.handleFetch},
		kmsg.ListOffsets.Int16():    {min: 1, max: 8, handle: b.handleListOffsets},
		kmsg.Metadata.Int16():       {min: 0, max: 13, handle: b.handleMetadata},
		kmsg.DeleteRecords.Int16():  {min: 0, max: 2, handle: b.handleDeleteRecords},
		kmsg.InitProducerID.Int16(): {min: 0, max: 4, handle: b.handleInitProducerID},

		kmsg.WriteTxnMarkers.Int16():   {min: 0, max: 2, handle: b.handleWriteTxnMarkers},   // txn_leader.go
		kmsg.DescribeProducers.Int16(): {min: 0, max: 0, handle: b.handleDescribeProducers}, // txn_leader.go

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
