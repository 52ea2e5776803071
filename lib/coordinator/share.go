package coordinator

import (
	"errors"

	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/queue"
)

// ShareStateTopic is where lib/queue's share-partitions keep their state:
// one record per change, keyed by group, topic ID and partition, valued
// with the share-partition's encoded queue.Snapshot. It is compacted, so
// the latest state of each share-partition is what stays.
const ShareStateTopic = "__share_group_state"

// ErrUnknownTopicID is a share-partition of a topic ID the image does not
// hold.
var ErrUnknownTopicID = errors.New("coordinator: unknown topic id")

// NewShares starts lib/queue's share-partition leader on ShareStateTopic,
// placed as cfg says (Name is set here), configured as lc says (its Store,
// and its Resolve: the partitions cfg.Hosted leads, read through
// partition.ShareSource, are set here). Its dead letters go where lc's
// DeadLetter writes them (DeadLetters.Write). Close the Topic.
func NewShares(cfg Config, lc queue.LeaderConfig) (*queue.Leader, *Topic) {
	cfg.Name = ShareStateTopic
	topic := New(cfg)
	lc.Store, lc.Resolve = topic, shareSources(cfg.Controller, cfg.Hosted)
	return queue.NewLeader(lc), topic
}

// shareSources returns lib/queue's lookup of the hosted leader of a
// partition named by topic ID, in ctrl's current image.
func shareSources(ctrl *controller.Controller, hosted *partition.Manager) func(queue.TP) (queue.Source, error) {
	return func(tp queue.TP) (queue.Source, error) {
		t := ctrl.Image().TopicsByID[controller.TopicID(tp.TopicID)]
		if t == nil {
			return nil, ErrUnknownTopicID
		}
		h, err := hosted.Leader(t, tp.Partition)
		if err != nil {
			return nil, err
		}
		return partition.ShareSource{Hosted: h}, nil
	}
}
