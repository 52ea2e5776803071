package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
)

func metadataRequest(allowCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = allowCreate
	if topics == nil {
		return req // null: all topics
	}
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestMetadataAutoCreatesRequestedTopics(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.NumPartitions = 3 })
	for _, v := range []int16{0, 4, 9, 12} {
		name := "auto-" + string(rune('a'+v))
		resp := tb.do(t, v, metadataRequest(true, name)).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Port != 9092 {
			t.Fatalf("v%d: brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != 1 {
			t.Fatalf("v%d: controller id %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
			t.Fatalf("v%d: no cluster id", v)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("v%d: %d topics", v, len(resp.Topics))
		}
		topic := resp.Topics[0]
		if topic.ErrorCode != 0 || *topic.Topic != name || len(topic.Partitions) != 3 {
			t.Fatalf("v%d: topic %v %q with %d partitions", v, kerr.ErrorForCode(topic.ErrorCode), *topic.Topic, len(topic.Partitions))
		}
		if v >= 10 && topic.TopicID == [16]byte{} {
			t.Fatalf("v%d: no topic id", v)
		}
		for _, p := range topic.Partitions {
			if p.ErrorCode != 0 || p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
				t.Fatalf("v%d: partition %+v", v, p)
			}
		}
	}
}

func TestMetadataRefusals(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.AutoCreateTopics = false })
	tb.createTopic(t, "exists", 1, nil)
	tests := []struct {
		name  string
		topic string
		allow bool
		want  int16
	}{
		{"auto-create off", "missing", true, kerr.UnknownTopicOrPartition.Code},
		{"dot", ".", true, kerr.InvalidTopicException.Code},
		{"dot dot", "..", true, kerr.InvalidTopicException.Code},
		{"bad character", "a/b", true, kerr.InvalidTopicException.Code},
		{"too long", strings.Repeat("x", 250), true, kerr.InvalidTopicException.Code},
		{"exists", "exists", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tb.do(t, 12, metadataRequest(tt.allow, tt.topic)).(*kmsg.MetadataResponse)
			if got := resp.Topics[0].ErrorCode; got != tt.want {
				t.Fatalf("%v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(tt.want))
			}
		})
	}
	if _, ok := tb.ctrl.Image().Topics["missing"]; ok {
		t.Fatal("topic created with auto-create off")
	}
}

func TestMetadataNoAutoCreateWhenClientDisallows(t *testing.T) {
	tb := startBroker(t, "", nil)
	resp := tb.do(t, 12, metadataRequest(false, "nocreate")).(*kmsg.MetadataResponse)
	if got := resp.Topics[0].ErrorCode; got != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("%v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(got))
	}
}

func TestMetadataAllTopics(t *testing.T) {
	tb := startBroker(t, "", nil)
	tb.createTopic(t, "b", 1, nil)
	tb.createTopic(t, "a", 2, nil)
	for _, tt := range []struct {
		version int16
		req     *kmsg.MetadataRequest
	}{
		{0, metadataRequest(false, []string{}...)}, // v0: empty list means all
		{12, metadataRequest(false)},               // null list means all
	} {
		if tt.version == 0 {
			tt.req.Topics = []kmsg.MetadataRequestTopic{}
		}
		resp := tb.do(t, tt.version, tt.req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "a" || *resp.Topics[1].Topic != "b" {
			t.Fatalf("v%d: topics %+v", tt.version, resp.Topics)
		}
	}
	// v1+: an empty list means none.
	req := metadataRequest(false)
	req.Topics = []kmsg.MetadataRequestTopic{}
	if resp := tb.do(t, 12, req).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
		t.Fatalf("empty list: %d topics", len(resp.Topics))
	}
}

func TestMetadataByTopicID(t *testing.T) {
	tb := startBroker(t, "", nil)
	id := tb.createTopic(t, "byid", 1, nil)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = id
	req.Topics = append(req.Topics, rt)
	rt2 := kmsg.NewMetadataRequestTopic()
	rt2.TopicID = [16]byte{42}
	req.Topics = append(req.Topics, rt2)
	resp := tb.do(t, 12, req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "byid" {
		t.Fatalf("by id: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(resp.Topics[1].ErrorCode))
	}
}

func TestInitProducerID(t *testing.T) {
	tb := startBroker(t, "", nil)
	seen := map[int64]bool{}
	for range 3 {
		req := kmsg.NewPtrInitProducerIDRequest()
		resp := tb.do(t, 4, req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("InitProducerId: %v id %d epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		}
		seen[resp.ProducerID] = true
	}
}
