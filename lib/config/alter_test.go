package config

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestIncrementalAppendAndSubtractWorkOnListsOnly(t *testing.T) {
	b := builtin
	l := Layers{Static: b, Effective: b}
	steps := []struct {
		ops     []Op
		want    error
		configs map[string]string
	}{
		// APPEND starts from the default (delete) when the topic has no value.
		{ops: []Op{{"cleanup.policy", OpAppend, ptr("compact")}},
			configs: map[string]string{"cleanup.policy": "delete,compact"}},
		// An item the list has is not added twice.
		{ops: []Op{{"cleanup.policy", OpAppend, ptr(" compact ,")}},
			configs: map[string]string{"cleanup.policy": "delete,compact"}},
		{ops: []Op{{"cleanup.policy", OpSubtract, ptr("delete")}},
			configs: map[string]string{"cleanup.policy": "compact"}},
		{ops: []Op{{"retention.ms", OpAppend, ptr("1")}}, want: ErrInvalidValue,
			configs: map[string]string{"cleanup.policy": "compact"}},
		{ops: []Op{{"no.such.config", OpSubtract, ptr("1")}}, want: ErrUnknownConfig,
			configs: map[string]string{"cleanup.policy": "compact"}},
		{ops: []Op{{"retention.ms", OpSet, ptr("soon")}}, want: ErrInvalidValue,
			configs: map[string]string{"cleanup.policy": "compact"}},
		{ops: []Op{{"retention.ms", OpSet, ptr("5")}, {"cleanup.policy", OpDelete, nil}},
			configs: map[string]string{"retention.ms": "5"}},
	}
	current := map[string]string{}
	for i, st := range steps {
		if err := CheckOps(st.ops); err != nil {
			t.Fatalf("step %d: CheckOps: %v", i, err)
		}
		set, del, err := l.AlterTopic(current, Incremental(st.ops))
		if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("step %d: %v, want %v", i, err, st.want)
		}
		if err == nil {
			maps.Copy(current, set)
			for _, k := range del {
				delete(current, k)
			}
		}
		if !maps.Equal(current, st.configs) {
			t.Errorf("step %d: configs %v, want %v", i, current, st.configs)
		}
	}
}

func TestCheckOpsRefusesMalformedRequests(t *testing.T) {
	for _, ops := range [][]Op{
		{{"retention.ms", OpSet, nil}},
		{{"retention.ms", OpAppend, nil}},
		{{"retention.ms", OpSet, ptr("1")}, {"retention.ms", OpDelete, nil}},
		{{"retention.ms", OpType(9), ptr("1")}},
	} {
		if err := CheckOps(ops); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%v: %v, want ErrInvalidRequest", ops, err)
		}
	}
	if err := CheckOps([]Op{{"retention.ms", OpDelete, nil}, {"segment.ms", OpSet, ptr("1")}}); err != nil {
		t.Errorf("valid ops: %v", err)
	}
}

func TestReplaceDeletesWhatIsNotGiven(t *testing.T) {
	current := map[string]string{"retention.ms": "1000", "flush.ms": "5"}
	set, del, err := Layers{Effective: builtin}.AlterTopic(current, Replace([]Op{{Name: "segment.ms", Value: ptr("100000")}, {Name: "retention.ms", Value: ptr("1000")}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"segment.ms": "100000"}; !maps.Equal(set, want) || !slices.Equal(del, []string{"flush.ms"}) {
		t.Errorf("set %v del %v, want %v and [flush.ms]", set, del, want)
	}
	for _, given := range [][]Op{
		{{Name: "segment.ms", Value: ptr("1")}, {Name: "segment.ms", Value: ptr("2")}},
		{{Name: "segment.ms"}},
	} {
		if _, _, err := (Layers{Effective: builtin}).AlterTopic(current, Replace(given)); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%v: %v, want ErrInvalidRequest", given, err)
		}
	}
}

func TestAlterBrokerTakesDynamicPropertiesOnly(t *testing.T) {
	if _, _, err := AlterBroker(builtin, nil, Incremental([]Op{{"node.id", OpSet, ptr("2")}})); !errors.Is(err, ErrNotDynamic) {
		t.Errorf("node.id: %v, want ErrNotDynamic", err)
	}
	set, del, err := AlterBroker(builtin, map[string]string{"num.partitions": "3"}, Incremental([]Op{{"num.partitions", OpDelete, nil}, {"log.retention.ms", OpSet, ptr("5000")}}))
	if err != nil || !maps.Equal(set, map[string]string{"log.retention.ms": "5000"}) || !slices.Equal(del, []string{"num.partitions"}) {
		t.Errorf("set %v del %v err %v", set, del, err)
	}
}

// TestDescribeTopicListsEveryLayer: a topic config's synonyms are the
// override, then the broker property of its default in each layer that
// sets it, highest precedence first.
func TestDescribeTopicListsEveryLayer(t *testing.T) {
	static := builtin
	if err := static.Set("log.retention.ms", "7000"); err != nil {
		t.Fatal(err)
	}
	l := Layers{
		Static:          static,
		ClusterDefaults: map[string]string{"log.retention.ms": "6000"},
		PerBroker:       map[string]string{"log.retention.ms": "5000"},
	}
	l.Effective, _ = static.WithDynamic(l.ClusterDefaults, l.PerBroker)
	for _, d := range l.DescribeTopic(map[string]string{"retention.ms": "1000"}) {
		if d.Name != "retention.ms" {
			continue
		}
		var got []string
		for _, s := range d.Synonyms {
			got = append(got, s.Name+"="+*s.Value)
		}
		want := []string{"retention.ms=1000", "log.retention.ms=5000", "log.retention.ms=6000", "log.retention.ms=7000"}
		if !slices.Equal(got, want) || d.Source != SourceDynamicTopic {
			t.Errorf("synonyms %v (source %d), want %v", got, d.Source, want)
		}
		return
	}
	t.Fatal("no retention.ms")
}

func TestDescribeClusterDefaultsShowsOnlyWhatIsSet(t *testing.T) {
	l := Layers{Static: builtin, ClusterDefaults: map[string]string{"num.partitions": "3"}}
	got := l.DescribeClusterDefaults()
	if len(got) != 1 || got[0].Name != "num.partitions" || *got[0].Value != "3" || got[0].Source != SourceDynamicDefaultBroker {
		t.Errorf("cluster defaults %+v", got)
	}
}

func TestDiff(t *testing.T) {
	set, del := Diff(map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"a": "1", "b": "9", "d": "4"})
	if !maps.Equal(set, map[string]string{"b": "9", "d": "4"}) || !slices.Equal(del, []string{"c"}) {
		t.Errorf("set %v del %v", set, del)
	}
}

func TestPartitionLimits(t *testing.T) {
	b := builtin
	b.MaxPartitionsPerRequest, b.MaxPartitions = 10, 100
	if err := b.CheckRequestPartitions(11); !errors.Is(err, ErrPartitionLimit) {
		t.Errorf("request of 11: %v", err)
	}
	if err := b.CheckClusterPartitions(95, 6); !errors.Is(err, ErrPartitionLimit) {
		t.Errorf("cluster of 101: %v", err)
	}
	if err := errors.Join(b.CheckRequestPartitions(10), b.CheckClusterPartitions(95, 5)); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	b.MaxPartitionsPerRequest, b.MaxPartitions = 0, 0
	if err := errors.Join(b.CheckRequestPartitions(1e6), b.CheckClusterPartitions(1e6, 1e6)); err != nil {
		t.Errorf("no limits: %v", err)
	}
}

func TestTopicOverrides(t *testing.T) {
	got, err := TopicOverrides(builtin, []Op{{Name: "retention.ms", Value: ptr("1000")}})
	if err != nil || !maps.Equal(got, map[string]string{"retention.ms": "1000"}) {
		t.Errorf("%v %v", got, err)
	}
	for _, c := range []struct {
		given []Op
		want  error
	}{
		{[]Op{{Name: "retention.ms", Value: ptr("1")}, {Name: "retention.ms", Value: ptr("2")}}, ErrInvalidRequest},
		{[]Op{{Name: "retention.ms"}}, ErrInvalidValue},
		{[]Op{{Name: "retention.ms", Value: ptr("soon")}}, ErrInvalidValue},
		{[]Op{{Name: "no.such", Value: ptr("1")}}, ErrUnknownConfig},
		{[]Op{{Name: "remote.storage.enable", Value: ptr("true")}, {Name: "cleanup.policy", Value: ptr("compact")}}, ErrInvalidValue},
	} {
		if _, err := TopicOverrides(builtin, c.given); !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want %v", c.given, err, c.want)
		}
	}
}
