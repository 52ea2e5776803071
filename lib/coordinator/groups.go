package coordinator

import "github.com/mqproject/mq/lib/group"

// OffsetsTopic is where lib/group's coordinator keeps its records.
const OffsetsTopic = "__consumer_offsets"

// NewGroups starts lib/group's coordinator on OffsetsTopic, placed as cfg
// says (Name is set here, and Partitions is the count of an existing
// topic, fixed once it exists: cfg's only creates one) and configured as
// gc says (its Partitions and Store are set here). The coordinator loads
// the partitions this node leads once this node created the topic, and
// follows their leadership through the hosted partitions' applies
// (FollowLeadership). Close the coordinator, then the Topic.
func NewGroups(cfg Config, gc group.Config) (*group.Coordinator, *Topic) {
	if t := cfg.Controller.Image().Topics[OffsetsTopic]; t != nil {
		cfg.Partitions = int32(len(t.Partitions))
	}
	cfg.Name = OffsetsTopic
	var c *group.Coordinator
	var topic *Topic
	cfg.OnCreate = func() { topic.SyncOwnership(c) }
	topic = New(cfg)
	gc.Partitions, gc.Store = cfg.Partitions, topic
	c = group.New(gc)
	topic.FollowLeadership(c)
	return c, topic
}
