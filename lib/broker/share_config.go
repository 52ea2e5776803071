package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
)

// Group configs (Kafka's GROUP config resource, type 32) are kept in the
// controller image (Image.GroupConfigs); lib/config defines them (share
// groups', with the broker settings group.share.* as their defaults, and
// mq's dead-letter topic).

// groupConfigs describes a group's configs: its own values, else the
// defaults.
func (b *Broker) groupConfigs(img *controller.Image, group string) []describedConfig {
	var out []describedConfig
	for _, e := range config.DescribeGroup(b.effectiveSettings(img), img.GroupConfigs[group]) {
		out = append(out, describedConfig{Entry: e})
	}
	return out
}

// alterGroupConfigs validates and commits the change next makes to a
// group's configs.
func (b *Broker) alterGroupConfigs(ctx context.Context, img *controller.Image, group string, next alterFunc, validateOnly bool) error {
	if group == "" {
		return refuse(kerr.InvalidGroupID, "empty group id")
	}
	current := img.GroupConfigs[group]
	updated, err := next(current, entriesByName(config.DescribeGroup(b.effectiveSettings(img), nil)))
	if err != nil {
		return err
	}
	set, del := configDiff(current, updated)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := config.ValidateGroupConfig(k, set[k]); err != nil {
			return refuse(kerr.InvalidConfig, "%v", err)
		}
	}
	if validateOnly || len(set)+len(del) == 0 {
		return nil
	}
	if err := b.ctrl.AlterGroupConfigs(ctx, group, set, del); err != nil {
		return err
	}
	b.log.Info("altered group configs", "group", group, "set", set, "deleted", del)
	return nil
}

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
