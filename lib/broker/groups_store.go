package broker

import (
	"context"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/coordinator"
	"github.com/mqproject/mq/lib/group"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = coordinator.OffsetsTopic

// groupCoordinator is the group coordinator (lib/group) on this node,
// Config.Coordinators' Groups: its records are kept in the partitions of
// __consumer_offsets (lib/coordinator), and it coordinates the groups of
// the partitions this node leads, loaded and unloaded as their leadership
// moves.
type groupCoordinator struct {
	c       *group.Coordinator
	offsets *coordinator.Topic
}

// syncOwnership loads the partitions of __consumer_offsets this node now
// leads and unloads those it no longer leads.
func (gc *groupCoordinator) syncOwnership() { gc.offsets.SyncOwnership(gc.c) }

// ensureTopic creates __consumer_offsets (compacted, internal) unless it
// exists, and opens its partitions here.
func (gc *groupCoordinator) ensureTopic(ctx context.Context) (*controller.Topic, error) {
	return gc.offsets.Ensure(ctx)
}
