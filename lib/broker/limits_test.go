package broker

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
)

// A CreateTopics of more partitions than max.partitions.per.request is
// refused whole, every topic POLICY_VIOLATION, validate_only or not, and
// nothing is created.
func TestCreateTopicsOverThePerRequestCapIsRefusedWhole(t *testing.T) {
	b := startBroker(t, "", func(s *config.Broker) { s.MaxPartitionsPerRequest = 10 }).Broker
	for _, validateOnly := range []bool{true, false} {
		var topics []kmsg.CreateTopicsRequestTopic
		for i := range 4 {
			topics = append(topics, newTopic("t"+strconv.Itoa(i), 3, 1)) // 12 partitions
		}
		resp := createTopics(t, b, 7, validateOnly, topics...)
		if len(resp.Topics) != 4 {
			t.Fatalf("validate_only %v: %d topics answered, want 4", validateOnly, len(resp.Topics))
		}
		for _, rt := range resp.Topics {
			if rt.ErrorCode != kerr.PolicyViolation.Code {
				t.Errorf("validate_only %v: topic %s: %s, want POLICY_VIOLATION", validateOnly, rt.Topic, errName(rt.ErrorCode))
			}
		}
	}
	// Topics asking for no partitions count one each: 11 topics are over 10.
	var topics []kmsg.CreateTopicsRequestTopic
	for i := range 11 {
		topics = append(topics, newTopic("bad"+strconv.Itoa(i), 0, 1))
	}
	if code := createTopics(t, b, 7, true, topics...).Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Errorf("11 topics of 0 partitions: %s, want POLICY_VIOLATION", errName(code))
	}
	if code := createTopics(t, b, 7, false, newTopic("ok", 10, 1)).Topics[0].ErrorCode; code != 0 {
		t.Errorf("10 partitions: %s", errName(code))
	}
	if n := len(b.ctrl.Image().Topics); n != 1 {
		t.Errorf("%d topics created, want 1", n)
	}
}

// max.partitions bounds the cluster: topics that would take it over are
// refused with POLICY_VIOLATION, counting those the request created, and
// validate_only answers the same.
func TestCreateTopicsAndPartitionsStayWithinMaxPartitions(t *testing.T) {
	b := startBroker(t, "", func(s *config.Broker) { s.MaxPartitions = 10 }).Broker
	for _, validateOnly := range []bool{true, false} {
		resp := createTopics(t, b, 7, validateOnly, newTopic("a", 6, 1), newTopic("b", 4, 1), newTopic("c", 1, 1))
		for i, want := range []int16{0, 0, kerr.PolicyViolation.Code} {
			if code := resp.Topics[i].ErrorCode; code != want {
				t.Errorf("validate_only %v: topic %s: %s, want %s", validateOnly, resp.Topics[i].Topic, errName(code), errName(want))
			}
		}
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "a", 7
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.CreatePartitionsResponse](t, b, 3, req)
	if code := resp.Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Errorf("CreatePartitions over max.partitions: %s, want POLICY_VIOLATION", errName(code))
	}
}

// validate_only runs the checks of a real creation, the controller's
// included: a topic of more partitions than one topic may have
// (controller.MaxPartitions) is refused either way.
func TestValidateOnlyRunsTheChecksOfARealCreation(t *testing.T) {
	b := startBroker(t, "", func(s *config.Broker) {
		s.MaxPartitionsPerRequest = 1 << 30
		s.MaxPartitions = 1 << 30
	}).Broker
	huge := newTopic("huge", 200_000, 1)
	for _, validateOnly := range []bool{false, true} {
		if code := createTopics(t, b, 7, validateOnly, huge).Topics[0].ErrorCode; code != kerr.InvalidPartitions.Code {
			t.Errorf("validate_only %v: 200,000 partitions: %s, want INVALID_PARTITIONS", validateOnly, errName(code))
		}
	}
	if code := createPartitions(t, b, false, "none", 2); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("grow a missing topic: %s", errName(code))
	}
	if code := createTopics(t, b, 7, false, newTopic("small", 1, 1)).Topics[0].ErrorCode; code != 0 {
		t.Fatal(errName(code))
	}
	for _, validateOnly := range []bool{false, true} {
		if code := createPartitions(t, b, validateOnly, "small", 200_000); code != kerr.InvalidPartitions.Code {
			t.Errorf("validate_only %v: grow to 200,000 partitions: %s, want INVALID_PARTITIONS", validateOnly, errName(code))
		}
	}
}

// A Metadata request naming 1,000 unknown topics creates the first
// auto.create.topics.max.per.request only; the others are answered
// UNKNOWN_TOPIC_OR_PARTITION, invalid names INVALID_TOPIC_EXCEPTION.
func TestMetadataAutoCreatesAtMostTheCapPerRequest(t *testing.T) {
	tb := startBroker(t, "", nil)
	names := []string{"bad name"}
	for i := range 1000 {
		names = append(names, "auto-"+strconv.Itoa(i))
	}
	resp := tb.do(t, 12, metadataRequest(true, names...)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != len(names) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(names))
	}
	counts := map[string]int{}
	for _, rt := range resp.Topics {
		counts[errName(rt.ErrorCode)]++
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("an invalid name: %s", errName(code))
	}
	if counts["NONE"] != 10 || counts[kerr.UnknownTopicOrPartition.Message] != 990 {
		t.Errorf("answers %v, want 10 created and 990 unknown", counts)
	}
	if n := len(tb.ctrl.Image().Topics); n != 10 {
		t.Errorf("%d topics created, want 10", n)
	}
	// A client that asks again gets the next ones.
	resp = tb.do(t, 12, metadataRequest(true, names[1:21]...)).(*kmsg.MetadataResponse)
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Errorf("topic %s asked again: %s", *rt.Topic, errName(rt.ErrorCode))
		}
	}
}

// auto.create.topics.enable and num.partitions are dynamic: altered at
// runtime (here the cluster-wide default), they decide what Metadata
// creates from then on.
func TestMetadataAutoCreationFollowsTheDynamicSettings(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := context.Background()
	if err := tb.ctrl.AlterBrokerConfigs(ctx, controller.ClusterDefaultBroker, map[string]string{"auto.create.topics.enable": "false"}, nil); err != nil {
		t.Fatal(err)
	}
	resp := tb.do(t, 12, metadataRequest(true, "off")).(*kmsg.MetadataResponse)
	if code := resp.Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("auto.create.topics.enable=false: %s, want UNKNOWN_TOPIC_OR_PARTITION", errName(code))
	}
	if n := len(tb.ctrl.Image().Topics); n != 0 {
		t.Fatalf("%d topics created with auto.create.topics.enable=false", n)
	}
	if err := tb.ctrl.AlterBrokerConfigs(ctx, controller.ClusterDefaultBroker, map[string]string{"auto.create.topics.enable": "true", "num.partitions": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	resp = tb.do(t, 12, metadataRequest(true, "on")).(*kmsg.MetadataResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != 0 || len(rt.Partitions) != 3 {
		t.Errorf("auto.create.topics.enable=true, num.partitions=3: %s, %d partitions", errName(rt.ErrorCode), len(rt.Partitions))
	}
}
