package broker

import (
	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
)

// Group configs (Kafka's GROUP config resource, type 32) are kept in the
// controller image (Image.GroupConfigs); lib/config defines them (share
// groups', with the broker settings group.share.* as their defaults, and
// mq's dead-letter topic), and configs.go describes and alters them.

// shareSettings resolves a share group's configs, and from them what its
// share-partitions use.
func (b *Broker) shareSettings(img *controller.Image, group string) (config.Group, queue.Settings) {
	settings := b.effectiveSettings(img)
	g := config.ResolveGroup(settings, img.GroupConfigs[group])
	return g, queue.Settings{
		Queue: queue.Config{
			LockDuration:         g.RecordLockDuration,
			DeliveryAttemptLimit: int(g.DeliveryCountLimit),
			MaxRecordLocks:       int(settings.SharePartitionMaxLocks),
		},
		Earliest:        g.Earliest,
		DeadLetterTopic: g.DeadLetterTopic,
	}
}
