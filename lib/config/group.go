package config

import (
	"fmt"
	"sort"
	"time"
)

// Group is a share group's effective configuration (Kafka's GROUP config
// resource, KIP-932): its own values on top of the broker's defaults.
// Field comments name the group config; the broker property giving its
// default is in parentheses.
type Group struct {
	// Earliest: share.auto.offset.reset is earliest, not latest.
	Earliest           bool
	RecordLockDuration time.Duration // share.record.lock.duration.ms (group.share.record.lock.duration.ms)
	DeliveryCountLimit int32         // share.delivery.count.limit (group.share.delivery.attempt.limit)
	SessionTimeout     time.Duration // share.session.timeout.ms (group.share.session.timeout.ms)
	HeartbeatInterval  time.Duration // share.heartbeat.interval.ms (group.share.heartbeat.interval.ms)
	// DeadLetterTopic is errors.deadletterqueue.topic.name (mq's own), ""
	// for none.
	DeadLetterTopic string
}

// SourceGroupConfig is Kafka's GROUP_CONFIG source of DescribeConfigs: a
// group's own value.
const SourceGroupConfig Source = 8

// groupProperty describes one group config, as topicProperty does.
type groupProperty struct {
	name   string
	kind   kind
	broker string // the broker property giving the default; "" for none
	def    string // the default when broker is ""
	doc    string
	set    func(g *Group, v string)
}

// groupProperties is every group config mq knows, sorted by name.
var groupProperties = func() []groupProperty {
	ps := []groupProperty{
		{name: "share.auto.offset.reset", kind: oneOf("earliest", "latest"), def: "latest",
			doc: "Where a share group starts reading a partition it has no state for: earliest (the log start) or latest (the high-water mark).",
			set: func(g *Group, v string) { g.Earliest = v == "earliest" }},
		{name: "share.record.lock.duration.ms", kind: intBetween(100, 3600000), broker: "group.share.record.lock.duration.ms",
			doc: "How long a member holds the records it acquired before they become available to others.",
			set: func(g *Group, v string) { g.RecordLockDuration = ms(v) }},
		{name: "share.delivery.count.limit", kind: intBetween(1, 100), broker: "group.share.delivery.attempt.limit",
			doc: "How many times a record is delivered before it is archived (and dead-lettered).",
			set: func(g *Group, v string) { g.DeliveryCountLimit = i32(v) }},
		{name: "share.session.timeout.ms", kind: intBetween(1000, 3600000), broker: "group.share.session.timeout.ms",
			doc: "A member that has not heartbeated for this long leaves the group.",
			set: func(g *Group, v string) { g.SessionTimeout = ms(v) }},
		{name: "share.heartbeat.interval.ms", kind: intBetween(100, 3600000), broker: "group.share.heartbeat.interval.ms",
			doc: "How often members heartbeat.",
			set: func(g *Group, v string) { g.HeartbeatInterval = ms(v) }},
		{name: "errors.deadletterqueue.topic.name", kind: optionalTopicName,
			doc: "The dead-letter topic of a share group (mq): a record rejected, or delivered share.delivery.count.limit times, is appended there before it is archived. Empty: none.",
			set: func(g *Group, v string) { g.DeadLetterTopic = v }},
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}()

// MaxTopicNameLength is Kafka's limit on the length of a topic name.
const MaxTopicNameLength = 249

// CheckTopicName applies Kafka's rules to a topic name, 1 to 249
// characters from [a-zA-Z0-9._-] and not "." or "..", and says what is
// wrong. Names mixing '.' and '_' are accepted without a warning: Kafka
// warns because its metric names confuse the two, mq's do not.
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be %q", name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("topic name is %d characters long, the limit is %d", len(name), MaxTopicNameLength)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("topic name %q has a character outside [a-zA-Z0-9._-]", name)
		}
	}
	return nil
}

// optionalTopicName is a topic name or "" for none.
var optionalTopicName = kind{typ: TypeString, allowed: `"" or a topic name: 1 to 249 of [a-zA-Z0-9._-], not "." or ".."`,
	norm: func(v string) (string, bool) { return v, v == "" || CheckTopicName(v) == nil }}

func lookupGroup(name string) *groupProperty {
	i := sort.Search(len(groupProperties), func(i int) bool { return groupProperties[i].name >= name })
	if i == len(groupProperties) || groupProperties[i].name != name {
		return nil
	}
	return &groupProperties[i]
}

// groupDefault is a group config's value when the group does not set it,
// and where that value came from.
func (b *Broker) groupDefault(p *groupProperty) (string, Source) {
	if p.broker == "" {
		return p.def, SourceDefault
	}
	return b.effective(p.broker), b.source(p.broker, true)
}

// ValidateGroupConfig checks one group config as ValidateTopicConfig
// checks a topic's.
func ValidateGroupConfig(name, value string) error {
	p := lookupGroup(name)
	if p == nil {
		return &Error{Name: name, Err: ErrUnknownConfig, Suggestion: closest(name, groupNames())}
	}
	_, err := p.kind.check(name, value)
	return err
}

// ResolveGroup is a group's effective configuration: b's defaults with the
// group's own values applied. Invalid or unknown values, which
// ValidateGroupConfig keeps out of the image, are ignored.
func ResolveGroup(b Broker, own map[string]string) Group {
	var g Group
	for i := range groupProperties {
		p := &groupProperties[i]
		v, _ := b.groupDefault(p)
		if o, ok := own[p.name]; ok {
			if n, err := p.kind.check(p.name, o); err == nil {
				v = n
			}
		}
		p.set(&g, v)
	}
	return g
}

// DescribeGroup lists every group config, sorted by name, as
// DescribeConfigs shows it for a group with these values of its own:
// those are GROUP_CONFIG, the rest the value and source of the broker
// property giving the default, or DEFAULT_CONFIG.
func DescribeGroup(b Broker, own map[string]string) []Entry {
	entries := make([]Entry, 0, len(groupProperties))
	for i := range groupProperties {
		p := &groupProperties[i]
		e := Entry{Name: p.name, Type: p.kind.typ, Doc: p.doc}
		if v, ok := own[p.name]; ok {
			e.Value, e.Source = &v, SourceGroupConfig
		} else {
			v, src := b.groupDefault(p)
			e.Value, e.Source = &v, src
		}
		entries = append(entries, e)
	}
	return entries
}

func groupNames() []string {
	names := make([]string, len(groupProperties))
	for i, p := range groupProperties {
		names[i] = p.name
	}
	return names
}
