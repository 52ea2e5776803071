package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/clock"
)

const (
	// defaultBrokerSessionTimeout is broker.session.timeout.ms's default.
	defaultBrokerSessionTimeout = 9 * time.Second
	// defaultBrokerHeartbeatInterval is broker.heartbeat.interval.ms's default.
	defaultBrokerHeartbeatInterval = 2 * time.Second
	// defaultLeaderImbalanceCheckInterval is
	// leader.imbalance.check.interval.seconds' default.
	defaultLeaderImbalanceCheckInterval = 300 * time.Second
	// retryBackoff is the pause before a command is sent again while
	// there is no leader, or before the next poll of a background loop.
	retryBackoff = 50 * time.Millisecond
	// defaultStartTimeout bounds how long Open waits for a single voter to
	// elect itself and apply its election record.
	defaultStartTimeout = 10 * time.Second
	// defaultCommandTimeout bounds a command whose context has no deadline.
	defaultCommandTimeout = 10 * time.Second
	// retainSnapshots is how many snapshots stay in Dir/snapshots.
	retainSnapshots = 2
	raftDBName      = "raft.db"
)

// Config configures Open.
type Config struct {
	// NodeID is this node's ID (Kafka's node.id), >= 0.
	NodeID int32
	// Dir holds the Raft state: raft.db (log and stable store, bbolt) and
	// snapshots/. Created when missing. Typically DATA_DIR/__controller.
	Dir string
	// Voters is the Raft voter set (Kafka's controller.quorum.voters, see
	// ParseVoters). Empty means a single voter: this node, on an in-memory
	// transport. Otherwise the nodes talk over TCP, and a node not in
	// Voters is a non-voter: it holds the image and serves commands by
	// forwarding them, but does not vote.
	Voters []Voter
	// RaftAddr is the address the other nodes dial for this node's Raft
	// transport. A voter's is its Voters entry (RaftAddr may be left empty
	// or must be equal); a non-voter must set it. Unused with a single
	// voter.
	RaftAddr string
	// RaftBind is the listen address of the Raft transport; empty means
	// RaftAddr (or this voter's Voters entry).
	RaftBind string
	// Logger receives the controller's and Raft's logs; nil is silent.
	Logger *slog.Logger
	// Clock drives the controller's own time: broker heartbeat times and
	// session expiry, the active controller's periodic checks (fencing,
	// unclean elections, the leader-imbalance check), retry backoffs, and
	// Open's wait for its election. nil is clock.Real(). Raft's own
	// timers, what moves with them (CatchUp's poll), and the deadlines of
	// network I/O stay on wall time (see doc.go). Apply never reads it:
	// commands carry every value they need.
	Clock clock.Clock
	// StartTimeout bounds how long Open waits, on Clock, for a single
	// voter to become the active controller; zero means 10s.
	StartTimeout time.Duration
	// BrokerSessionTimeout is broker.session.timeout.ms: the active
	// controller fences a broker that has not heartbeated for this long.
	// Zero means 9s.
	BrokerSessionTimeout time.Duration
	// UncleanLeaderElection is the static unclean.leader.election.enable
	// of this node, used (carried in the command) when neither the topic
	// nor the cluster-wide dynamic config sets it.
	UncleanLeaderElection bool
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms, how often
	// brokers heartbeat; zero means 2s. Before an unclean election the
	// active controller waits up to two intervals for a live replica to
	// report its log.
	BrokerHeartbeatInterval time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable (Kafka's default
	// is true; the zero Config has it off): the active controller
	// periodically moves leadership back to preferred replicas that are
	// alive and in sync.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds;
	// zero means 300s.
	LeaderImbalanceCheckInterval time.Duration
	// NoProcessProbes turns off fencing a broker whose process is seen to
	// be gone (process_gone, see doc.go): brokers are then fenced only
	// when their session times out (broker.process.probe.enable=false).
	NoProcessProbes bool
	// TLS, when set, makes the Raft port mutual TLS (controller.ssl.*
	// settings): every connection, Raft's and the RPCs', both ways,
	// presents this node's certificate and must present one of the
	// cluster CA, and the RPCs are checked against the node IDs the
	// certificates are bound to (see doc.go). Nil: plain TCP. Unused with
	// a single voter.
	TLS *TLS

	// raftTimeout, when set, replaces Raft's heartbeat and election
	// timeouts (tests make failover quick with it).
	raftTimeout time.Duration
	// raftMaxMessage and raftIdle, when set, replace raftMaxMessage and
	// raftIdleTimeout for the Raft connections this node serves (tests
	// reach the bounds with them).
	raftMaxMessage int64
	raftIdle       time.Duration
	// raftTrailingLogs, when set, is how many entries a snapshot leaves
	// in the log (tests make a lagging node need a snapshot with it).
	raftTrailingLogs uint64
	// probed, when set, is called after each probe of a broker's process
	// (fenceIfGone) with whether the dial was refused.
	probed func(broker int32, gone bool)
}

// Controller runs this node's member of the controller quorum and holds
// the cluster image. All methods are safe for concurrent use.
type Controller struct {
	cfg       Config
	logger    *slog.Logger
	fsm       *fsm
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport raft.Transport
	mux       *mux // nil with a single voter
	// rpcPool holds idle connections of this node's RPCs to others
	// (call), closed by Close.
	rpcPool rpcPool
	// rpcRefusals rate-limits the log lines of refused RPCs.
	rpcRefusals logLimiter
	// raftStarted is closed once raft is set: the RPC listener starts
	// first (Raft's transport runs on it), so a peer's request can come
	// before there is a Raft to serve it.
	raftStarted chan struct{}
	// self is this node as a Raft server; voter reports whether it votes.
	self  Voter
	voter bool
	// voterList is Voters as ID@addr strings, sorted by ID: what every RPC
	// carries for the voter-set check.
	voterList []string

	// bootstrapped records whether Open wrote the initial configuration.
	bootstrapped bool
	// elected is closed once this node, as leader, has applied its own
	// election record: its image then reflects every earlier command.
	elected     chan struct{}
	electedOnce sync.Once

	live *liveness
	// superviseMu is held while one of the active controller's periodic
	// checks runs (see every), so that they never overlap; it guards
	// supervisors and superviseStopped.
	superviseMu      sync.Mutex
	supervisors      []clock.Timer
	superviseStopped bool
	// active is set while this node is the leader and has applied its
	// election record (see isActive); leading from when this node became
	// the leader, its sessions started, until it is not any more.
	active  atomic.Bool
	leading atomic.Bool
	// fencings counts the brokers fenced by this node, by reason.
	fencings fencings

	fatal     chan error
	fatalOnce sync.Once

	// closing is canceled by Close; it ends RPCs being served and waits.
	closing   context.Context
	stopAll   context.CancelFunc
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts this node's Raft member in cfg.Dir, bootstrapping a new
// cluster when the directory holds no Raft state and this node is a
// voter, and recovers the image from the latest snapshot and the log.
// When this node is the only voter it waits (bounded by cfg.StartTimeout)
// until it is the active controller and its image holds every committed
// command. A non-voter returns at once and joins the quorum in the
// background. Open fails with ErrVotersMismatch when the stored Raft
// configuration has other voters than cfg.Voters.
func Open(cfg Config) (*Controller, error) {
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("controller: node id %d is negative", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return nil, errors.New("controller: no directory")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.BrokerHeartbeatInterval <= 0 {
		cfg.BrokerHeartbeatInterval = defaultBrokerHeartbeatInterval
	}
	if cfg.BrokerSessionTimeout <= 0 {
		cfg.BrokerSessionTimeout = defaultBrokerSessionTimeout
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = defaultLeaderImbalanceCheckInterval
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	single := len(cfg.Voters) == 0
	self := Voter{ID: cfg.NodeID, Addr: "controller-" + strconv.Itoa(int(cfg.NodeID))}
	voter := true
	if !single {
		i := slices.IndexFunc(cfg.Voters, func(v Voter) bool { return v.ID == cfg.NodeID })
		switch {
		case i >= 0:
			self = cfg.Voters[i]
			if cfg.RaftAddr != "" && cfg.RaftAddr != self.Addr {
				return nil, fmt.Errorf("controller: node %d is voter %s but its raft address is %s", cfg.NodeID, self, cfg.RaftAddr)
			}
		case cfg.RaftAddr == "":
			return nil, fmt.Errorf("controller: node %d is not a voter (%s) and has no raft address of its own", cfg.NodeID, votersString(cfg.Voters))
		default:
			self = Voter{ID: cfg.NodeID, Addr: cfg.RaftAddr}
			voter = false
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}

	c := &Controller{
		cfg:       cfg,
		logger:    logger,
		fsm:       newFSM(logger),
		self:      self,
		voter:     voter,
		voterList: voterStrings(cfg.Voters),
		elected:   make(chan struct{}),
		live:      newLiveness(),
		fatal:     make(chan error, 1),
		done:      make(chan struct{}),
	}
	c.closing, c.stopAll = context.WithCancel(context.Background())
	c.raftStarted = make(chan struct{})
	hlog := newHCLogger(logger)
	ok := false
	defer func() {
		if !ok {
			if err := c.Close(); err != nil {
				logger.Warn("controller: cleaning up after failed open", "err", err)
			}
		}
	}()

	var err error
	c.store, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, raftDBName)})
	if err != nil {
		return nil, fmt.Errorf("controller: open raft store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, retainSnapshots, hlog.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("controller: open snapshot store: %w", err)
	}
	if single {
		_, c.transport = raft.NewInmemTransport(raft.ServerAddress(self.Addr))
	} else {
		bind := cfg.RaftBind
		if bind == "" {
			bind = self.Addr
		}
		c.mux, err = listenMux(bind, self.Addr, c.voterList, c.serveRPC, cfg.TLS, func() string { return c.Image().ClusterID }, cfg.Clock, logger, raftLimits{cfg.raftMaxMessage, cfg.raftIdle})
		if err != nil {
			return nil, err
		}
		c.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  c.mux,
			MaxPool: 3,
			// One AppendEntries at a time, no pipelining: hashicorp/raft's
			// pipelined replication can deadlock when a follower's answer
			// (a newer term, a refusal) ends its decoder while a send
			// waits for room, and then the leader neither replicates to
			// that follower nor shuts down (seen in e2e's network chaos
			// rows: SIGTERM hung in raft's shutdown, replicate blocked in
			// netPipeline.AppendEntries). The controller's log is small.
			MaxRPCsInFlight: 1,
			// An I/O deadline of Raft's connections: wall time.
			Timeout: 10 * time.Second,
			Logger:  hlog.Named("transport"),
		})
	}

	rc := raftConfig(cfg, single, hlog)
	exists, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: inspect raft state: %w", err)
	}
	if !exists && voter {
		voters := cfg.Voters
		if single {
			voters = []Voter{self}
		}
		var servers []raft.Server
		for _, v := range voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Addr)})
		}
		if err := raft.BootstrapCluster(rc, c.store, c.store, snaps, c.transport, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
		c.bootstrapped = true
		logger.Debug("controller: bootstrapped new cluster metadata", "dir", cfg.Dir, "voters", voters)
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, snaps, c.transport)
	if err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	close(c.raftStarted)
	if exists && !single {
		if err := c.checkStoredVoters(); err != nil {
			return nil, err
		}
	}
	c.wg.Add(1)
	go c.watchLeadership()
	c.superviseBrokers()
	if !single {
		c.wg.Add(1)
		if voter {
			go c.greetVoters()
		} else {
			go c.joinQuorum()
		}
	}

	if single || (voter && len(cfg.Voters) == 1) {
		// Only this node can win, so wait for it to.
		timer := cfg.Clock.NewTimer(cfg.StartTimeout)
		defer timer.Stop()
		select {
		case <-c.elected:
		case <-timer.C():
			return nil, fmt.Errorf("controller: node %d did not become the controller within %v", cfg.NodeID, cfg.StartTimeout)
		}
	}
	ok = true
	img := c.Image()
	logger.Debug("controller: started", "node", cfg.NodeID, "voter", voter, "cluster", img.ClusterID, "version", img.Version, "topics", len(img.Topics))
	return c, nil
}

// checkStoredVoters compares the voters of the Raft configuration this
// node recovered with cfg.Voters.
func (c *Controller) checkStoredVoters() error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("controller: read raft configuration: %w", err)
	}
	var stored []Voter
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			return fmt.Errorf("%w: stored voter id %q", ErrVotersMismatch, s.ID)
		}
		stored = append(stored, Voter{ID: int32(id), Addr: string(s.Address)})
	}
	if len(stored) == 0 {
		// A non-voter that never joined has no configuration yet.
		return nil
	}
	if !slices.Equal(voterStrings(stored), c.voterList) {
		return fmt.Errorf("%w: --voters %s, but %s holds a quorum of voters %s", ErrVotersMismatch, votersString(c.cfg.Voters), c.cfg.Dir, votersString(stored))
	}
	return nil
}

// voterStrings returns voters as ID@addr, sorted by ID.
func voterStrings(voters []Voter) []string {
	sorted := slices.Clone(voters)
	slices.SortFunc(sorted, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	out := make([]string, len(sorted))
	for i, v := range sorted {
		out[i] = v.String()
	}
	return out
}

func votersString(voters []Voter) string { return strings.Join(voterStrings(voters), ",") }

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func raftConfig(cfg Config, single bool, hlog *hclogAdapter) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	// With commands of at most maxCommand bytes, no AppendEntries is over
	// raftMaxMessage, the most a served Raft connection may send at once.
	rc.MaxAppendEntries = raftMaxAppendEntries
	if cfg.raftTrailingLogs > 0 {
		rc.TrailingLogs = cfg.raftTrailingLogs
	}
	rc.Logger = hlog
	// These timeouts drive hashicorp/raft's own timers, which run on wall
	// time whatever cfg.Clock is.
	switch {
	case single:
		// Nobody else can win an election: start the first one soon.
		// Raft waits one to two heartbeat timeouts before it does, which
		// is most of a single node's start (at 100 ms it was 0.2 s of a
		// restart of 10,000 partitions taking 1.1 s). With no follower
		// there are no heartbeats to miss, nor a lease to lose.
		rc.HeartbeatTimeout = 20 * time.Millisecond
		rc.ElectionTimeout = 20 * time.Millisecond
		rc.LeaderLeaseTimeout = 20 * time.Millisecond
	case cfg.raftTimeout > 0:
		rc.HeartbeatTimeout = cfg.raftTimeout
		rc.ElectionTimeout = cfg.raftTimeout
		rc.LeaderLeaseTimeout = cfg.raftTimeout
	default:
		rc.HeartbeatTimeout = raftHeartbeatTimeout
		rc.ElectionTimeout = raftElectionTimeout
		rc.LeaderLeaseTimeout = raftLeaderLeaseTimeout
	}
	return rc
}

// The Raft timeouts of a quorum of several voters, sized for a LAN
// (hashicorp/raft's defaults are twice as long: 1s, 1s and 500ms).
// Losing the active controller stalls every change of the image, the
// fencing of its own broker and the leader elections of its partitions
// included, until a new one is elected: a follower that hears nothing
// for one to two HeartbeatTimeouts (random) starts an election, which a
// candidate retries after one to two ElectionTimeouts. The leader sends
// heartbeats every tenth of HeartbeatTimeout (50-100ms here), so a
// follower misses five to ten in a row before it stands, which a
// healthy LAN or a short pause of the leader's process does not cause. Pre-vote (on by
// default in hashicorp/raft, and supported by its NetworkTransport) keeps
// a node that was cut off from deposing a healthy leader when it comes
// back. The leader steps down after LeaderLeaseTimeout without hearing
// from a quorum. The lease equals the heartbeat timeout: a follower
// stands no sooner than one heartbeat timeout after the last heartbeat it
// heard, so a leader cut off from the others steps down about when the
// first of them may stand, before another can be elected (and what it
// proposes meanwhile cannot commit without a quorum anyway). A shorter
// lease buys nothing more and costs leaders on a busy machine, where a
// quorum's replies can come a few hundred milliseconds apart: each
// step-down elects a new controller, which starts every broker's session
// afresh, so a frozen broker is not fenced while the controller moves.
const (
	raftHeartbeatTimeout   = 500 * time.Millisecond
	raftElectionTimeout    = 500 * time.Millisecond
	raftLeaderLeaseTimeout = 500 * time.Millisecond
)

// Fatal returns a channel that receives one error when this node finds,
// after Open, a configuration conflict it cannot run with: a peer whose
// voter set differs (ErrVotersMismatch). mqd exits on it.
func (c *Controller) Fatal() <-chan error { return c.fatal }

func (c *Controller) fail(err error) {
	c.fatalOnce.Do(func() {
		c.logger.Error("controller: configuration conflict", "err", err)
		c.fatal <- err
	})
}

// greetVoters says hello to every other voter until each has answered
// once, so that a voter started with other --voters is found even before
// it forwards a command.
func (c *Controller) greetVoters() {
	defer c.wg.Done()
	pending := map[int32]string{}
	for _, v := range c.cfg.Voters {
		if v.ID != c.cfg.NodeID {
			pending[v.ID] = v.Addr
		}
	}
	for len(pending) > 0 {
		for id, address := range pending {
			// A deadline of the RPC's connection: wall time.
			ctx, cancel := context.WithTimeout(c.closing, 2*time.Second)
			err := c.call(ctx, address, opHello, nil, nil)
			cancel()
			switch {
			case err == nil:
				delete(pending, id)
			case errors.Is(err, ErrVotersMismatch):
				return
			}
		}
		if !c.pause(c.closing, retryBackoff*10) {
			return
		}
	}
}

// joinQuorum asks the voters, in turn, to add this non-voter to the Raft
// configuration until it is in it at its current address.
func (c *Controller) joinQuorum() {
	defer c.wg.Done()
	for i := 0; ; i++ {
		if c.inConfiguration() {
			c.logger.Debug("controller: joined the quorum as a non-voter", "node", c.cfg.NodeID)
			return
		}
		v := c.cfg.Voters[i%len(c.cfg.Voters)]
		// A deadline of the RPC's connection: wall time.
		ctx, cancel := context.WithTimeout(c.closing, 5*time.Second)
		err := c.call(ctx, v.Addr, opJoin, joinRequest{ID: c.cfg.NodeID, Addr: c.self.Addr}, nil)
		cancel()
		switch {
		case errors.Is(err, ErrVotersMismatch):
			return
		case err != nil:
			c.logger.Debug("controller: join not accepted yet", "voter", v, "err", err)
		}
		if err == nil && c.inConfiguration() {
			continue
		}
		if !c.pause(c.closing, retryBackoff*10) {
			return
		}
	}
}

func (c *Controller) inConfiguration() bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool {
		return s.ID == serverID(c.cfg.NodeID) && s.Address == raft.ServerAddress(c.self.Addr)
	})
}

// join adds a non-voter to the Raft configuration (on the leader).
func (c *Controller) join(ctx context.Context, j joinRequest) error {
	if slices.ContainsFunc(c.cfg.Voters, func(v Voter) bool { return v.ID == j.ID }) {
		return fmt.Errorf("%w: node %d asked to join as a non-voter but is a voter", ErrVotersMismatch, j.ID)
	}
	if j.ID < 0 || j.Addr == "" {
		return fmt.Errorf("controller: bad join request %+v", j)
	}
	return c.onLeader(ctx, opJoin, j, nil, func(ctx context.Context) error {
		f := c.raft.AddNonvoter(serverID(j.ID), raft.ServerAddress(j.Addr), 0, timeoutOf(ctx))
		if err := f.Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return errRetry
			}
			return fmt.Errorf("controller: add non-voter %d: %w", j.ID, err)
		}
		c.logger.Info("controller: non-voter joined", "node", j.ID, "addr", j.Addr)
		return nil
	})
}

// RemoveNonvoter removes node id, a non-voter, from the Raft
// configuration (on the leader): a node that joined by mistake, or was
// retired, stops receiving the log. A voter is refused
// (ErrVotersMismatch: the voters are fixed by --voters); an ID not in
// the configuration is no error. The removed node, when it starts
// again, asks to join again: stop it for good first.
func (c *Controller) RemoveNonvoter(ctx context.Context, id int32) error {
	if c.isVoter(id) {
		return fmt.Errorf("%w: node %d is a voter", ErrVotersMismatch, id)
	}
	return c.onLeader(ctx, opRemoveNonvoter, removeRequest{ID: id}, nil, func(ctx context.Context) error {
		f := c.raft.RemoveServer(serverID(id), 0, timeoutOf(ctx))
		if err := f.Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return errRetry
			}
			return fmt.Errorf("controller: remove non-voter %d: %w", id, err)
		}
		c.logger.Info("controller: non-voter removed", "node", id)
		return nil
	})
}

// isVoter reports whether node id is a voter of the quorum.
func (c *Controller) isVoter(id int32) bool {
	return slices.ContainsFunc(c.cfg.Voters, func(v Voter) bool { return v.ID == id }) || (len(c.cfg.Voters) == 0 && id == c.cfg.NodeID)
}

// UnregisterBroker removes node id from the cluster for good (Kafka's
// UnregisterBroker): its broker's registration and its certificate
// binding (cmdUnregisterBroker), then, for a non-voter that joined, its
// place in the Raft configuration (RemoveNonvoter). A voter is refused
// with ErrVoter; a broker that is alive or hosts a replica with
// ErrBrokerInUse (stop it, after moving its replicas off it); a node
// the cluster does not know with ErrBrokerNotRegistered. A node removed
// asks to register and join again when it starts: stop it for good.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	if c.isVoter(id) {
		return fmt.Errorf("%w: node %d is a voter of the controller quorum (--voters)", ErrVoter, id)
	}
	img := c.Image()
	_, registered := img.Brokers[id]
	_, bound := img.NodePrincipals[id]
	if !registered && !bound && !c.raftMember(id) {
		return fmt.Errorf("%w: node %d", ErrBrokerNotRegistered, id)
	}
	if _, err := c.propose(ctx, cmdUnregisterBroker, &unregisterBrokerV1{ID: id}); err != nil {
		return err
	}
	c.logger.Info("controller: broker unregistered", "broker", id)
	return c.RemoveNonvoter(ctx, id)
}

// raftMember reports whether node id is in this node's view of the Raft
// configuration.
func (c *Controller) raftMember(id int32) bool {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == serverID(id) })
}

// pause waits d of the controller's clock; false when the controller
// is closing or ctx ends first.
func (c *Controller) pause(ctx context.Context, d time.Duration) bool {
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	}
}

// watchLeadership acts on each change of this node's Raft leadership.
// Becoming the leader, it starts the broker sessions afresh (every broker
// gets a full session timeout), and from then on records heartbeats;
// then it proposes an election record: it names this node as the
// controller, sets the cluster ID on the first election, and (once
// applied) proves that the image holds every command of earlier terms.
// Then the node is the active controller, and probes every broker
// (fenceGoneBrokers): those whose process died, with the former
// controller or before, are fenced without waiting for their sessions.
func (c *Controller) watchLeadership() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case leader := <-c.raft.LeaderCh():
			if !leader {
				c.active.Store(false)
				c.leading.Store(false)
				c.logger.Info("controller: lost leadership", "node", c.cfg.NodeID)
				continue
			}
			// Before leading is set, so that no heartbeat recorded in
			// this term is wiped.
			c.live.reset(c.Image(), c.cfg.Clock.Now())
			c.leading.Store(true)
			if !c.announceWhileLeader() {
				continue
			}
			c.active.Store(true)
			c.logger.Debug("controller: active controller", "node", c.cfg.NodeID)
			c.electedOnce.Do(func() { close(c.elected) })
			if c.mux != nil && !c.cfg.NoProcessProbes {
				c.wg.Add(1)
				go func() {
					defer c.wg.Done()
					c.fenceGoneBrokers()
				}()
			}
		}
	}
}

// announceWhileLeader proposes the election record until it is applied
// (true) or this node is no longer the leader (false).
func (c *Controller) announceWhileLeader() bool {
	for {
		err := c.announceElection()
		if err == nil {
			return true
		}
		c.logger.Warn("controller: election record not applied", "node", c.cfg.NodeID, "err", err)
		if c.raft.State() != raft.Leader || !c.pause(c.closing, retryBackoff) {
			return false
		}
	}
}

func (c *Controller) announceElection() error {
	clusterID, err := newClusterID()
	if err != nil {
		return err
	}
	data, err := encodeCommand(cmdControllerElected, &controllerElectedV1{NodeID: c.cfg.NodeID, ClusterID: clusterID})
	if err != nil {
		return err
	}
	ctx, cancel := c.commandContext()
	defer cancel()
	res, err := c.applyLocal(ctx, data)
	if err != nil {
		return err
	}
	return res.err
}

// Close stops this node's Raft member and closes its stores. The image
// stays readable.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.stopAll()
		c.stopSupervising()
		c.closeErr = c.closeResources()
		c.wg.Wait()
	})
	return c.closeErr
}

func (c *Controller) closeResources() error {
	var errs []error
	if c.raft != nil {
		if err := c.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("controller: shut down raft: %w", err))
		}
	}
	if closer, ok := c.transport.(interface{ Close() error }); ok {
		if err := closer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("controller: close transport: %w", err))
		}
	}
	if c.mux != nil {
		c.mux.Close()
	}
	// After the listener: a peer that sees these connections end finds
	// nothing listening here any more (see fenceIfGone).
	c.rpcPool.close()
	if c.store != nil {
		if err := c.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("controller: close raft store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Image returns the current cluster image. It is never modified: keep it
// as long as needed, and call Image again for a newer one.
func (c *Controller) Image() *Image { return c.fsm.Image() }

// DelayApplyForTest makes this node apply each committed command d later
// (0: at once), so that a test can see what answers from an image behind
// the leader's. Only tests call it.
func (c *Controller) DelayApplyForTest(d time.Duration) { c.fsm.applyDelay.Store(int64(d)) }

// Changes returns a channel that is closed when the image next changes.
// To follow the image without missing a change, take the channel before
// reading the image:
//
//	for {
//		ch := c.Changes()
//		img := c.Image()
//		// ... use img ...
//		<-ch
//	}
func (c *Controller) Changes() <-chan struct{} { return c.fsm.Changes() }

// IsLeader reports whether this node is the Raft leader, the only node
// that accepts commands.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// RaftState returns this node's Raft state in lower case: leader,
// follower, candidate or shutdown.
func (c *Controller) RaftState() string { return strings.ToLower(c.raft.State().String()) }

// LeaderID returns the node ID of the current Raft leader, or -1 when
// there is none known.
func (c *Controller) LeaderID() int32 {
	_, id := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if id == "" || err != nil {
		return -1
	}
	return int32(n)
}

// CatchUp waits until this node's image holds the Raft log up to where
// the leader's ended when asked (appliedIndex), so that its image holds
// every partition it hosts: a restarted node's image starts from its
// last snapshot, and a broker opens their logs, and learns which lost
// committed records, before it registers. A broker asked for a topic its
// image lacks catches up before it says the topic is unknown. It fails
// when ctx ends first.
func (c *Controller) CatchUp(ctx context.Context) error {
	q, err := c.Quorum(ctx)
	if err != nil {
		return err
	}
	// The applied index moves on Raft's goroutines, whatever Clock says,
	// so it is polled on wall time: a clock.Manual would leave this loop
	// waiting for a test that is itself waiting here.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.appliedIndex() < q.LastIndex {
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller: catching up with the leader's log (applied %d of %d): %w", c.appliedIndex(), q.LastIndex, ctx.Err())
		case <-c.done:
			return ErrClosed
		case <-tick.C:
		}
	}
	return nil
}

// localApplyWait bounds how long a command that changed the image waits,
// once committed, for this node's image to hold it (awaitLocal).
const localApplyWait = 5 * time.Second

// awaitLocal waits until this node's image holds the change committed at
// log index (AwaitVersion), for at most localApplyWait or until ctx
// ends: a command sent to the leader is committed and applied there
// first, and this node's FSM applies it when the leader's next message
// tells it the commit index. Waiting lets the handler that proposed it
// answer from an image that holds it (a topic just created), and its
// client's next request here find it. The command is committed either
// way: running out of time is not an error. Only for commands that
// change the image, whose index becomes its Version; index 0 (a leader
// of an older version did not say) does not wait.
func (c *Controller) awaitLocal(ctx context.Context, index uint64) {
	if index == 0 {
		return
	}
	// Wall time, like the Raft apply it waits for.
	wctx, cancel := context.WithTimeout(ctx, localApplyWait)
	defer cancel()
	if err := c.AwaitVersion(wctx, index); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		c.logger.Warn("controller: a committed command is not in this node's image yet", "index", index, "version", c.Image().Version)
	}
}

// AwaitVersion waits until this node's image has reached version
// (Image().Version >= version). It returns ctx's error when ctx ends
// first, ErrClosed when the controller closes.
func (c *Controller) AwaitVersion(ctx context.Context, version uint64) error {
	for {
		changes := c.Changes()
		if c.Image().Version >= version {
			return nil
		}
		select {
		case <-changes:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrClosed
		}
	}
}

// appliedIndex is the log index up to which this node's image holds the
// commands. Raft's own AppliedIndex moves when it hands the commands to
// the FSM, before the FSM applied them; the FSM's index is used instead,
// and Raft's only until the first command after a snapshot was restored
// (the snapshot's index is Raft's alone).
func (c *Controller) appliedIndex() uint64 {
	if c.fsm.appliedKnown.Load() {
		return c.fsm.applied.Load()
	}
	return c.raft.AppliedIndex()
}

// onLeader runs local on this node when it is the Raft leader, and
// otherwise sends op with in to the leader and decodes its answer into
// out. While no leader is known, or the one asked is not the leader (any
// more), it tries again until ctx ends, and then fails with
// ErrNotController.
func (c *Controller) onLeader(ctx context.Context, op string, in, out any, local func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		// A command's deadline is wall time, like the caller's: it
		// becomes Raft's apply timeout and the RPC's I/O deadline.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	var last error
	for {
		select {
		case <-c.done:
			return ErrClosed
		default:
		}
		var err error
		address, id := c.raft.LeaderWithID()
		switch {
		case c.raft.State() == raft.Leader:
			err = local(ctx)
		case address == "" || id == serverID(c.cfg.NodeID):
			err = errRetry
		case c.mux == nil:
			return fmt.Errorf("%w (leader is node %s)", ErrNotController, id)
		default:
			err = c.call(ctx, string(address), op, in, out)
		}
		var unreachable errUnreachable
		if !errors.Is(err, errRetry) && !errors.As(err, &unreachable) {
			return err
		}
		last = err
		if !c.pause(ctx, retryBackoff) {
			if ctx.Err() == nil {
				return ErrClosed
			}
			if errors.Is(last, errRetry) {
				return fmt.Errorf("%w: no leader within the deadline", ErrNotController)
			}
			return fmt.Errorf("%w: %v", ErrNotController, last)
		}
	}
}

// commandContext bounds a command the controller runs on its own
// (defaultCommandTimeout; Close ends it). The deadline is wall time: it
// becomes Raft's apply timeout (timeoutOf), which hashicorp/raft measures
// on its own timers.
func (c *Controller) commandContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.closing, defaultCommandTimeout)
}

// timeoutOf is what is left of ctx's deadline, for Raft's timeouts: wall
// time, as Raft measures them.
func timeoutOf(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return max(time.Until(deadline), time.Millisecond)
	}
	return defaultCommandTimeout
}

// propose commits one command through Raft, on the leader, and returns
// the FSM's result.
func (c *Controller) propose(ctx context.Context, t commandType, body any) (applyResult, error) {
	if err := ctx.Err(); err != nil {
		return applyResult{}, err
	}
	select {
	case <-c.done:
		return applyResult{}, ErrClosed
	default:
	}
	data, err := encodeCommand(t, body)
	if err != nil {
		return applyResult{}, err
	}
	if len(data) > maxCommand {
		return applyResult{}, fmt.Errorf("%w: %v of %d bytes, at most %d", ErrCommandTooLarge, t, len(data), maxCommand)
	}
	return c.applyOnLeader(ctx, opPropose, data, func(ctx context.Context) (applyResult, error) {
		return c.applyLocal(ctx, data)
	})
}

// applyOnLeader is onLeader for a call that applies a command: local on
// the leader, or op with in sent to it, whose wire answer is decoded. It
// returns the FSM's result and its error.
func (c *Controller) applyOnLeader(ctx context.Context, op string, in any, local func(context.Context) (applyResult, error)) (applyResult, error) {
	var res applyResult
	var remote wireResult
	appliedHere := false
	err := c.onLeader(ctx, op, in, &remote, func(ctx context.Context) error {
		var err error
		res, err = local(ctx)
		appliedHere = err == nil
		return err
	})
	if err != nil {
		return applyResult{}, err
	}
	if !appliedHere {
		res = resultFromWire(remote)
	}
	return res, res.err
}

// applyLocal commits an encoded command through this node's Raft, which
// must be the leader (errRetry otherwise), and returns the FSM's result.
// The error is Raft's (ErrNotController when leadership was lost and the
// command may or may not be committed); the FSM's refusal is res.err.
func (c *Controller) applyLocal(ctx context.Context, data []byte) (applyResult, error) {
	if len(data) > maxCommand {
		return applyResult{}, fmt.Errorf("%w: %d bytes, at most %d", ErrCommandTooLarge, len(data), maxCommand)
	}
	if c.raft.State() != raft.Leader {
		return applyResult{}, errRetry
	}
	future := c.raft.Apply(data, timeoutOf(ctx))
	errc := make(chan error, 1)
	go func() { errc <- future.Error() }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		return applyResult{}, ctx.Err()
	}
	switch {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader):
		return applyResult{}, errRetry
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return applyResult{}, fmt.Errorf("%w: %v", ErrNotController, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return applyResult{}, ErrClosed
	default:
		return applyResult{}, fmt.Errorf("controller: apply: %w", err)
	}
	res, ok := future.Response().(applyResult)
	if !ok {
		return applyResult{}, fmt.Errorf("controller: unexpected fsm response %T", future.Response())
	}
	res.index = future.Index()
	for _, u := range res.unclean {
		c.logger.Warn("controller: unclean leader election: records the former ISR holds above the new leader's end offset may be lost",
			"topic", u.Topic, "partition", u.Partition, "leader", u.Leader,
			"leader_end_offset", u.EndOffset, "leader_last_epoch", u.LastEpoch, "former_isr", u.FormerISR)
	}
	for _, l := range res.leftISR {
		what := "it leaves the ISR, and leads only after an unclean election"
		if slices.Equal(l.isr, []int32{l.broker}) {
			what = "it is the partition's only replica and leads on what it kept"
		}
		c.logger.Error("controller: a replica lost records it knew as committed: "+what,
			"broker", l.broker, "topic", l.Topic, "partition", l.Partition,
			"log_end_offset", l.EndOffset, "checkpointed_high_watermark", l.HighWatermark,
			"leader", l.leader, "isr", l.isr)
	}
	return res, nil
}

// RegisterBroker records b in the image, replacing an earlier registration
// of the same ID, and returns the broker epoch the controller gave it
// (b.Epoch is ignored): the log index of the registration, larger than
// any earlier one. The registration clears Fenced and
// InControlledShutdown and starts the broker's session. A broker that
// was registered before is a new incarnation: its leaderships move to
// other live in-sync replicas, it leaves the ISRs that have other
// members, and where it is the last in-sync replica it stays leader in a
// new leader epoch. It also becomes leader of partitions without one
// whose ISR holds it.
func (c *Controller) RegisterBroker(ctx context.Context, b Broker) (epoch int64, err error) {
	return c.RegisterBrokerAfterLoss(ctx, b, nil)
}

// RegisterBrokerAfterLoss is RegisterBroker for a broker whose replicas
// in lost lost records they knew as committed (see LostReplica): the
// broker leaves their ISRs, and is not elected there but by an unclean
// election (unclean.leader.election.enable, or an operator's
// ElectLeaders). Where it was the last ISR member the partition is left
// without a leader and with an empty ISR, unless it is the partition's
// only replica: then it leads on what it kept.
func (c *Controller) RegisterBrokerAfterLoss(ctx context.Context, b Broker, lost []LostReplica) (epoch int64, err error) {
	raftAddr := b.RaftAddr
	if raftAddr == "" && c.mux != nil && b.ID == c.cfg.NodeID {
		raftAddr = c.self.Addr
	}
	v3 := registerBrokerV3{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Listeners: b.Listeners, RaftAddr: raftAddr}
	var body any = &v3
	if len(lost) > 0 {
		v4 := &registerBrokerV4{registerBrokerV3: v3}
		for _, l := range lost {
			v4.LostCommitted = append(v4.LostCommitted, lostReplicaV4{Topic: l.Topic, Partition: l.Partition, EndOffset: l.EndOffset, HighWatermark: l.HighWatermark})
		}
		body = v4
	}
	if c.cfg.TLS != nil && b.ID == c.cfg.NodeID {
		// The node's certificate speaks for it from its first
		// registration on; a binding already there is left as it is.
		if _, err := c.propose(ctx, cmdBindNode, &bindNodeV1{ID: b.ID, Principal: c.cfg.TLS.Principal()}); err != nil {
			return 0, err
		}
	}
	res, err := c.propose(ctx, cmdRegisterBroker, body)
	if err != nil {
		return 0, err
	}
	return res.brokerEpoch, nil
}

// CreateTopic is a topic to create. Without Assignments, Partitions
// partitions get ReplicationFactor replicas each, placed round-robin over
// the registered brokers. With Assignments (one replica list per
// partition, the first replica the preferred leader), Partitions and
// ReplicationFactor may be left zero; when set they must agree.
type CreateTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Assignments       [][]int32
	Configs           map[string]string
	// Internal marks topics like __consumer_offsets.
	Internal bool
}

// CreateTopic creates a topic with a new random ID and returns the ID.
// ErrTopicExists when the name is taken; ErrInvalidReplicationFactor when
// there are fewer registered brokers than replicas; ErrInvalidPartitions
// (also beyond MaxPartitions),
// ErrInvalidReplicaAssignment, ErrInvalidConfig for bad arguments. Topic
// names are validated by the caller.
func (c *Controller) CreateTopic(ctx context.Context, t CreateTopic) (TopicID, error) {
	id, err := NewTopicID()
	if err != nil {
		return TopicID{}, err
	}
	res, err := c.propose(ctx, cmdCreateTopic, &createTopicV1{
		Name: t.Name, ID: id, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor,
		Assignments: t.Assignments, Configs: t.Configs, Internal: t.Internal,
	})
	if err != nil {
		return TopicID{}, err
	}
	c.awaitLocal(ctx, res.index)
	return id, nil
}

// ValidateCreateTopic answers what CreateTopic would, against this node's
// image, without proposing anything: the same checks, by the same code as
// the command's apply (a CreateTopics request's validate_only).
func (c *Controller) ValidateCreateTopic(t CreateTopic) error {
	id, err := NewTopicID()
	if err != nil {
		return err
	}
	_, err = checkCreateTopic(c.Image(), &createTopicV1{
		Name: t.Name, ID: id, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor,
		Assignments: t.Assignments, Configs: t.Configs, Internal: t.Internal,
	})
	return err
}

// ValidateCreatePartitions answers what CreatePartitions would, against
// this node's image, without proposing anything (validate_only).
func (c *Controller) ValidateCreatePartitions(topic string, total int32, assignments [][]int32) error {
	_, _, err := checkCreatePartitions(c.Image(), &createPartitionsV1{Topic: topic, Total: total, Assignments: assignments})
	return err
}

// DeleteTopic removes a topic from the image (ErrUnknownTopic if absent).
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	res, err := c.propose(ctx, cmdDeleteTopic, &deleteTopicV1{Name: name})
	if err == nil {
		c.awaitLocal(ctx, res.index)
	}
	return err
}

// CreatePartitions grows topic to total partitions (ErrInvalidPartitions
// when total is not more than the current count). assignments, when not
// empty, holds the replica lists of the new partitions only; otherwise
// they are placed round-robin with the topic's replication factor.
func (c *Controller) CreatePartitions(ctx context.Context, topic string, total int32, assignments [][]int32) error {
	res, err := c.propose(ctx, cmdCreatePartitions, &createPartitionsV1{Topic: topic, Total: total, Assignments: assignments})
	if err == nil {
		c.awaitLocal(ctx, res.index)
	}
	return err
}

// AlterTopicConfigs sets and deletes dynamic configs of topic. A key both
// in set and del is refused with ErrInvalidConfig; deleting an absent key
// is not an error.
func (c *Controller) AlterTopicConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, cmdAlterTopicConfigs, &alterTopicConfigsV1{Topic: topic, Set: set, Delete: del})
	return err
}

// AlterBrokerConfigs sets and deletes dynamic configs of one broker, or the
// cluster-wide defaults when brokerID is -1.
func (c *Controller) AlterBrokerConfigs(ctx context.Context, brokerID int32, set map[string]string, del []string) error {
	_, err := c.propose(ctx, cmdAlterBrokerConfigs, &alterBrokerConfigsV1{BrokerID: brokerID, Set: set, Delete: del})
	return err
}

// ScramCredentialChange is one change AlterScramCredentials makes: the
// credential of User for Mechanism set to Credential, or deleted when
// Delete.
type ScramCredentialChange struct {
	User, Mechanism string
	Credential      auth.Credential
	Delete          bool
}

// AlterScramCredentials upserts and deletes SCRAM credentials, all in one
// command (deletions first). A credential a SCRAM exchange could not use
// refuses the whole command with ErrInvalidCommand.
func (c *Controller) AlterScramCredentials(ctx context.Context, changes []ScramCredentialChange) error {
	var body alterScramCredentialsV1
	for _, ch := range changes {
		if ch.Delete {
			body.Deletions = append(body.Deletions, scramDeletionV1{User: ch.User, Mechanism: ch.Mechanism})
			continue
		}
		body.Upsertions = append(body.Upsertions, scramCredentialV1{
			User: ch.User, Mechanism: ch.Mechanism, Salt: ch.Credential.Salt, Iterations: int32(ch.Credential.Iterations),
			StoredKey: ch.Credential.StoredKey, ServerKey: ch.Credential.ServerKey,
		})
	}
	_, err := c.propose(ctx, cmdAlterScramCredentials, &body)
	return err
}

// AlterACLs deletes the ACL bindings any of del selects, then creates
// create, in one command. A binding or filter that does not validate
// refuses all of it (ErrInvalidACL).
func (c *Controller) AlterACLs(ctx context.Context, create []auth.Binding, del []auth.Filter) error {
	cmd := &alterACLsV1{}
	for _, b := range create {
		cmd.Create = append(cmd.Create, aclBindingToV1(b))
	}
	for _, f := range del {
		cmd.Delete = append(cmd.Delete, aclFilterToV1(f))
	}
	_, err := c.propose(ctx, cmdAlterACLs, cmd)
	return err
}

// AlterGroupConfigs sets and deletes the configs of one group.
func (c *Controller) AlterGroupConfigs(ctx context.Context, group string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, cmdAlterGroupConfigs, &alterGroupConfigsV1{Group: group, Set: set, Delete: del})
	return err
}

// AlterPartition is an ISR change proposed by a partition's leader.
type AlterPartition struct {
	Topic     string
	Partition int32
	// Leader is the proposing broker, which must be the current leader.
	Leader int32
	// LeaderEpoch and PartitionEpoch are the epochs the proposal is based
	// on; both must be the partition's current ones.
	LeaderEpoch    int32
	PartitionEpoch int32
	// ISR is the new in-sync replica set: replicas of the partition,
	// holding the leader; brokers it adds must be alive.
	ISR []int32
}

// command is the record body of the change.
func (p AlterPartition) command() *alterPartitionV2 {
	return &alterPartitionV2{
		Topic: p.Topic, Partition: p.Partition, Leader: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR,
	}
}

// AlterPartition changes one partition's ISR and returns the partition as
// it is now (its new partition epoch). Errors: ErrFencedLeaderEpoch (the
// leader epoch is not the current one), ErrNotLeader, ErrInvalidUpdateVersion
// (the partition epoch is not the current one: another change came
// first), ErrInvalidPartitionState (not a subset of the replicas, or
// without the leader), ErrIneligibleReplica (adds a fenced, shutting down
// or unregistered broker), ErrUnknownTopic, ErrUnknownPartition. An ISR
// equal to the current one changes nothing.
func (c *Controller) AlterPartition(ctx context.Context, p AlterPartition) (Partition, error) {
	res, err := c.propose(ctx, cmdAlterPartition, p.command())
	if err != nil {
		return Partition{}, err
	}
	if res.partition == nil {
		return Partition{}, fmt.Errorf("controller: AlterPartition answered without a partition")
	}
	return *res.partition, nil
}

// AlterPartitionResult is the outcome of one change of AlterPartitions:
// the partition as it is after the command, or the change's refusal
// (AlterPartition's errors).
type AlterPartitionResult struct {
	Partition Partition
	Err       error
}

// AlterPartitions proposes many ISR changes as one command (one Raft
// entry, one new image; at most 4096): each is checked and applied as
// AlterPartition's is, in order and on its own, and its outcome is
// returned at its index. The error is the command's: when it is not nil
// no outcome is known (ErrNotController, a deadline: the changes may or
// may not have been applied).
func (c *Controller) AlterPartitions(ctx context.Context, ps []AlterPartition) ([]AlterPartitionResult, error) {
	body := &alterPartitionV3{Changes: make([]alterPartitionV2, len(ps))}
	for i, p := range ps {
		body.Changes[i] = *p.command()
	}
	res, err := c.propose(ctx, cmdAlterPartition, body)
	if err != nil {
		return nil, err
	}
	if len(res.alterations) != len(ps) {
		return nil, fmt.Errorf("controller: AlterPartition of %d changes answered with %d outcomes", len(ps), len(res.alterations))
	}
	out := make([]AlterPartitionResult, len(ps))
	for i, a := range res.alterations {
		switch {
		case a.err != nil:
			out[i].Err = a.err
		case a.partition == nil:
			out[i].Err = fmt.Errorf("controller: AlterPartition answered change %d without a partition", i)
		default:
			out[i].Partition = *a.partition
		}
	}
	return out, nil
}

// Resignation is a partition's leader giving the partition up: it cannot
// serve a range of its log below the high-water mark (damaged), which
// another ISR member holds.
type Resignation struct {
	Topic     string
	Partition int32
	// Leader is the resigning broker, which must be the current leader;
	// LeaderEpoch and PartitionEpoch must be the partition's current ones.
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// ResignLeadership hands a partition's leadership from its leader to the
// first live member of its ISR in replica order, and takes the former
// leader out of the ISR, in one change; it returns the partition as it is
// now. Errors: ErrEligibleLeadersNotAvailable (no other ISR member is
// alive: the leader keeps it), and AlterPartition's ErrFencedLeaderEpoch,
// ErrNotLeader, ErrInvalidUpdateVersion, ErrUnknownTopic,
// ErrUnknownPartition.
func (c *Controller) ResignLeadership(ctx context.Context, r Resignation) (Partition, error) {
	res, err := c.propose(ctx, cmdResignLeadership, &resignLeadershipV1{
		Topic: r.Topic, Partition: r.Partition, Leader: r.Leader,
		LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
	})
	if err != nil {
		return Partition{}, err
	}
	if res.partition == nil {
		return Partition{}, fmt.Errorf("controller: ResignLeadership answered without a partition")
	}
	return *res.partition, nil
}

// PartitionOverride is a leader, ISR and leader epoch set by hand.
type PartitionOverride struct {
	Topic     string
	Partition int32
	// Leader is the new leader, or -1 for none; a leader must be in ISR.
	Leader int32
	// ISR must be a subset of the partition's replicas, with no fenced
	// broker but as its last member.
	ISR []int32
	// LeaderEpoch must be >= the current one, and > it when the leader
	// changes.
	LeaderEpoch int32
}

// OverridePartition sets one partition's leader, ISR and leader epoch
// without the checks of an election or of a leader's AlterPartition (an
// operator's last resort, and how tests put a partition in a given state):
// nothing ensures the new leader has the acknowledged records. Errors:
// ErrStaleLeaderEpoch, ErrInvalidPartitionState, ErrIneligibleReplica,
// ErrUnknownTopic, ErrUnknownPartition.
func (c *Controller) OverridePartition(ctx context.Context, p PartitionOverride) error {
	_, err := c.propose(ctx, cmdAlterPartition, &alterPartitionV1{
		Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, ISR: p.ISR, LeaderEpoch: p.LeaderEpoch,
	})
	return err
}

// ElectLeaders runs an election of type typ for partitions (nil: every
// partition) and returns the outcome per partition: nil for a new leader,
// or ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable, ErrUnknownTopic, ErrUnknownPartition.
// With nil partitions, those that need no election are left out. An
// unclean election elects a replica outside the ISR only where no ISR
// member is alive, whatever unclean.leader.election.enable says (it is an
// operator's explicit request): the live replica with the most advanced
// log among those that reported theirs to the active controller
// (ErrEligibleLeadersNotAvailable when none did). It is logged at Warn.
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, partitions []TopicPartition) (map[TopicPartition]error, error) {
	var tps []topicPartitionV1
	if partitions != nil {
		tps = make([]topicPartitionV1, 0, len(partitions))
		for _, tp := range partitions {
			tps = append(tps, topicPartitionV1{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	var res applyResult
	var err error
	if typ == ElectUnclean {
		res, err = c.electOnLeader(ctx, electRequest{Type: int8(typ), Partitions: tps})
	} else {
		res, err = c.propose(ctx, cmdElectLeaders, &electLeadersV1{Type: int8(typ), Partitions: tps})
	}
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]error, len(res.elections))
	for _, e := range res.elections {
		out[e.TopicPartition] = e.err
	}
	return out, nil
}

// AllocateProducerIDs reserves the block [first, first+n) of producer IDs.
// Blocks never overlap and never repeat, across restarts too. n must be in
// 1..2^24.
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (first int64, err error) {
	res, err := c.propose(ctx, cmdAllocateProducerID, &allocateProducerIDsV1{Count: n})
	if err != nil {
		return 0, err
	}
	return res.firstProducerID, nil
}
