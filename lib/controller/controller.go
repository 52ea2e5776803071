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
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

const (
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
	// transport. Otherwise this node must be one of the voters and the
	// voters talk over TCP.
	Voters []Voter
	// RaftAddr is the bind address of the TCP Raft transport; empty means
	// this node's address in Voters. Unused with a single voter.
	RaftAddr string
	// Logger receives the controller's and Raft's logs; nil is silent.
	Logger *slog.Logger
	// Clock is the time source for timestamps and deadlines the controller
	// computes itself (broker liveness, later); nil is time.Now. Apply
	// never reads it: commands carry every value they need.
	Clock func() time.Time
	// StartTimeout bounds how long Open waits for a single voter to become
	// the active controller; zero means 10s.
	StartTimeout time.Duration
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

	// bootstrapped records whether Open wrote the initial configuration.
	bootstrapped bool
	// elected is closed once this node, as leader, has applied its own
	// election record: its image then reflects every earlier command.
	elected     chan struct{}
	electedOnce sync.Once

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts this node's Raft member in cfg.Dir, bootstrapping a new
// cluster when the directory holds no Raft state, and recovers the image
// from the latest snapshot and the log. When this node is the only voter
// it waits (bounded by cfg.StartTimeout) until it is the active controller
// and its image holds every committed command.
func Open(cfg Config) (*Controller, error) {
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("controller: node id %d is negative", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return nil, errors.New("controller: no directory")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	single := len(cfg.Voters) == 0
	self := Voter{ID: cfg.NodeID, Addr: "controller-" + strconv.Itoa(int(cfg.NodeID))}
	if !single {
		i := slices.IndexFunc(cfg.Voters, func(v Voter) bool { return v.ID == cfg.NodeID })
		if i < 0 {
			return nil, fmt.Errorf("controller: node %d is not in the voter set %v (non-voters are not supported yet)", cfg.NodeID, cfg.Voters)
		}
		self = cfg.Voters[i]
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}

	c := &Controller{
		cfg:     cfg,
		logger:  logger,
		fsm:     newFSM(logger),
		elected: make(chan struct{}),
		done:    make(chan struct{}),
	}
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
		c.transport, err = newTCPTransport(cfg.RaftAddr, self.Addr, hlog)
		if err != nil {
			return nil, err
		}
	}

	rc := raftConfig(cfg, single, hlog)
	exists, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: inspect raft state: %w", err)
	}
	if !exists {
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
	c.wg.Add(1)
	go c.watchLeadership()

	if single || len(cfg.Voters) == 1 {
		// Only this node can win, so wait for it to.
		timer := time.NewTimer(cfg.StartTimeout)
		defer timer.Stop()
		select {
		case <-c.elected:
		case <-timer.C:
			return nil, fmt.Errorf("controller: node %d did not become the controller within %v", cfg.NodeID, cfg.StartTimeout)
		}
	}
	ok = true
	img := c.Image()
	logger.Debug("controller: started", "node", cfg.NodeID, "cluster", img.ClusterID, "version", img.Version, "topics", len(img.Topics))
	return c, nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func raftConfig(cfg Config, single bool, hlog *hclogAdapter) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.Logger = hlog
	if single {
		// Nobody else can win an election: start the first one soon.
		rc.HeartbeatTimeout = 100 * time.Millisecond
		rc.ElectionTimeout = 100 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
	}
	return rc
}

func newTCPTransport(bind, advertise string, hlog *hclogAdapter) (raft.Transport, error) {
	if bind == "" {
		bind = advertise
	}
	addr, err := resolveTCPAddr(advertise)
	if err != nil {
		return nil, fmt.Errorf("controller: raft address %q: %w", advertise, err)
	}
	t, err := raft.NewTCPTransportWithLogger(bind, addr, 3, 10*time.Second, hlog.Named("transport"))
	if err != nil {
		return nil, fmt.Errorf("controller: raft transport on %s: %w", bind, err)
	}
	return t, nil
}

// watchLeadership proposes an election record each time this node becomes
// the Raft leader: it names this node as the controller, sets the cluster
// ID on the first election, and (once applied) proves that the image holds
// every command of earlier terms.
func (c *Controller) watchLeadership() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case leader := <-c.raft.LeaderCh():
			if !leader {
				c.logger.Info("controller: lost leadership", "node", c.cfg.NodeID)
				continue
			}
			if err := c.announceElection(); err != nil {
				c.logger.Warn("controller: election record not applied", "node", c.cfg.NodeID, "err", err)
				continue
			}
			c.logger.Debug("controller: active controller", "node", c.cfg.NodeID)
			c.electedOnce.Do(func() { close(c.elected) })
		}
	}
}

func (c *Controller) announceElection() error {
	clusterID, err := newClusterID()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultCommandTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err = c.propose(ctx, cmdControllerElected, &controllerElectedV1{NodeID: c.cfg.NodeID, ClusterID: clusterID})
	return err
}

// Close stops this node's Raft member and closes its stores. The image
// stays readable.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
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

// propose commits one command through Raft and returns the FSM's result.
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
	if c.raft.State() != raft.Leader {
		return applyResult{}, fmt.Errorf("%w (leader is node %d)", ErrNotController, c.LeaderID())
	}
	timeout := defaultCommandTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	future := c.raft.Apply(data, timeout)
	errc := make(chan error, 1)
	go func() { errc <- future.Error() }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		return applyResult{}, ctx.Err()
	}
	switch {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return applyResult{}, fmt.Errorf("%w: %v", ErrNotController, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return applyResult{}, ErrClosed
	default:
		return applyResult{}, fmt.Errorf("controller: %v: %w", t, err)
	}
	res, ok := future.Response().(applyResult)
	if !ok {
		return applyResult{}, fmt.Errorf("controller: %v: unexpected fsm response %T", t, future.Response())
	}
	return res, res.err
}

// RegisterBroker records b in the image, replacing an earlier registration
// of the same ID. The controller assigns b.Epoch (the value passed is
// ignored); read it back from Image().Brokers.
func (c *Controller) RegisterBroker(ctx context.Context, b Broker) error {
	_, err := c.propose(ctx, cmdRegisterBroker, &registerBrokerV1{
		ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Listeners: b.Listeners,
	})
	return err
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
	_, err = c.propose(ctx, cmdCreateTopic, &createTopicV1{
		Name: t.Name, ID: id, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor,
		Assignments: t.Assignments, Configs: t.Configs, Internal: t.Internal,
	})
	if err != nil {
		return TopicID{}, err
	}
	return id, nil
}

// DeleteTopic removes a topic from the image (ErrUnknownTopic if absent).
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.propose(ctx, cmdDeleteTopic, &deleteTopicV1{Name: name})
	return err
}

// CreatePartitions grows topic to total partitions (ErrInvalidPartitions
// when total is not more than the current count). assignments, when not
// empty, holds the replica lists of the new partitions only; otherwise
// they are placed round-robin with the topic's replication factor.
func (c *Controller) CreatePartitions(ctx context.Context, topic string, total int32, assignments [][]int32) error {
	_, err := c.propose(ctx, cmdCreatePartitions, &createPartitionsV1{Topic: topic, Total: total, Assignments: assignments})
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

// AlterPartition is a new leader, ISR and leader epoch for one partition.
type AlterPartition struct {
	Topic     string
	Partition int32
	// Leader is the new leader, or -1 for none; a leader must be in ISR.
	Leader int32
	// ISR must be a subset of the partition's replicas.
	ISR []int32
	// LeaderEpoch must be >= the current leader epoch, and > it when the
	// leader changes.
	LeaderEpoch int32
}

// AlterPartition changes one partition's leader, ISR and leader epoch and
// bumps its partition epoch. ErrStaleLeaderEpoch when the epoch goes
// backwards (or the leader changes within an epoch); ErrUnknownTopic,
// ErrUnknownPartition, ErrInvalidPartitionState otherwise.
func (c *Controller) AlterPartition(ctx context.Context, p AlterPartition) error {
	_, err := c.propose(ctx, cmdAlterPartition, &alterPartitionV1{
		Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, ISR: p.ISR, LeaderEpoch: p.LeaderEpoch,
	})
	return err
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
