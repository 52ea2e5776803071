package config

import "slices"

// Setting documents one broker property or topic config for people: what
// mqd --help-config and its man page list. It is read from the same
// tables that validate values and answer DescribeConfigs, so the
// documentation cannot drift from what mqd accepts.
type Setting struct {
	Name string
	// Aliases are other names of the same property (broker.id for
	// node.id).
	Aliases []string
	// Default is the default as a person reads it: a value ("168"),
	// "empty", what it depends on for the properties whose default
	// comes from the environment (log.dirs), or which other property
	// applies when it is unset (log.retention.ms). For a topic config it
	// is the value of its broker property's default.
	Default string
	// BrokerDefault is, for a topic config, the broker property whose
	// value is its default (log.retention.ms for retention.ms); "" for
	// broker properties and for topic configs without one.
	BrokerDefault string
	// Dynamic is set when the setting may be altered while mqd runs
	// (mqctl config set): every topic config, and the broker properties
	// ValidateBrokerDynamicConfig accepts.
	Dynamic bool
	// Allowed says which values are valid ("an integer ≥ 1", "one of
	// os, interval, always"), as a refused value's error does.
	Allowed string
	Doc     string
}

// envDefaults describes the defaults that depend on the environment, as
// DefaultDataDir and DefaultListeners compute them.
var envDefaults = map[string]string{
	"log.dirs":  "$MQ_DATA_DIR, else $XDG_STATE_HOME/mq, else ~/.local/state/mq (/var/lib/mq without $HOME)",
	"listeners": "unix://$XDG_RUNTIME_DIR/mq/mqd.sock (else /run/mq/mqd.sock for root, else /tmp/mq-$UID/mqd.sock; $MQ_SOCKET overrides) and " + DefaultTCPListener,
}

// BrokerSettings documents every broker property, sorted by name, with
// its aliases folded into it.
func BrokerSettings() []Setting {
	var out []Setting
	for i := range brokerProperties {
		p := &brokerProperties[i]
		if p.alias != "" {
			continue
		}
		s := Setting{Name: p.name, Default: brokerDefaultText(p), Dynamic: p.dynamic, Allowed: p.kind.allowed, Doc: p.doc}
		for j := range brokerProperties {
			if brokerProperties[j].alias == p.name {
				s.Aliases = append(s.Aliases, brokerProperties[j].name)
			}
		}
		out = append(out, s)
	}
	return out
}

// brokerDefaultText is a broker property's default as Setting.Default
// describes it.
func brokerDefaultText(p *brokerProperty) string {
	switch {
	case p.envDefault:
		return envDefaults[p.name]
	case p.noDefault:
		// A unit of a duration group, unset: the group's member with a
		// default applies (log.retention.ms: log.retention.hours).
		for _, members := range groups {
			if slices.Contains(members, p.name) {
				for _, m := range members {
					if q := lookupBroker(m); !q.noDefault {
						return "unset: " + m + " applies"
					}
				}
			}
		}
		return "unset"
	case p.def == "":
		return "empty"
	}
	return p.def
}

// TopicSettings documents every topic config, sorted by name. Each one's
// Default is the value its broker property has by default.
func TopicSettings() []Setting {
	out := make([]Setting, 0, len(topicProperties))
	for i := range topicProperties {
		p := &topicProperties[i]
		def, _ := builtin.topicDefault(p)
		if def == "" {
			def = "empty"
		}
		out = append(out, Setting{Name: p.name, Default: def, BrokerDefault: p.broker, Dynamic: true, Allowed: p.kind.allowed, Doc: p.doc})
	}
	return out
}
