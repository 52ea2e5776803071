package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/server"
)

// Config semantics are lib/config's (config.Layers: the layers, their
// synonyms, the alterations and their checks); this file maps
// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs to them and
// commits the changes through the controller, which keeps the dynamic
// layers in the image: Topics[name].Configs, BrokerConfigs[node id],
// BrokerConfigs[controller.ClusterDefaultBroker] and GroupConfigs[group].

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

// staticLayers are this node's config layers in img, without the
// effective settings (which broker resources do not need).
func (b *Broker) staticLayers(img *controller.Image) config.Layers {
	return config.Layers{
		Static:          b.cfg.Settings,
		ClusterDefaults: img.BrokerConfigs[controller.ClusterDefaultBroker],
		PerBroker:       img.BrokerConfigs[b.cfg.Settings.NodeID],
	}
}

// layers are this node's config layers in img.
func (b *Broker) layers(img *controller.Image) config.Layers {
	l := b.staticLayers(img)
	l.Effective = b.effectiveSettings(img)
	return l
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
func (b *Broker) describeResource(img *controller.Image, t kmsg.ConfigResourceType, name string) ([]config.Described, error) {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		if err := validateTopicName(name); err != nil {
			return nil, err
		}
		topic := img.Topics[name]
		if topic == nil {
			return nil, refuse(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		return b.layers(img).DescribeTopic(topic.Configs), nil
	case kmsg.ConfigResourceTypeBroker:
		id, err := brokerResource(name)
		if err != nil {
			return nil, err
		}
		if id == controller.ClusterDefaultBroker {
			return b.staticLayers(img).DescribeClusterDefaults(), nil
		}
		if id != b.cfg.Settings.NodeID {
			// Only a broker knows its static settings; clients send
			// broker resources to the broker they name.
			return nil, refuse(kerr.InvalidRequest, "this is node %d; ask node %d for its configs", b.cfg.Settings.NodeID, id)
		}
		return b.staticLayers(img).DescribeBroker(), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, refuse(kerr.InvalidGroupID, "empty group id")
		}
		return b.layers(img).DescribeGroup(img.GroupConfigs[name]), nil
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
			c.Value = e.VisibleValue()
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
				for _, s := range e.Synonyms {
					cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					cs.Name, cs.Value, cs.Source = s.Name, s.Value, kmsg.ConfigSource(s.Source)
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

// alterResource validates the change alter makes to one resource
// (lib/config's checks) and, unless validateOnly, commits it.
func (b *Broker) alterResource(ctx context.Context, t kmsg.ConfigResourceType, name string, alter config.Alteration, validateOnly bool) error {
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
		set, del, err := b.layers(img).AlterTopic(topic.Configs, alter)
		if err != nil || validateOnly || len(set)+len(del) == 0 {
			return err
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
		base := b.cfg.Settings
		if id != controller.ClusterDefaultBroker {
			base = b.settingsWith(img.BrokerConfigs[controller.ClusterDefaultBroker], nil)
		}
		set, del, err := config.AlterBroker(base, img.BrokerConfigs[id], alter)
		if err != nil || validateOnly || len(set)+len(del) == 0 {
			return err
		}
		if err := b.ctrl.AlterBrokerConfigs(ctx, id, set, del); err != nil {
			return err
		}
		b.log.Info("altered broker configs", "broker", name, "set", set, "deleted", del)
		b.syncData()
		return nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return refuse(kerr.InvalidGroupID, "empty group id")
		}
		set, del, err := b.layers(img).AlterGroup(img.GroupConfigs[name], alter)
		if err != nil || validateOnly || len(set)+len(del) == 0 {
			return err
		}
		if err := b.ctrl.AlterGroupConfigs(ctx, name, set, del); err != nil {
			return err
		}
		b.log.Info("altered group configs", "group", name, "set", set, "deleted", del)
		return nil
	default:
		return unsupportedResource(t)
	}
}

// handleAlterConfigs answers the legacy AlterConfigs (key 33): the configs
// given for a resource replace all of its dynamic configs; those not given
// are deleted (config.Replace).
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
			given := make([]config.Op, len(res.Configs))
			for i, c := range res.Configs {
				given[i] = config.Op{Name: c.Name, Type: config.OpSet, Value: c.Value}
			}
			err = b.alterResource(ctx, res.ResourceType, res.ResourceName, config.Replace(given), r.ValidateOnly)
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
// ones (config.Incremental).
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, _ *server.ConnInfo, req *server.Request) server.Reply {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := withTimeout(ctx, 0)
	defer cancel()

	key := func(res *kmsg.IncrementalAlterConfigsRequestResource) resourceKey {
		return resourceKey{res.ResourceType, res.ResourceName}
	}
	eachDistinct(r.Resources, key, resourceLabel, func(res *kmsg.IncrementalAlterConfigsRequestResource, err error) {
		ops := make([]config.Op, len(res.Configs))
		for i, c := range res.Configs {
			ops[i] = config.Op{Name: c.Name, Type: config.OpType(c.Op), Value: c.Value}
		}
		if err == nil {
			err = config.CheckOps(ops)
		}
		if err == nil {
			err = b.alterResource(ctx, res.ResourceType, res.ResourceName, config.Incremental(ops), r.ValidateOnly)
		}
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = kafkaError(err)
		resp.Resources = append(resp.Resources, rr)
	})
	return reply(resp)
}
