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
	return start(cfg, OffsetsTopic, func(partitions int32, t *Topic) *group.Coordinator {
		gc.Partitions, gc.Store = partitions, t
		return group.New(gc)
	})
}

// start places the coordinator that build makes on the internal topic
// name, placed as cfg says (Partitions is the count of an existing topic,
// fixed once it exists): it loads the partitions this node leads once
// this node created the topic, and follows their leadership.
func start[C Owner](cfg Config, name string, build func(partitions int32, t *Topic) C) (C, *Topic) {
	if t := cfg.Controller.Image().Topics[name]; t != nil {
		cfg.Partitions = int32(len(t.Partitions))
	}
	cfg.Name = name
	var c C
	var topic *Topic
	cfg.OnCreate = func() { topic.SyncOwnership(c) }
	topic = New(cfg)
	c = build(cfg.Partitions, topic)
	topic.FollowLeadership(c)
	return c, topic
}
