package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// Configs live in three layers, highest precedence first:
//
//   - topic overrides: Image().Topics[name].Configs (DYNAMIC_TOPIC_CONFIG);
//   - dynamic broker configs: Image().BrokerConfigs[node id]
//     (DYNAMIC_BROKER_CONFIG), then Image().BrokerConfigs[-1], the cluster
//     defaults (DYNAMIC_DEFAULT_BROKER_CONFIG);
//   - this node's settings (STATIC_BROKER_CONFIG when set, else
//     DEFAULT_CONFIG), as lib/config describes them.
//
// A topic config without an override takes its value from the broker
// config it is a synonym of (retention.ms from log.retention.ms).
// lib/config resolves values and sources (config.Broker.WithDynamic);
// this file adds the synonyms and the request handling.

// describedConfig is a config entry with the lower-precedence values it
// hides (DescribeConfigs synonyms), highest precedence first and starting
// with the entry's own value.
type describedConfig struct {
	config.Entry
	synonyms []configSynonym
}

type configSynonym struct {
	name   string
	value  *string
	source config.Source
}

// visibleValue is the value a client may see: none for sensitive configs.
func (d describedConfig) visibleValue() *string {
	if d.Sensitive {
		return nil
	}
	return d.Value
}

// addSynonym appends a lower layer's value, hidden when sensitive.
func (d *describedConfig) addSynonym(name string, value *string, source config.Source) {
	if d.Sensitive {
		value = nil
	}
	d.synonyms = append(d.synonyms, configSynonym{name: name, value: value, source: source})
}

// effectiveSettings returns this node's settings with the dynamic broker
// configs of img applied: the cluster defaults, then this node's own.
func (b *Broker) effectiveSettings(img *controller.Image) config.Broker {
	return b.settingsWith(img.BrokerConfigs[controller.ClusterDefaultBroker], img.BrokerConfigs[b.cfg.Settings.NodeID])
}

// settingsWith returns this node's settings with dynamic configs applied.
// A dynamic value that no longer applies (after an upgrade, say) is
// skipped with a log line.
func (b *Broker) settingsWith(clusterDefaults, perBroker map[string]string) config.Broker {
	s, err := b.cfg.Settings.WithDynamic(clusterDefaults, perBroker)
	if err != nil {
		b.log.Warn("ignoring dynamic broker configs", "err", err)
	}
	return s
}

// entriesByName indexes entries by config name.
func entriesByName(entries []config.Entry) map[string]config.Entry {
	m := make(map[string]config.Entry, len(entries))
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

// topicConfigs describes the effective configs of a topic with the given
// overrides. Values and sources come from config.DescribeTopic; the
// synonyms list every layer that sets the config, as Kafka does: the
// override, then the broker property giving its default (dynamic for this
// broker, dynamic cluster default, static or default).
func (b *Broker) topicConfigs(img *controller.Image, overrides map[string]string) []describedConfig {
	perBroker := img.BrokerConfigs[b.cfg.Settings.NodeID]
	clusterDefault := img.BrokerConfigs[controller.ClusterDefaultBroker]
	static := entriesByName(config.DescribeTopic(b.cfg.Settings, nil))
	entries := config.DescribeTopic(b.effectiveSettings(img), overrides)
	out := make([]describedConfig, 0, len(entries))
	for _, e := range entries {
		d := describedConfig{Entry: e}
		if v, ok := overrides[e.Name]; ok {
			d.addSynonym(e.Name, &v, config.SourceDynamicTopic)
		}
		brokerName := config.BrokerSynonym(e.Name)
		if brokerName == "" {
			brokerName = e.Name
		}
		if v, ok := perBroker[brokerName]; ok {
			d.addSynonym(brokerName, &v, config.SourceDynamicBroker)
		}
		if v, ok := clusterDefault[brokerName]; ok {
			d.addSynonym(brokerName, &v, config.SourceDynamicDefaultBroker)
		}
		if s, ok := static[e.Name]; ok {
			d.addSynonym(brokerName, s.Value, s.Source)
		}
		out = append(out, d)
	}
	return out
}

// brokerConfigs describes the configs of broker resource id: this node, or
// the cluster defaults (controller.ClusterDefaultBroker), which show only the dynamic
// defaults that are set, as in Kafka.
func (b *Broker) brokerConfigs(img *controller.Image, id int32) []describedConfig {
	clusterDefault := img.BrokerConfigs[controller.ClusterDefaultBroker]
	if id == controller.ClusterDefaultBroker {
		var out []describedConfig
		for _, e := range config.DescribeBrokerConfigs(b.cfg.Settings, clusterDefault, nil) {
			v, ok := clusterDefault[e.Name]
			if !ok {
				continue
			}
			d := describedConfig{Entry: e}
			d.addSynonym(e.Name, &v, config.SourceDynamicDefaultBroker)
			out = append(out, d)
		}
		return out
	}
	perBroker := img.BrokerConfigs[id]
	static := entriesByName(config.DescribeBroker(b.cfg.Settings, nil))
	entries := config.DescribeBrokerConfigs(b.cfg.Settings, clusterDefault, perBroker)
	out := make([]describedConfig, 0, len(entries))
	for _, e := range entries {
		d := describedConfig{Entry: e}
		if v, ok := perBroker[e.Name]; ok {
			d.addSynonym(e.Name, &v, config.SourceDynamicBroker)
		}
		if v, ok := clusterDefault[e.Name]; ok {
			d.addSynonym(e.Name, &v, config.SourceDynamicDefaultBroker)
		}
		if s, ok := static[e.Name]; ok {
			d.addSynonym(e.Name, s.Value, s.Source)
		}
		out = append(out, d)
	}
	return out
}

// brokerResource parses the name of a broker config resource: a node ID,
// or "" for the cluster-wide defaults.
func brokerResource(name string) (int32, error) {
	if name == "" {
		return controller.ClusterDefaultBroker, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return 0, refuse(kerr.InvalidRequest, "broker resource name %q is not a node id (or \"\" for the cluster default)", name)
	}
	return int32(id), nil
}

// unsupportedResource refuses a config resource type this broker has no
// configs for: broker loggers, client metrics, unknown types.
func unsupportedResource(t kmsg.ConfigResourceType) error {
	if t == kmsg.ConfigResourceTypeBrokerLogger {
		return refuse(kerr.InvalidRequest, "broker logger configs are not supported; set the log level with --log-level")
	}
	return refuse(kerr.InvalidRequest, "unsupported config resource type %d", int8(t))
}

// describeResource returns the configs of one DescribeConfigs resource.
func (b *Broker) describeResource(img *controller.Image, t kmsg.ConfigResourceType, name string) ([]describedConfig, error) {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return nil, err
		}
		topic := img.Topics[name]
		if topic == nil {
			return nil, refuse(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		return b.topicConfigs(img, topic.Configs), nil
	case kmsg.ConfigResourceTypeBroker:
		id, err := brokerResource(name)
		if err != nil {
			return nil, err
		}
		if id != controller.ClusterDefaultBroker && id != b.cfg.Settings.NodeID {
			// Only a broker knows its static settings; clients send
			// broker resources to the broker they name.
			return nil, refuse(kerr.InvalidRequest, "this is node %d; ask node %d for its configs", b.cfg.Settings.NodeID, id)
		}
		return b.brokerConfigs(img, id), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, refuse(kerr.InvalidGroupID, "empty group id")
		}
		return b.groupConfigs(img, name), nil
	default:
		return nil, unsupportedResource(t)
	}
}

// handleDescribeConfigs answers DescribeConfigs (key 32).
func (b *Broker) handleDescribeConfigs(_ context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := b.ctrl.Image()
	for _, res := range r.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		entries, err := b.describeResource(img, res.ResourceType, res.ResourceName)
		rr.ErrorCode, rr.ErrorMessage = kafkaError(err)
		for _, e := range entries {
			// A null or empty list of names asks for every config.
			if len(res.ConfigNames) > 0 && !slices.Contains(res.ConfigNames, e.Name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = e.Name
			c.Value = e.visibleValue()
			c.ReadOnly = e.ReadOnly
			c.IsDefault = e.Source == config.SourceDefault
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsSensitive = e.Sensitive
			c.ConfigType = kmsg.ConfigType(e.Type)
			if r.IncludeDocumentation && e.Doc != "" {
				doc := e.Doc
				c.Documentation = &doc
			}
			if r.IncludeSynonyms {
				for _, s := range e.synonyms {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					cs.Name, cs.Value, cs.Source = s.name, s.value, kmsg.ConfigSource(s.source)
					c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
				}
			}
			rr.Configs = append(rr.Configs, c)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return reply(resp)
}

// resourceKey identifies a config resource within one request.
type resourceKey struct {
	t    kmsg.ConfigResourceType
	name string
}

func resourceLabel(k resourceKey) string { return fmt.Sprintf("resource %q", k.name) }

// alterFunc computes a resource's new dynamic configs from its current
// ones. base describes the values the resource has without its own
// dynamic configs (what APPEND starts from when no value is set).
type alterFunc func(current map[string]string, base map[string]config.Entry) (map[string]string, error)

// alterResource validates the change next makes to one resource and,
// unless validateOnly, commits it.
func (b *Broker) alterResource(ctx context.Context, t kmsg.ConfigResourceType, name string, next alterFunc, validateOnly bool) error {
	img := b.ctrl.Image()
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return err
		}
		topic := img.Topics[name]
		if topic == nil {
			return refuse(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		settings := b.effectiveSettings(img)
		updated, err := next(topic.Configs, entriesByName(config.DescribeTopic(settings, nil)))
		if err != nil {
			return err
		}
		set, del := configDiff(topic.Configs, updated)
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if err := config.ValidateTopicConfig(k, set[k]); err != nil {
				return refuse(kerr.InvalidConfig, "%v", err)
			}
		}
		if _, err := config.ResolveTopic(settings, updated); err != nil {
			return refuse(kerr.InvalidConfig, "%v", err)
		}
		if validateOnly || len(set)+len(del) == 0 {
			return nil
		}
		if err := b.ctrl.AlterTopicConfigs(ctx, name, set, del); err != nil {
			return err
		}
		b.log.Info("altered topic configs", "topic", name, "set", set, "deleted", del)
		b.syncData()
		return nil
	case kmsg.ConfigResourceTypeBroker:
		id, err := brokerResource(name)
		if err != nil {
			return err
		}
		// Without its own dynamic configs, a broker has the cluster
		// defaults on top of its settings; the cluster defaults have the
		// settings alone.
		baseSettings := b.cfg.Settings
		if id != controller.ClusterDefaultBroker {
			baseSettings = b.settingsWith(img.BrokerConfigs[controller.ClusterDefaultBroker], nil)
		}
		current := img.BrokerConfigs[id]
		updated, err := next(current, entriesByName(config.DescribeBroker(baseSettings, nil)))
		if err != nil {
			return err
		}
		set, del := configDiff(current, updated)
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if err := config.ValidateBrokerDynamicConfig(k, set[k]); err != nil {
				return refuse(kerr.InvalidConfig, "%v", err)
			}
		}
		if validateOnly || len(set)+len(del) == 0 {
			return nil
		}
		if err := b.ctrl.AlterBrokerConfigs(ctx, id, set, del); err != nil {
			return err
		}
		b.log.Info("altered broker configs", "broker", name, "set", set, "deleted", del)
		b.syncData()
		return nil
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.alterGroupConfigs(ctx, img, name, next, validateOnly)
	default:
		return unsupportedResource(t)
	}
}

// configDiff returns what turns old into updated: the keys to set (new or
// changed) and the keys to delete, sorted.
func configDiff(old, updated map[string]string) (set map[string]string, del []string) {
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

// handleAlterConfigs answers the legacy AlterConfigs (key 33): the configs
// given for a resource replace all of its dynamic configs; those not given
// are deleted.
func (b *Broker) handleAlterConfigs(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	ctx, cancel := withTimeout(ctx, 0)
	defer cancel()

	key := func(res *kmsg.AlterConfigsRequestResource) resourceKey {
		return resourceKey{res.ResourceType, res.ResourceName}
	}
	eachDistinct(r.Resources, key, resourceLabel, func(res *kmsg.AlterConfigsRequestResource, err error) {
		if err == nil {
			replace := func(map[string]string, map[string]config.Entry) (map[string]string, error) {
				out := make(map[string]string, len(res.Configs))
				for _, c := range res.Configs {
					if _, ok := out[c.Name]; ok {
						return nil, refuse(kerr.InvalidRequest, "config %q is given more than once", c.Name)
					}
					if c.Value == nil {
						return nil, refuse(kerr.InvalidRequest, "null value not supported for config %q", c.Name)
					}
					out[c.Name] = *c.Value
				}
				return out, nil
			}
			err = b.alterResource(ctx, res.ResourceType, res.ResourceName, replace, r.ValidateOnly)
		}
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = kafkaError(err)
		resp.Resources = append(resp.Resources, rr)
	})
	return reply(resp)
}

// handleIncrementalAlterConfigs answers IncrementalAlterConfigs (key 44):
// SET and DELETE single configs, APPEND to and SUBTRACT from list-valued
// ones (cleanup.policy).
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := withTimeout(ctx, 0)
	defer cancel()

	key := func(res *kmsg.IncrementalAlterConfigsRequestResource) resourceKey {
		return resourceKey{res.ResourceType, res.ResourceName}
	}
	eachDistinct(r.Resources, key, resourceLabel, func(res *kmsg.IncrementalAlterConfigsRequestResource, err error) {
		if err == nil {
			err = checkIncrementalOps(res.Configs)
		}
		if err == nil {
			apply := func(current map[string]string, base map[string]config.Entry) (map[string]string, error) {
				return applyIncrementalOps(current, base, res.Configs)
			}
			err = b.alterResource(ctx, res.ResourceType, res.ResourceName, apply, r.ValidateOnly)
		}
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = kafkaError(err)
		resp.Resources = append(resp.Resources, rr)
	})
	return reply(resp)
}

// checkIncrementalOps refuses malformed operations: a config named twice,
// an unknown operation, a null value for anything but DELETE.
func checkIncrementalOps(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return refuse(kerr.InvalidRequest, "config %q is altered more than once", op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if op.Value == nil {
				return refuse(kerr.InvalidRequest, "null value not supported for config %q", op.Name)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
		default:
			return refuse(kerr.InvalidRequest, "unknown operation %d for config %q", int8(op.Op), op.Name)
		}
	}
	return nil
}

// applyIncrementalOps returns current with ops applied. APPEND adds the
// items of a comma-separated value that the list lacks; SUBTRACT removes
// them; both start from the resource's effective value (base when it has
// no value of its own) and apply only to list-valued configs.
func applyIncrementalOps(current map[string]string, base map[string]config.Entry, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			out[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(out, op.Name)
		default: // APPEND, SUBTRACT: checkIncrementalOps allows nothing else
			e, ok := base[op.Name]
			if !ok {
				return nil, refuse(kerr.InvalidConfig, "unknown config %q", op.Name)
			}
			if e.Type != config.TypeList {
				return nil, refuse(kerr.InvalidConfig, "cannot %s config %q: it is not a list", opName(op.Op), op.Name)
			}
			value, ok := out[op.Name]
			if !ok && e.Value != nil {
				value = *e.Value
			}
			items := splitList(value)
			for _, item := range splitList(*op.Value) {
				if op.Op == kmsg.IncrementalAlterConfigOpAppend {
					if !slices.Contains(items, item) {
						items = append(items, item)
					}
				} else {
					items = slices.DeleteFunc(items, func(s string) bool { return s == item })
				}
			}
			out[op.Name] = strings.Join(items, ",")
		}
	}
	return out, nil
}

func opName(op kmsg.IncrementalAlterConfigOp) string {
	if op == kmsg.IncrementalAlterConfigOpAppend {
		return "APPEND to"
	}
	return "SUBTRACT from"
}

// splitList splits a list-valued config ("compact, delete") into its
// items, without blanks.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
