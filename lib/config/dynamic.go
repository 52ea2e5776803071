package config

import (
	"maps"
	"slices"
)

// Configs live in three layers, highest precedence first:
//
//   - topic overrides (DYNAMIC_TOPIC_CONFIG) and a group's own values
//     (GROUP_CONFIG);
//   - dynamic broker configs: this broker's (DYNAMIC_BROKER_CONFIG), then
//     the cluster defaults (DYNAMIC_DEFAULT_BROKER_CONFIG), both kept in
//     the cluster metadata;
//   - this node's settings (STATIC_BROKER_CONFIG when set, else
//     DEFAULT_CONFIG).
//
// A topic config without an override takes its value from the broker
// config it is a synonym of (retention.ms from log.retention.ms).
// Layers holds them for one node; its Describe methods list every config
// with the lower layers' values it hides (DescribeConfigs synonyms).

// Layers are one node's broker configs by layer.
type Layers struct {
	// Static is the node's settings: config file, MQ_* environment,
	// flags, defaults.
	Static Broker
	// Effective is Static with ClusterDefaults then PerBroker applied
	// (Static.WithDynamic), computed by the caller, which reports the
	// dynamic values it had to skip.
	Effective Broker
	// ClusterDefaults are the dynamic configs of every broker.
	ClusterDefaults map[string]string
	// PerBroker are the dynamic configs of this node.
	PerBroker map[string]string
}

// Synonym is one layer's value of a config, as DescribeConfigs lists it.
type Synonym struct {
	Name   string
	Value  *string // nil for a sensitive config
	Source Source
}

// Described is a config entry with the values of every layer that sets
// it, highest precedence first and starting with the entry's own value.
type Described struct {
	Entry
	Synonyms []Synonym
}

// VisibleValue is the value a client may see: none for sensitive configs.
func (d Described) VisibleValue() *string {
	if d.Sensitive {
		return nil
	}
	return d.Value
}

// addSynonym appends a lower layer's value, hidden when sensitive.
func (d *Described) addSynonym(name string, value *string, source Source) {
	if d.Sensitive {
		value = nil
	}
	d.Synonyms = append(d.Synonyms, Synonym{Name: name, Value: value, Source: source})
}

// EntriesByName indexes entries by config name.
func EntriesByName(entries []Entry) map[string]Entry {
	m := make(map[string]Entry, len(entries))
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

// DescribeTopic describes the effective configs of a topic with the
// given overrides. Values and sources come from DescribeTopic over
// l.Effective; the synonyms list every layer that sets the config, as
// Kafka does: the override, then the broker property giving its default
// (dynamic for this broker, dynamic cluster default, static or default).
func (l Layers) DescribeTopic(overrides map[string]string) []Described {
	static := EntriesByName(DescribeTopic(l.Static, nil))
	entries := DescribeTopic(l.Effective, overrides)
	out := make([]Described, 0, len(entries))
	for _, e := range entries {
		d := Described{Entry: e}
		if v, ok := overrides[e.Name]; ok {
			d.addSynonym(e.Name, &v, SourceDynamicTopic)
		}
		brokerName := BrokerSynonym(e.Name)
		if brokerName == "" {
			brokerName = e.Name
		}
		if v, ok := l.PerBroker[brokerName]; ok {
			d.addSynonym(brokerName, &v, SourceDynamicBroker)
		}
		if v, ok := l.ClusterDefaults[brokerName]; ok {
			d.addSynonym(brokerName, &v, SourceDynamicDefaultBroker)
		}
		if s, ok := static[e.Name]; ok {
			d.addSynonym(brokerName, s.Value, s.Source)
		}
		out = append(out, d)
	}
	return out
}

// DescribeBroker describes the configs of this node's broker resource:
// every property with its synonyms (this broker's dynamic value, the
// dynamic cluster default, static or default).
func (l Layers) DescribeBroker() []Described {
	static := EntriesByName(DescribeBroker(l.Static, nil))
	entries := DescribeBrokerConfigs(l.Static, l.ClusterDefaults, l.PerBroker)
	out := make([]Described, 0, len(entries))
	for _, e := range entries {
		d := Described{Entry: e}
		if v, ok := l.PerBroker[e.Name]; ok {
			d.addSynonym(e.Name, &v, SourceDynamicBroker)
		}
		if v, ok := l.ClusterDefaults[e.Name]; ok {
			d.addSynonym(e.Name, &v, SourceDynamicDefaultBroker)
		}
		if s, ok := static[e.Name]; ok {
			d.addSynonym(e.Name, s.Value, s.Source)
		}
		out = append(out, d)
	}
	return out
}

// DescribeClusterDefaults describes the cluster-default broker resource:
// only the dynamic defaults that are set, as in Kafka.
func (l Layers) DescribeClusterDefaults() []Described {
	var out []Described
	for _, e := range DescribeBrokerConfigs(l.Static, l.ClusterDefaults, nil) {
		v, ok := l.ClusterDefaults[e.Name]
		if !ok {
			continue
		}
		d := Described{Entry: e}
		d.addSynonym(e.Name, &v, SourceDynamicDefaultBroker)
		out = append(out, d)
	}
	return out
}

// DescribeGroup describes a group's configs: its own values, else the
// defaults of l.Effective. Group configs list no synonyms.
func (l Layers) DescribeGroup(own map[string]string) []Described {
	var out []Described
	for _, e := range DescribeGroup(l.Effective, own) {
		out = append(out, Described{Entry: e})
	}
	return out
}

// Diff returns what turns old into updated: the keys to set (new or
// changed) and the keys to delete, sorted.
func Diff(old, updated map[string]string) (set map[string]string, del []string) {
	set = map[string]string{}
	for k, v := range updated {
		if ov, ok := old[k]; !ok || ov != v {
			set[k] = v
		}
	}
	for k := range old {
		if _, ok := updated[k]; !ok {
			del = append(del, k)
		}
	}
	slices.Sort(del)
	return set, del
}

// AlterTopic computes and validates the change alter makes to a topic's
// overrides (current), over the topic defaults of l.Effective: the
// overrides to set and to delete. Each value set must be valid
// (ValidateTopicConfig), and the result must resolve (ResolveTopic).
func (l Layers) AlterTopic(current map[string]string, alter Alteration) (set map[string]string, del []string, err error) {
	updated, set, del, err := alterChecked(current, DescribeTopic(l.Effective, nil), alter, ValidateTopicConfig)
	if err != nil {
		return nil, nil, err
	}
	if _, err := ResolveTopic(l.Effective, updated); err != nil {
		return nil, nil, err
	}
	return set, del, nil
}

// AlterBroker computes and validates the change alter makes to the
// dynamic configs (current) of a broker resource whose settings without
// them are base: the Layers' node with the cluster defaults for a node,
// the static settings alone for the cluster defaults. Each value set must
// be valid and dynamic (ValidateBrokerDynamicConfig).
func AlterBroker(base Broker, current map[string]string, alter Alteration) (set map[string]string, del []string, err error) {
	_, set, del, err = alterChecked(current, DescribeBroker(base, nil), alter, ValidateBrokerDynamicConfig)
	return set, del, err
}

// AlterGroup computes and validates the change alter makes to a group's
// own configs (current), over the defaults of l.Effective
// (ValidateGroupConfig).
func (l Layers) AlterGroup(current map[string]string, alter Alteration) (set map[string]string, del []string, err error) {
	_, set, del, err = alterChecked(current, DescribeGroup(l.Effective, nil), alter, ValidateGroupConfig)
	return set, del, err
}

// alterChecked applies alter to current over base and returns the
// result and the configs to set and delete, each value set checked by
// validate, in name order.
func alterChecked(current map[string]string, base []Entry, alter Alteration, validate func(name, value string) error) (updated, set map[string]string, del []string, err error) {
	updated, err = alter(current, EntriesByName(base))
	if err != nil {
		return nil, nil, nil, err
	}
	set, del = Diff(current, updated)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := validate(k, set[k]); err != nil {
			return nil, nil, nil, err
		}
	}
	return updated, set, del, nil
}
