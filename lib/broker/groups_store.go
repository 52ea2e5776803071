package broker

import (
	"context"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = coordinator.OffsetsTopic

// groupCoordinator is the group coordinator (lib/group) on this node:
// its records are kept in the partitions of __consumer_offsets
// (lib/coordinator), and it coordinates the groups of the partitions this
// node leads, loaded and unloaded as their leadership moves.
type groupCoordinator struct {
	c       *group.Coordinator
	offsets *coordinator.Topic
}

// newGroupCoordinator starts the coordinator on the offsets topic
// (coordinator.NewGroups).
func newGroupCoordinator(b *Broker) *groupCoordinator {
	s := b.cfg.Settings
	c, offsets := coordinator.NewGroups(coordinator.Config{
		Partitions: s.OffsetsTopicNumPartitions, ReplicationFactor: s.OffsetsTopicReplicationFactor,
		NodeID: s.NodeID, Controller: b.ctrl, Hosted: b.parts, Peers: b.peers, Logger: b.log,
	}, group.Config{
		Clock:                 b.clock,
		Logger:                b.log.With("component", "group"),
		InitialRebalanceDelay: s.GroupInitialRebalanceDelay,
		InitialRebalanceAlone: s.GroupInitialRebalanceAlone,
		OffsetsRetention:      s.OffsetsRetention,
	})
	return &groupCoordinator{c: c, offsets: offsets}
}

// syncOwnership loads the partitions of __consumer_offsets this node now
// leads and unloads those it no longer leads.
func (gc *groupCoordinator) syncOwnership() { gc.offsets.SyncOwnership(gc.c) }

// Groups returns the group coordinator, for the metrics' group lag.
func (b *Broker) Groups() *group.Coordinator { return b.groups.c }

// close closes the coordinator (waiting joins and syncs are answered
// NOT_COORDINATOR).
func (gc *groupCoordinator) close() {
	gc.c.Close()
	gc.offsets.Close()
}

// ensureTopic creates __consumer_offsets (compacted, internal) unless it
// exists, and opens its partitions here.
func (gc *groupCoordinator) ensureTopic(ctx context.Context) (*controller.Topic, error) {
	return gc.offsets.Ensure(ctx)
}
