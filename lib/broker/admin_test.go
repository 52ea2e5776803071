package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/server"
)

// newTestBroker is a Broker on a one-node cluster (node 1 registered at
// 127.0.0.1:9092), built by the data plane's startBroker.
func newTestBroker(t *testing.T) *Broker {
	t.Helper()
	return startBroker(t, "", nil).Broker
}

// roundTrip sends req to b at version v the way a connection would: the
// request and the response are encoded and decoded at v, so fields the
// version lacks are lost as on the wire.
func roundTrip[R kmsg.Response](t *testing.T, b *Broker, v int16, req kmsg.Request) R {
	t.Helper()
	req.SetVersion(v)
	wire := req.AppendTo(nil)
	decoded := kmsg.RequestForKey(req.Key())
	decoded.SetVersion(v)
	if err := decoded.ReadFrom(wire); err != nil {
		t.Fatalf("decode %T v%d: %v", req, v, err)
	}
	sreq := &server.Request{Key: req.Key(), Version: v, Body: decoded}
	reply := b.Handle(context.Background(), &server.ConnInfo{}, sreq)
	if reply == nil {
		t.Fatalf("%T v%d: no reply", req, v)
	}
	out := sreq.Answer(reply)
	if out.Msg == nil {
		t.Fatalf("%T v%d: empty response (close=%v)", req, v, out.CloseAfter)
	}
	out.Msg.SetVersion(v)
	respWire := out.Msg.AppendTo(nil)
	resp := decoded.ResponseKind()
	if err := resp.ReadFrom(respWire); err != nil {
		t.Fatalf("decode %T v%d: %v", resp, v, err)
	}
	return resp.(R)
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

// newTopic is one topic of a CreateTopics request.
func newTopic(name string, partitions int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func createTopics(t *testing.T, b *Broker, v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics, req.ValidateOnly = topics, validateOnly
	return roundTrip[*kmsg.CreateTopicsResponse](t, b, v, req)
}

func TestCreateTopicsAnswersEachTopic(t *testing.T) {
	b := newTestBroker(t)
	assigned := newTopic("assigned", -1, -1)
	for p := range int32(2) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 1-p, []int32{1}
		assigned.ReplicaAssignment = append(assigned.ReplicaAssignment, a)
	}
	badAssignment := newTopic("bad-assignment", -1, -1)
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{2}
	badAssignment.ReplicaAssignment = append(badAssignment.ReplicaAssignment, a)

	resp := createTopics(t, b, 7, false,
		newTopic("orders", 3, 1, "retention.ms", "60000"),
		newTopic("defaults", -1, -1),
		newTopic("bad/name", 1, 1),
		newTopic(string(make([]byte, 250)), 1, 1),
		newTopic("..", 1, 1),
		newTopic("too-replicated", 1, 3),
		newTopic("zero-partitions", 0, 1),
		newTopic("bad-config", 1, 1, "retention.ms", "soon"),
		newTopic("unknown-config", 1, 1, "no.such.config", "1"),
		newTopic("twice", 1, 1),
		newTopic("twice", 2, 1),
		newTopic("__consumer_offsets", 1, 1),
		assigned,
		badAssignment,
	)
	want := map[string]int16{
		"orders":                  0,
		"defaults":                0,
		"bad/name":                kerr.InvalidTopicException.Code,
		string(make([]byte, 250)): kerr.InvalidTopicException.Code,
		"..":                      kerr.InvalidTopicException.Code,
		"too-replicated":          kerr.InvalidReplicationFactor.Code,
		"zero-partitions":         kerr.InvalidPartitions.Code,
		"bad-config":              kerr.InvalidConfig.Code,
		"unknown-config":          kerr.InvalidConfig.Code,
		"twice":                   kerr.InvalidRequest.Code,
		"__consumer_offsets":      kerr.InvalidTopicException.Code,
		"assigned":                0,
		"bad-assignment":          kerr.InvalidReplicaAssignment.Code,
	}
	if len(resp.Topics) != len(want) {
		t.Errorf("%d topics answered, want %d", len(resp.Topics), len(want))
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[rt.Topic] {
			t.Errorf("%.20q: %s, want %s", rt.Topic, errName(rt.ErrorCode), errName(want[rt.Topic]))
		}
		if rt.ErrorCode != 0 && rt.ErrorMessage == nil {
			t.Errorf("%.20q: error without a message", rt.Topic)
		}
	}

	img := b.ctrl.Image()
	for name, partitions := range map[string]int{"orders": 3, "defaults": 1, "assigned": 2} {
		topic := img.Topics[name]
		if topic == nil {
			t.Errorf("topic %q not in the image", name)
			continue
		}
		if len(topic.Partitions) != partitions {
			t.Errorf("topic %q has %d partitions, want %d", name, len(topic.Partitions), partitions)
		}
	}
	if got := img.Topics["orders"].Configs["retention.ms"]; got != "60000" {
		t.Errorf("orders retention.ms override = %q", got)
	}
	if n := len(img.Topics); n != 3 {
		t.Errorf("%d topics in the image, want 3", n)
	}

	// v5+ describes the new topic.
	for _, rt := range resp.Topics {
		if rt.Topic != "orders" {
			continue
		}
		if rt.TopicID != img.Topics["orders"].ID || rt.NumPartitions != 3 || rt.ReplicationFactor != 1 {
			t.Errorf("orders: id %x partitions %d rf %d", rt.TopicID, rt.NumPartitions, rt.ReplicationFactor)
		}
		var found bool
		for _, c := range rt.Configs {
			if c.Name == "retention.ms" {
				found = true
				if c.Value == nil || *c.Value != "60000" || c.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
					t.Errorf("orders retention.ms in response: %v source %d", c.Value, c.Source)
				}
			}
		}
		if !found {
			t.Error("orders: response configs lack retention.ms")
		}
	}

	again := createTopics(t, b, 7, false, newTopic("orders", 1, 1))
	if code := again.Topics[0].ErrorCode; code != kerr.TopicAlreadyExists.Code {
		t.Errorf("creating orders again: %s", errName(code))
	}
}

func TestCreateTopicsValidateOnlyCreatesNothing(t *testing.T) {
	b := newTestBroker(t)
	resp := createTopics(t, b, 5, true, newTopic("checked", 4, -1, "cleanup.policy", "compact"), newTopic("bad", 1, 2))
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("validate-only create: %s", errName(code))
	}
	if rt := resp.Topics[0]; rt.NumPartitions != 4 || rt.ReplicationFactor != 1 || len(rt.Configs) == 0 {
		t.Errorf("validate-only answer: partitions %d rf %d %d configs", rt.NumPartitions, rt.ReplicationFactor, len(rt.Configs))
	}
	if code := resp.Topics[1].ErrorCode; code != kerr.InvalidReplicationFactor.Code {
		t.Errorf("validate-only rf 2 on one broker: %s", errName(code))
	}
	if n := len(b.ctrl.Image().Topics); n != 0 {
		t.Errorf("validate-only created %d topics", n)
	}
}

func TestCreateTopicsOldVersions(t *testing.T) {
	b := newTestBroker(t)
	for v := int16(0); v <= 7; v++ {
		name := "v" + string(rune('0'+v))
		partitions, rf := int32(-1), int16(-1)
		if v < 4 { // -1 defaults arrived in v4
			partitions, rf = 1, 1
		}
		resp := createTopics(t, b, v, false, newTopic(name, partitions, rf))
		if code := resp.Topics[0].ErrorCode; code != 0 {
			t.Errorf("v%d: %s", v, errName(code))
		}
	}
}

func deleteTopics(t *testing.T, b *Broker, v int16, names []string, ids ...controller.TopicID) *kmsg.DeleteTopicsResponse {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	if v < 6 {
		req.TopicNames = names
	} else {
		for _, n := range names {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, dt)
		}
		for _, id := range ids {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.TopicID = id
			req.Topics = append(req.Topics, dt)
		}
	}
	return roundTrip[*kmsg.DeleteTopicsResponse](t, b, v, req)
}

func TestDeleteTopicsByNameAndID(t *testing.T) {
	b := newTestBroker(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c"} {
		if _, err := b.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ctrl.CreateTopic(ctx, controller.CreateTopic{Name: "__consumer_offsets", Partitions: 1, ReplicationFactor: 1, Internal: true}); err != nil {
		t.Fatal(err)
	}
	idB := b.ctrl.Image().Topics["b"].ID

	resp := deleteTopics(t, b, 4, []string{"a", "missing", "__consumer_offsets"})
	want := map[string]int16{"a": 0, "missing": kerr.UnknownTopicOrPartition.Code, "__consumer_offsets": kerr.InvalidTopicException.Code}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || rt.ErrorCode != want[*rt.Topic] {
			t.Errorf("v4 delete %v: %s", rt.Topic, errName(rt.ErrorCode))
		}
	}

	resp = deleteTopics(t, b, 6, []string{"c", "c"}, idB, controller.TopicID{1})
	var got []string
	for _, rt := range resp.Topics {
		name := "<nil>"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		got = append(got, name+" "+errName(rt.ErrorCode))
		if rt.Topic != nil && *rt.Topic == "b" && rt.TopicID != idB {
			t.Errorf("b deleted by id answered with id %x", rt.TopicID)
		}
	}
	slices.Sort(got)
	wantGot := []string{
		"<nil> " + kerr.UnknownTopicID.Message,
		"b NONE",
		"c " + kerr.InvalidRequest.Message,
	}
	if !slices.Equal(got, wantGot) {
		t.Errorf("v6 delete answers:\n got %q\nwant %q", got, wantGot)
	}

	img := b.ctrl.Image()
	for name, exists := range map[string]bool{"a": false, "b": false, "c": true, "__consumer_offsets": true} {
		if _, ok := img.Topics[name]; ok != exists {
			t.Errorf("after deletes, topic %q exists = %v", name, ok)
		}
	}
}

func createPartitions(t *testing.T, b *Broker, validateOnly bool, topic string, count int32, assignments ...[]int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.ValidateOnly = validateOnly
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	for _, a := range assignments {
		rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: a})
	}
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.CreatePartitionsResponse](t, b, 3, req)
	return resp.Topics[0].ErrorCode
}

func TestCreatePartitionsOnlyGrows(t *testing.T) {
	b := newTestBroker(t)
	if _, err := b.ctrl.CreateTopic(context.Background(), controller.CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		validateOnly bool
		count        int32
		assignments  [][]int32
		want         *kerr.Error
		partitions   int
	}{
		{count: 2, want: kerr.InvalidPartitions, partitions: 2},
		{count: 1, want: kerr.InvalidPartitions, partitions: 2},
		{validateOnly: true, count: 5, partitions: 2},
		{count: 4, assignments: [][]int32{{1}}, want: kerr.InvalidReplicaAssignment, partitions: 2},
		{count: 3, assignments: [][]int32{{7}}, want: kerr.InvalidReplicaAssignment, partitions: 2},
		{count: 3, assignments: [][]int32{{1, 1}}, want: kerr.InvalidReplicaAssignment, partitions: 2},
		{count: 3, assignments: [][]int32{{1}}, partitions: 3},
		{count: 5, partitions: 5},
	}
	for i, s := range steps {
		code := createPartitions(t, b, s.validateOnly, "t", s.count, s.assignments...)
		var want int16
		if s.want != nil {
			want = s.want.Code
		}
		if code != want {
			t.Errorf("step %d (count %d): %s, want %s", i, s.count, errName(code), errName(want))
		}
		if n := len(b.ctrl.Image().Topics["t"].Partitions); n != s.partitions {
			t.Errorf("step %d: %d partitions, want %d", i, n, s.partitions)
		}
	}
	if code := createPartitions(t, b, false, "missing", 3); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %s", errName(code))
	}
}

func TestDescribeClusterListsBrokers(t *testing.T) {
	b := newTestBroker(t)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = v == 1
		resp := roundTrip[*kmsg.DescribeClusterResponse](t, b, v, req)
		img := b.ctrl.Image()
		if resp.ErrorCode != 0 || resp.ClusterID != img.ClusterID || resp.ClusterID == "" || resp.ControllerID != 1 {
			t.Errorf("v%d: error %s cluster %q controller %d", v, errName(resp.ErrorCode), resp.ClusterID, resp.ControllerID)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != "127.0.0.1" || resp.Brokers[0].Port != 9092 {
			t.Errorf("v%d: brokers %+v", v, resp.Brokers)
		}
		wantOps := int32(-2147483648)
		if v == 1 {
			wantOps = clusterOperations
		}
		if resp.ClusterAuthorizedOperations != wantOps {
			t.Errorf("v%d: authorized operations %d, want %d", v, resp.ClusterAuthorizedOperations, wantOps)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2
	if resp := roundTrip[*kmsg.DescribeClusterResponse](t, b, 1, req); resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Errorf("controller endpoints: %s", errName(resp.ErrorCode))
	}
}

func TestKafkaErrorMapsInternalErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{controller.ErrTopicExists, kerr.TopicAlreadyExists},
		{controller.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{controller.ErrInvalidPartitions, kerr.InvalidPartitions},
		{controller.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
		{controller.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
		{controller.ErrInvalidConfig, kerr.InvalidConfig},
		{config.ErrUnknownConfig, kerr.InvalidConfig},
		{config.ErrInvalidValue, kerr.InvalidConfig},
		{controller.ErrNotController, kerr.NotController},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{refuse(kerr.InvalidRequest, "x"), kerr.InvalidRequest},
		{context.TODO().Err(), nil},
	} {
		code, msg := kafkaError(c.err)
		var want int16
		if c.want != nil {
			want = c.want.Code
		}
		if code != want || (c.err != nil) != (msg != nil) {
			t.Errorf("kafkaError(%v) = %d %v, want %d", c.err, code, msg, want)
		}
	}
}

// startAdminClient serves b on a TCP port of 127.0.0.1, registers node 1
// at that address, and returns a kgo client and a kadm client on it.
func startAdminClient(t *testing.T, b *Broker) (*kgo.Client, *kadm.Client) {
	t.Helper()
	srv, err := server.New(server.Config{Listeners: []string{"tcp://127.0.0.1:0"}}, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := strings.TrimPrefix(srv.Addrs()[0], "tcp://")
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	if _, err := b.ctrl.RegisterBroker(context.Background(), controller.Broker{ID: 1, Host: host, Port: int32(port)}); err != nil {
		t.Fatal(err)
	}
	// The new registration gives every partition node 1 leads a new
	// leader epoch. Until the data plane applies it, a produce acknowledged
	// in the old epoch gets NOT_LEADER_OR_FOLLOWER (the epoch it waited in
	// ended), which a test right after this would take for a failure.
	registered := b.ctrl.Image().Version
	mqtest.WaitFor(t, "the registration applied", func() (bool, string) {
		applied := b.parts.Applied()
		return applied >= registered, fmt.Sprintf("image %d applied, registration %d", applied, registered)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// configOf returns a config of a described resource.
func configOf(t *testing.T, rcs kadm.ResourceConfigs, resource, name string) kadm.Config {
	t.Helper()
	rc, err := rcs.On(resource, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v %s", resource, err, rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("%s has no config %s", resource, name)
	return kadm.Config{}
}

func TestAdminAPIsWithKadm(t *testing.T) {
	b := newTestBroker(t)
	cl, adm := startAdminClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// CreateTopics.
	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "orders")
	if err != nil || created.ID == (kadm.TopicID{}) || created.NumPartitions != 3 {
		t.Fatalf("create orders: %v %s, id %v, %d partitions", err, created.ErrMessage, created.ID, created.NumPartitions)
	}
	for _, c := range []struct {
		name    string
		rf      int16
		configs map[string]*string
		want    *kerr.Error
	}{
		{"orders", 1, nil, kerr.TopicAlreadyExists},
		{"bad name!", 1, nil, kerr.InvalidTopicException},
		{"replicated", 3, nil, kerr.InvalidReplicationFactor},
		{"configured", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("shred")}, kerr.InvalidConfig},
	} {
		resp, _ := adm.CreateTopic(ctx, 1, c.rf, c.configs, c.name)
		if !errors.Is(resp.Err, c.want) || resp.ErrMessage == "" {
			t.Errorf("create %q: %v (%s), want %v with a message", c.name, resp.Err, resp.ErrMessage, c.want)
		}
	}
	if resps, err := adm.ValidateCreateTopics(ctx, 2, -1, nil, "dry-run"); err != nil || resps["dry-run"].Err != nil {
		t.Errorf("validate-only create: %v %v", err, resps["dry-run"].Err)
	}
	assign := kmsg.NewPtrCreateTopicsRequest()
	assigned := newTopic("assigned", -1, -1)
	assigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	assign.Topics = append(assign.Topics, assigned)
	if resp, err := assign.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("create with an assignment: %v %+v", err, resp)
	}

	// Metadata sees them.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("orders") || !topics.Has("assigned") || topics.Has("dry-run") || len(topics["orders"].Partitions) != 3 {
		t.Errorf("listed topics: %v", topics.Names())
	}

	// Configs: describe, incremental alter, legacy replace.
	rcs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "orders", "retention.ms"); c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms = %v source %v", c.Value, c.Source)
	}
	if c := configOf(t, rcs, "orders", "cleanup.policy"); c.Value == nil || *c.Value != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("cleanup.policy = %v source %v", c.Value, c.Source)
	}
	alters := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("600000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")},
	}
	if resps, err := adm.AlterTopicConfigs(ctx, alters, "orders"); err != nil || resps[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	alters = []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}
	if resps, err := adm.AlterTopicConfigs(ctx, alters, "orders"); err != nil || resps[0].Err != nil {
		t.Fatalf("subtract: %v %+v", err, resps)
	}
	rcs, err = adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "orders", "cleanup.policy"); c.Value == nil || *c.Value != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("after alter, cleanup.policy = %v source %v", c.Value, c.Source)
	}
	if c := configOf(t, rcs, "orders", "retention.ms"); c.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("after delete, retention.ms still overridden: %v", c.Value)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("2000")}}
	legacy.Resources = append(legacy.Resources, res)
	if resp, err := legacy.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("legacy alter: %v %+v", err, resp)
	}
	if got, want := b.ctrl.Image().Topics["orders"].Configs, map[string]string{"max.message.bytes": "2000"}; !maps.Equal(got, want) {
		t.Errorf("after legacy alter, overrides %v, want %v", got, want)
	}

	// CreatePartitions.
	if resps, err := adm.UpdatePartitions(ctx, 5, "orders"); err != nil || resps["orders"].Err != nil {
		t.Errorf("grow to 5: %v %+v", err, resps)
	}
	if resps, _ := adm.UpdatePartitions(ctx, 2, "orders"); !errors.Is(resps["orders"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrink to 2: %+v", resps["orders"])
	}

	// Broker configs.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.bytes", Value: kmsg.StringPtr("123456")}}, 1); err != nil || resps[0].Err != nil {
		t.Fatalf("alter broker 1: %v %+v", err, resps)
	}
	rcs, err = adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "1", "log.retention.bytes"); c.Value == nil || *c.Value != "123456" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("broker log.retention.bytes = %v source %v", c.Value, c.Source)
	}

	// DescribeCluster.
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || dc.ErrorCode != 0 || dc.ClusterID != b.ctrl.Image().ClusterID || len(dc.Brokers) != 1 || dc.Brokers[0].NodeID != 1 {
		t.Errorf("describe cluster: %v %+v", err, dc)
	}

	// DeleteTopics by name and by ID.
	if resp, err := adm.DeleteTopic(ctx, "orders"); err != nil || resp.Err != nil {
		t.Errorf("delete orders: %v %+v", err, resp)
	}
	byID := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = b.ctrl.Image().Topics["assigned"].ID
	byID.Topics = append(byID.Topics, dt)
	if resp, err := byID.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "assigned" {
		t.Errorf("delete by id: %v %+v", err, resp)
	}
	if resp, _ := adm.DeleteTopic(ctx, "orders"); !errors.Is(resp.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete orders again: %+v", resp)
	}
	// kadm answers ListTopics from kgo's metadata cache, which a deletion
	// by ID does not evict: ask the broker.
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(md.Topics) != 0 {
		t.Errorf("topics left: %v %+v", err, md)
	}
}
