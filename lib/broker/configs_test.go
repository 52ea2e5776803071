package broker

import (
	"context"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
)

func describeConfigs(t *testing.T, b *Broker, v int16, typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, names
	req.Resources = append(req.Resources, res)
	resp := roundTrip[*kmsg.DescribeConfigsResponse](t, b, v, req)
	if len(resp.Resources) != 1 {
		t.Fatalf("%d resources answered", len(resp.Resources))
	}
	return resp.Resources[0]
}

// configValues returns name → value (or "<nil>") and name → source.
func configValues(r kmsg.DescribeConfigsResponseResource) (map[string]string, map[string]kmsg.ConfigSource) {
	values, sources := map[string]string{}, map[string]kmsg.ConfigSource{}
	for _, c := range r.Configs {
		values[c.Name] = "<nil>"
		if c.Value != nil {
			values[c.Name] = *c.Value
		}
		sources[c.Name] = c.Source
	}
	return values, sources
}

func mustCreate(t *testing.T, b *Broker, name string, configs map[string]string) {
	t.Helper()
	if _, err := b.ctrl.CreateTopic(context.Background(), controller.CreateTopic{Name: name, Partitions: 1, ReplicationFactor: 1, Configs: configs}); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeTopicConfigsShowsSources(t *testing.T) {
	b := newTestBroker(t)
	mustCreate(t, b, "t", map[string]string{"retention.ms": "1000"})
	if err := b.ctrl.AlterBrokerConfigs(context.Background(), -1, map[string]string{"log.segment.bytes": "2000000"}, nil); err != nil {
		t.Fatal(err)
	}

	r := describeConfigs(t, b, 4, kmsg.ConfigResourceTypeTopic, "t")
	if r.ErrorCode != 0 {
		t.Fatalf("describe: %s %v", errName(r.ErrorCode), r.ErrorMessage)
	}
	values, sources := configValues(r)
	for name, want := range map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"retention.ms":   {"1000", kmsg.ConfigSourceDynamicTopicConfig},
		"segment.bytes":  {"2000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"cleanup.policy": {"delete", kmsg.ConfigSourceDefaultConfig},
	} {
		if values[name] != want.value || sources[name] != want.source {
			t.Errorf("%s = %q (source %d), want %q (source %d)", name, values[name], sources[name], want.value, want.source)
		}
	}
	for _, c := range r.Configs {
		if c.Name == "retention.ms" {
			if len(c.ConfigSynonyms) < 2 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig || c.ConfigSynonyms[1].Name != "log.retention.ms" {
				t.Errorf("retention.ms synonyms %+v", c.ConfigSynonyms)
			}
			if c.Documentation == nil {
				t.Error("retention.ms has no documentation")
			}
		}
	}

	r = describeConfigs(t, b, 0, kmsg.ConfigResourceTypeTopic, "t", "retention.ms", "cleanup.policy")
	if len(r.Configs) != 2 {
		t.Errorf("names filter: %d configs, want 2", len(r.Configs))
	}
	for _, c := range r.Configs {
		if c.IsDefault != (c.Name == "cleanup.policy") {
			t.Errorf("v0 %s IsDefault = %v", c.Name, c.IsDefault)
		}
	}

	for _, c := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		want *kerr.Error
	}{
		{kmsg.ConfigResourceTypeTopic, "missing", kerr.UnknownTopicOrPartition},
		{kmsg.ConfigResourceTypeTopic, "bad name", kerr.InvalidTopicException},
		{kmsg.ConfigResourceTypeBrokerLogger, "1", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBroker, "7", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBroker, "x", kerr.InvalidRequest},
		{kmsg.ConfigResourceType(99), "x", kerr.InvalidRequest},
	} {
		r := describeConfigs(t, b, 4, c.typ, c.name)
		if r.ErrorCode != c.want.Code || r.ErrorMessage == nil {
			t.Errorf("describe %d %q: %s, want %s", c.typ, c.name, errName(r.ErrorCode), c.want.Message)
		}
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	b := newTestBroker(t)
	ctx := context.Background()
	if err := b.ctrl.AlterBrokerConfigs(ctx, -1, map[string]string{"log.retention.bytes": "1000", "num.partitions": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.ctrl.AlterBrokerConfigs(ctx, 1, map[string]string{"num.partitions": "4"}, nil); err != nil {
		t.Fatal(err)
	}
	r := describeConfigs(t, b, 4, kmsg.ConfigResourceTypeBroker, "1")
	if r.ErrorCode != 0 {
		t.Fatalf("describe broker 1: %s %v", errName(r.ErrorCode), r.ErrorMessage)
	}
	values, sources := configValues(r)
	if values["num.partitions"] != "4" || sources["num.partitions"] != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("num.partitions = %q source %d", values["num.partitions"], sources["num.partitions"])
	}
	if values["log.retention.bytes"] != "1000" || sources["log.retention.bytes"] != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("log.retention.bytes = %q source %d", values["log.retention.bytes"], sources["log.retention.bytes"])
	}
	if len(r.Configs) < 10 {
		t.Errorf("only %d broker configs", len(r.Configs))
	}

	r = describeConfigs(t, b, 4, kmsg.ConfigResourceTypeBroker, "")
	values, sources = configValues(r)
	want := map[string]string{"log.retention.bytes": "1000", "num.partitions": "3"}
	if r.ErrorCode != 0 || !maps.Equal(values, want) {
		t.Errorf("cluster defaults: %s %v, want %v", errName(r.ErrorCode), values, want)
	}
	for name, s := range sources {
		if s != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Errorf("cluster default %s has source %d", name, s)
		}
	}
}

// alterOp is one IncrementalAlterConfigs operation.
type alterOp struct {
	op    kmsg.IncrementalAlterConfigOp
	name  string
	value *string
}

func incrementalAlter(t *testing.T, b *Broker, validateOnly bool, typ kmsg.ConfigResourceType, name string, ops ...alterOp) kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o.op, o.name, o.value
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp := roundTrip[*kmsg.IncrementalAlterConfigsResponse](t, b, 1, req)
	return resp.Resources[0]
}

func TestIncrementalAlterTopicConfigs(t *testing.T) {
	b := newTestBroker(t)
	mustCreate(t, b, "t", map[string]string{"retention.ms": "1000", "flush.ms": "5"})
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	appendOp, subtract := kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
	s := kmsg.StringPtr
	steps := []struct {
		validateOnly bool
		ops          []alterOp
		want         *kerr.Error
		configs      map[string]string
	}{
		{ops: []alterOp{{set, "retention.ms", s("2000")}, {del, "flush.ms", nil}},
			configs: map[string]string{"retention.ms": "2000"}},
		{ops: []alterOp{{appendOp, "cleanup.policy", s("compact")}},
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "delete,compact"}},
		{ops: []alterOp{{appendOp, "cleanup.policy", s("compact")}},
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "delete,compact"}},
		{ops: []alterOp{{subtract, "cleanup.policy", s("delete")}},
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{appendOp, "retention.ms", s("1")}}, want: kerr.InvalidConfig,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{set, "retention.ms", s("soon")}}, want: kerr.InvalidConfig,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{set, "no.such.config", s("1")}}, want: kerr.InvalidConfig,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{set, "retention.ms", nil}}, want: kerr.InvalidRequest,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{set, "retention.ms", s("1")}, {del, "retention.ms", nil}}, want: kerr.InvalidRequest,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{9, "retention.ms", s("1")}}, want: kerr.InvalidRequest,
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{validateOnly: true, ops: []alterOp{{del, "retention.ms", nil}},
			configs: map[string]string{"retention.ms": "2000", "cleanup.policy": "compact"}},
		{ops: []alterOp{{del, "retention.ms", nil}, {del, "cleanup.policy", nil}},
			configs: map[string]string{}},
	}
	for i, st := range steps {
		r := incrementalAlter(t, b, st.validateOnly, kmsg.ConfigResourceTypeTopic, "t", st.ops...)
		var want int16
		if st.want != nil {
			want = st.want.Code
		}
		if r.ErrorCode != want {
			t.Errorf("step %d: %s %v, want %s", i, errName(r.ErrorCode), r.ErrorMessage, errName(want))
		}
		if got := b.ctrl.Image().Topics["t"].Configs; !maps.Equal(got, st.configs) {
			t.Errorf("step %d: configs %v, want %v", i, got, st.configs)
		}
	}
	if r := incrementalAlter(t, b, false, kmsg.ConfigResourceTypeTopic, "missing", alterOp{set, "retention.ms", s("1")}); r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %s", errName(r.ErrorCode))
	}
}

func TestIncrementalAlterBrokerConfigs(t *testing.T) {
	b := newTestBroker(t)
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	s := kmsg.StringPtr
	if r := incrementalAlter(t, b, false, kmsg.ConfigResourceTypeBroker, "", alterOp{set, "log.retention.ms", s("5000")}); r.ErrorCode != 0 {
		t.Fatalf("set cluster default: %s %v", errName(r.ErrorCode), r.ErrorMessage)
	}
	if r := incrementalAlter(t, b, false, kmsg.ConfigResourceTypeBroker, "1", alterOp{set, "num.partitions", s("6")}); r.ErrorCode != 0 {
		t.Fatalf("set broker 1: %s %v", errName(r.ErrorCode), r.ErrorMessage)
	}
	img := b.ctrl.Image()
	if got := img.BrokerConfigs[-1]["log.retention.ms"]; got != "5000" {
		t.Errorf("cluster default log.retention.ms = %q", got)
	}
	if got := img.BrokerConfigs[1]["num.partitions"]; got != "6" {
		t.Errorf("broker 1 num.partitions = %q", got)
	}
	// The new defaults apply to topics created from now on.
	resp := createTopics(t, b, 7, false, newTopic("later", -1, -1))
	if rt := resp.Topics[0]; rt.ErrorCode != 0 || rt.NumPartitions != 6 {
		t.Errorf("topic with default partitions: %s, %d partitions", errName(rt.ErrorCode), rt.NumPartitions)
	}
	r := describeConfigs(t, b, 4, kmsg.ConfigResourceTypeTopic, "later", "retention.ms")
	if values, sources := configValues(r); values["retention.ms"] != "5000" || sources["retention.ms"] != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("later retention.ms = %q source %d", values["retention.ms"], sources["retention.ms"])
	}

	for _, c := range []struct {
		name string
		op   alterOp
		want *kerr.Error
	}{
		{"1", alterOp{set, "node.id", s("2")}, kerr.InvalidConfig},
		{"1", alterOp{set, "num.partitions", s("many")}, kerr.InvalidConfig},
		{"x", alterOp{set, "num.partitions", s("2")}, kerr.InvalidRequest},
	} {
		if r := incrementalAlter(t, b, false, kmsg.ConfigResourceTypeBroker, c.name, c.op); r.ErrorCode != c.want.Code {
			t.Errorf("broker %q %s: %s, want %s", c.name, c.op.name, errName(r.ErrorCode), c.want.Message)
		}
	}
	if r := incrementalAlter(t, b, false, kmsg.ConfigResourceTypeBroker, "1", alterOp{del, "num.partitions", nil}); r.ErrorCode != 0 {
		t.Errorf("delete: %s", errName(r.ErrorCode))
	}
	if _, ok := b.ctrl.Image().BrokerConfigs[1]; ok {
		t.Error("broker 1 still has dynamic configs after deleting the only one")
	}
}

func TestLegacyAlterConfigsReplacesAll(t *testing.T) {
	b := newTestBroker(t)
	mustCreate(t, b, "t", map[string]string{"retention.ms": "1000", "flush.ms": "5"})
	alter := func(validateOnly bool, typ kmsg.ConfigResourceType, name string, kv ...string) int16 {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		for i := 0; i+1 < len(kv); i += 2 {
			res.Configs = append(res.Configs, kmsg.AlterConfigsRequestResourceConfig{Name: kv[i], Value: kmsg.StringPtr(kv[i+1])})
		}
		req.Resources = append(req.Resources, res)
		return roundTrip[*kmsg.AlterConfigsResponse](t, b, 1, req).Resources[0].ErrorCode
	}
	if code := alter(true, kmsg.ConfigResourceTypeTopic, "t", "segment.ms", "100000"); code != 0 {
		t.Fatalf("validate only: %s", errName(code))
	}
	if got := b.ctrl.Image().Topics["t"].Configs; len(got) != 2 {
		t.Errorf("validate only changed configs: %v", got)
	}
	if code := alter(false, kmsg.ConfigResourceTypeTopic, "t", "segment.ms", "100000", "retention.ms", "1000"); code != 0 {
		t.Fatalf("replace: %s", errName(code))
	}
	want := map[string]string{"segment.ms": "100000", "retention.ms": "1000"}
	if got := b.ctrl.Image().Topics["t"].Configs; !maps.Equal(got, want) {
		t.Errorf("after replace: %v, want %v", got, want)
	}
	if code := alter(false, kmsg.ConfigResourceTypeTopic, "t", "segment.ms", "-5"); code != kerr.InvalidConfig.Code {
		t.Errorf("invalid value: %s", errName(code))
	}
	if code := alter(false, kmsg.ConfigResourceTypeTopic, "t"); code != 0 {
		t.Fatalf("replace with nothing: %s", errName(code))
	}
	if got := b.ctrl.Image().Topics["t"].Configs; len(got) != 0 {
		t.Errorf("after replacing with nothing: %v", got)
	}
	if code := alter(false, kmsg.ConfigResourceTypeBroker, "1", "num.partitions", "2"); code != 0 {
		t.Fatalf("broker: %s", errName(code))
	}
	if code := alter(false, kmsg.ConfigResourceTypeBrokerLogger, "1", "root", "DEBUG"); code != kerr.InvalidRequest.Code {
		t.Errorf("broker logger: %s", errName(code))
	}
}

// TestDescribeConfigsDocumentsEveryConfigWhenAsked: with
// IncludeDocumentation (v3+) every config of a topic and of a broker
// carries lib/config's doc, the one mqd --help-config prints; without it,
// none does.
func TestDescribeConfigsDocumentsEveryConfigWhenAsked(t *testing.T) {
	b := newTestBroker(t)
	mustCreate(t, b, "t", nil)
	docsOf := func(settings []config.Setting) map[string]string {
		docs := map[string]string{}
		for _, s := range settings {
			docs[s.Name] = s.Doc
		}
		return docs
	}
	for _, res := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		docs map[string]string
	}{
		{kmsg.ConfigResourceTypeTopic, "t", docsOf(config.TopicSettings())},
		{kmsg.ConfigResourceTypeBroker, "1", docsOf(config.BrokerSettings())},
	} {
		for _, withDocs := range []bool{true, false} {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.IncludeDocumentation = withDocs
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = res.typ, res.name
			req.Resources = append(req.Resources, r)
			resp := roundTrip[*kmsg.DescribeConfigsResponse](t, b, 4, req)
			configs := resp.Resources[0].Configs
			if len(configs) != len(res.docs) {
				t.Errorf("%v %s: %d configs, want %d", res.typ, res.name, len(configs), len(res.docs))
			}
			for _, c := range configs {
				got := ""
				if c.Documentation != nil {
					got = *c.Documentation
				}
				if want := map[bool]string{true: res.docs[c.Name], false: ""}[withDocs]; got != want || (withDocs && got == "") {
					t.Errorf("%v %s, IncludeDocumentation %v: %s documented %q, want %q", res.typ, res.name, withDocs, c.Name, got, want)
				}
			}
		}
	}
}
