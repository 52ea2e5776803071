package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/queue"
)

// Group configs (Kafka's GROUP config resource, type 32) are kept in the
// controller image (Image.GroupConfigs). The ones here are share groups':
// Kafka's names, with the broker settings group.share.* as their defaults,
// and mq's dead-letter topic.
type groupConfigDef struct {
	name string
	// setting is the broker setting giving the default ("" for none).
	setting string
	def     func(s config.Broker) string
	check   func(v string) error
	typ     int8
	doc     string
}

func intIn(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer from %d to %d", lo, hi)
		}
		return nil
	}
}

var groupConfigDefs = []groupConfigDef{
	{name: "share.auto.offset.reset", def: func(config.Broker) string { return "latest" }, typ: config.TypeString,
		check: func(v string) error {
			if v != "earliest" && v != "latest" {
				return fmt.Errorf("must be earliest or latest")
			}
			return nil
		},
		doc: "Where a share group starts reading a partition it has no state for: earliest (the log start) or latest (the high-water mark)."},
	{name: "share.record.lock.duration.ms", setting: "group.share.record.lock.duration.ms", typ: config.TypeInt,
		def:   func(s config.Broker) string { return fmtMillis(s.ShareRecordLockDuration) },
		check: intIn(100, 3600000), doc: "How long a member holds the records it acquired before they become available to others."},
	{name: "share.delivery.count.limit", setting: "group.share.delivery.attempt.limit", typ: config.TypeInt,
		def:   func(s config.Broker) string { return strconv.Itoa(int(s.ShareDeliveryAttemptLimit)) },
		check: intIn(1, 100), doc: "How many times a record is delivered before it is archived (and dead-lettered)."},
	{name: "share.session.timeout.ms", setting: "group.share.session.timeout.ms", typ: config.TypeInt,
		def:   func(s config.Broker) string { return fmtMillis(s.ShareSessionTimeout) },
		check: intIn(1000, 3600000), doc: "A member that has not heartbeated for this long leaves the group."},
	{name: "share.heartbeat.interval.ms", setting: "group.share.heartbeat.interval.ms", typ: config.TypeInt,
		def:   func(s config.Broker) string { return fmtMillis(s.ShareHeartbeatInterval) },
		check: intIn(100, 3600000), doc: "How often members heartbeat."},
	{name: "errors.deadletterqueue.topic.name", def: func(config.Broker) string { return "" }, typ: config.TypeString,
		check: func(v string) error {
			if v == "" {
				return nil
			}
			return validateTopicName(v)
		},
		doc: "The dead-letter topic of a share group (mq): a record rejected, or delivered share.delivery.count.limit times, is appended there before it is archived. Empty: none."},
}

// sourceGroupConfig is Kafka's GROUP_CONFIG source of DescribeConfigs.
const sourceGroupConfig config.Source = 8

func fmtMillis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func groupConfigDefFor(name string) *groupConfigDef {
	for i := range groupConfigDefs {
		if groupConfigDefs[i].name == name {
			return &groupConfigDefs[i]
		}
	}
	return nil
}

// groupConfigs describes a group's configs: its own values, else the
// defaults.
func (b *Broker) groupConfigs(img *controller.Image, group string) []describedConfig {
	settings := b.effectiveSettings(img)
	own := img.GroupConfigs[group]
	var out []describedConfig
	for _, d := range groupConfigDefs {
		def := d.def(settings)
		e := describedConfig{Entry: config.Entry{Name: d.name, Value: &def, Source: config.SourceDefault, Type: d.typ, Doc: d.doc}}
		if v, ok := own[d.name]; ok {
			e.Value = &v
			e.Source = sourceGroupConfig
		}
		out = append(out, e)
	}
	return out
}

// alterGroupConfigs validates and commits the change next makes to a
// group's configs.
func (b *Broker) alterGroupConfigs(ctx context.Context, img *controller.Image, group string, next alterFunc, validateOnly bool) error {
	if group == "" {
		return refuse(kerr.InvalidGroupID, "empty group id")
	}
	base := map[string]config.Entry{}
	for _, e := range b.groupConfigs(img, "") {
		base[e.Name] = e.Entry
	}
	current := img.GroupConfigs[group]
	updated, err := next(current, base)
	if err != nil {
		return err
	}
	set, del := configDiff(current, updated)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		d := groupConfigDefFor(k)
		if d == nil {
			return refuse(kerr.InvalidConfig, "unknown group config %q", k)
		}
		if err := d.check(set[k]); err != nil {
			return refuse(kerr.InvalidConfig, "%s=%q: %v", k, set[k], err)
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

// shareGroupSettings are a share group's configs, resolved: what its
// share-partitions use, and its members' session.
type shareGroupSettings struct {
	queue          queue.Settings
	sessionTimeout time.Duration
	heartbeat      time.Duration
}

func (b *Broker) shareSettings(img *controller.Image, group string) shareGroupSettings {
	v := map[string]string{}
	for _, e := range b.groupConfigs(img, group) {
		v[e.Name] = *e.Value
	}
	ms := func(name string) time.Duration {
		n, _ := strconv.ParseInt(v[name], 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	limit, _ := strconv.Atoi(v["share.delivery.count.limit"])
	settings := b.effectiveSettings(img)
	return shareGroupSettings{
		queue: queue.Settings{
			Queue: queue.Config{
				LockDuration:         ms("share.record.lock.duration.ms"),
				DeliveryAttemptLimit: limit,
				MaxRecordLocks:       int(settings.SharePartitionMaxLocks),
			},
			Earliest:        v["share.auto.offset.reset"] == "earliest",
			DeadLetterTopic: v["errors.deadletterqueue.topic.name"],
		},
		sessionTimeout: ms("share.session.timeout.ms"),
		heartbeat:      ms("share.heartbeat.interval.ms"),
	}
}
