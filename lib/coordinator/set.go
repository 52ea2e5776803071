package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/group"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/txn"
)

// SetConfig is what a node's coordinators need from the node.
type SetConfig struct {
	Settings   config.Broker // the internal topics' placement, the coordinators' settings
	Controller *controller.Controller
	Hosted     *partition.Manager // the partitions this node hosts
	Peers      *peer.Pool         // connections to the other brokers
	// TxnPeers sends the transaction markers to the partitions' leaders;
	// nil: lib/peer's Nodes over Peers.
	TxnPeers txn.Peers
	// ProducerIDs hands out the producer IDs of transactional producers
	// (controller.ProducerIDs.Take).
	ProducerIDs func(ctx context.Context) (int64, error)
	Clock       clock.Clock  // the coordinators' timers; nil = real time
	Logger      *slog.Logger // nil = silent
}

// Set is the coordinators one node runs, each on its internal topic:
// lib/group's on __consumer_offsets (NewGroups), lib/txn's on
// __transaction_state (NewTransactions), lib/queue's share-partition
// leader on __share_group_state (NewShares) with its dead letters
// (DeadLetters), and lib/queue's share groups, whose membership is kept
// in memory only. lib/node builds it and closes it after the server
// drained; lib/broker answers the Kafka APIs on it.
type Set struct {
	Groups   *group.Coordinator
	Offsets  *Topic // __consumer_offsets
	Txns     *txn.Coordinator
	TxnState *Topic // __transaction_state
	// TxnPeers is SetConfig.TxnPeers, or the one NewSet made.
	TxnPeers    txn.Peers
	ShareGroups *queue.Groups
	Shares      *queue.Leader
	ShareState  *Topic // __share_group_state

	closeOnce sync.Once
}

// NewSet starts the coordinators of cfg's node. Their goroutines (lib/group's
// and lib/txn's timers, lib/txn's markers, the Topics' senders) run until
// Close.
func NewSet(cfg SetConfig) *Set {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TxnPeers == nil {
		cfg.TxnPeers = &peer.Nodes{Pool: cfg.Peers, Addr: cfg.Hosted.PeerAddr}
	}
	s := cfg.Settings
	log := cfg.Logger
	// placed is an internal topic's Config: created with partitions
	// partitions of rf replicas.
	placed := func(partitions int32, rf int16) Config {
		return Config{Partitions: partitions, ReplicationFactor: rf,
			NodeID: s.NodeID, Controller: cfg.Controller, Hosted: cfg.Hosted, Peers: cfg.Peers, Logger: log}
	}
	set := &Set{TxnPeers: cfg.TxnPeers, ShareGroups: queue.NewGroups()}
	set.Groups, set.Offsets = NewGroups(placed(s.OffsetsTopicNumPartitions, s.OffsetsTopicReplicationFactor), group.Config{
		Clock:                 cfg.Clock,
		Logger:                log.With("component", "group"),
		InitialRebalanceDelay: s.GroupInitialRebalanceDelay,
		InitialRebalanceAlone: s.GroupInitialRebalanceAlone,
		OffsetsRetention:      s.OffsetsRetention,
	})
	txnState := placed(orDefault(s.TransactionStateTopicPartitions, 50), orDefault(s.TransactionStateReplicationFactor, 3))
	set.Txns, set.TxnState = NewTransactions(txnState, txn.Config{
		Markers:            &txn.MarkerWriter{Leader: imageLeader(cfg.Controller), Peers: cfg.TxnPeers, Clock: cfg.Clock, Logger: log},
		ProducerIDs:        cfg.ProducerIDs,
		Clock:              cfg.Clock,
		Logger:             log.With("component", "txn"),
		MaxTimeout:         s.TransactionMaxTimeout,
		IDExpiration:       s.TransactionalIDExpiration,
		AbortCheckInterval: s.TransactionAbortCheckInterval,
	})
	dlq := &DeadLetters{Settings: s, Controller: cfg.Controller, Hosted: cfg.Hosted, Logger: log}
	set.Shares, set.ShareState = NewShares(placed(orDefault(s.ShareStateTopicPartitions, 50), s.OffsetsTopicReplicationFactor),
		queue.LeaderConfig{DeadLetter: dlq.Write, Clock: cfg.Clock, Logger: log})
	return set
}

// orDefault is v, or def when v is not positive (a setting left unset).
func orDefault[T int16 | int32](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// imageLeader is a partition's leader in the image of the moment (false:
// the partition is gone), where the markers go.
func imageLeader(ctrl *controller.Controller) func(txn.TopicPartition) (int32, bool) {
	return func(tp txn.TopicPartition) (int32, bool) {
		p := ctrl.Image().Partition(tp.Topic, tp.Partition)
		if p == nil {
			return -1, false
		}
		return p.Leader, true
	}
}

// ErrConsumerGroupID is a share group's heartbeat for the id of a
// consumer group: one id is one group, of one type, as in Kafka.
var ErrConsumerGroupID = errors.New("coordinator: the id is a consumer group's, not a share group's")

// ShareHeartbeat is a share group member's heartbeat to the coordinator
// of group id (queue.Groups.Heartbeat): refused as lib/group's Check
// refuses when this node does not coordinate id, and with
// ErrConsumerGroupID when id is a consumer group that is not Dead, so that
// a queue never shadows a consumer group or its committed offsets.
func (s *Set) ShareHeartbeat(id string, hb queue.Heartbeat, now time.Time, sessionTimeout time.Duration, counts queue.PartitionCounts) (queue.HeartbeatResult, error) {
	if err := s.Groups.Check(id); err != nil {
		return queue.HeartbeatResult{}, err
	}
	if !s.ShareGroups.Has(id) {
		if d, err := s.Groups.DescribeGroup(id); err == nil && d.State != group.Dead {
			return queue.HeartbeatResult{}, fmt.Errorf("%w: group %s", ErrConsumerGroupID, id)
		}
	}
	return s.ShareGroups.Heartbeat(id, hb, now, sessionTimeout, counts)
}

// ErrShareGroupNotEmpty refuses a change to the offsets of a share group
// with members.
var ErrShareGroupNotEmpty = errors.New("coordinator: the share group has members")

// CheckShareGroupEmpty is the coordinator's check before a share group's
// offsets are altered or deleted: refused as lib/group's Check refuses
// when this node does not coordinate id, and with ErrShareGroupNotEmpty
// while the group has members (those silent for longer than
// sessionTimeout expired first).
func (s *Set) CheckShareGroupEmpty(id string, now time.Time, sessionTimeout time.Duration, counts queue.PartitionCounts) error {
	if err := s.Groups.Check(id); err != nil {
		return err
	}
	if members, _, _ := s.ShareGroups.Describe(id, now, sessionTimeout, counts); len(members) > 0 {
		return ErrShareGroupNotEmpty
	}
	return nil
}

// ListShareGroups returns the share groups this node coordinates (those
// whose partition of __consumer_offsets it leads), with their states.
func (s *Set) ListShareGroups() []queue.GroupState {
	return s.ShareGroups.List(func(id string) bool { return s.Groups.Check(id) == nil })
}

// Close stops the coordinators: waiting joins and syncs are answered
// NOT_COORDINATOR, the Topics' remote writes end. The hosted partitions
// stay open. Closing twice does nothing.
func (s *Set) Close() {
	s.closeOnce.Do(func() {
		s.Groups.Close()
		s.Offsets.Close()
		s.Txns.Close()
		s.TxnState.Close()
		s.ShareState.Close()
	})
}
