package coordinator

import (
	"slices"
	"sync"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/group"
)

// OffsetsTopic is where lib/group's coordinator keeps its records.
const OffsetsTopic = "__consumer_offsets"

// NewGroups starts lib/group's coordinator on OffsetsTopic, placed as cfg
// says (Name is set here, and Partitions is the count of an existing
// topic, fixed once it exists: cfg's only creates one) and configured as
// gc says (its Partitions and Store are set here). The coordinator loads
// the partitions this node leads once this node created the topic, and
// follows their leadership through the hosted partitions' applies
// (FollowLeadership), and the deletions of topics: the groups it has
// loaded lose their offsets of a topic deleted (group.DeleteTopicOffsets).
// Close the coordinator, then the Topic.
func NewGroups(cfg Config, gc group.Config) (*group.Coordinator, *Topic) {
	c, topic := start(cfg, OffsetsTopic, func(partitions int32, t *Topic) *group.Coordinator {
		gc.Partitions, gc.Store = partitions, t
		return group.New(gc)
	})
	d := &topicDeletions{ctrl: cfg.Controller}
	cfg.Hosted.AfterApply(func() { c.DeleteTopicOffsets(d.deleted()) })
	return c, topic
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

// topicDeletions finds the topics deleted between the images it is
// shown: a name gone, or held by a new topic (deleted and created again
// in between), is a deletion.
type topicDeletions struct {
	ctrl *controller.Controller

	mu   sync.Mutex
	seen map[string]controller.TopicID // nil until the first image
}

// deleted returns the topics deleted since the image it saw last; none
// the first time.
func (d *topicDeletions) deleted() []string {
	img := d.ctrl.Image()
	d.mu.Lock()
	defer d.mu.Unlock()
	var gone []string
	for name, id := range d.seen {
		if t := img.Topics[name]; t == nil || t.ID != id {
			gone = append(gone, name)
		}
	}
	d.seen = make(map[string]controller.TopicID, len(img.Topics))
	for name, t := range img.Topics {
		d.seen[name] = t.ID
	}
	slices.Sort(gone)
	return gone
}
