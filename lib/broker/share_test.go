package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
)

// setGroupConfigs sets share group configs through IncrementalAlterConfigs
// on the GROUP resource, as Kafka's tools do.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("alter group configs: %v (%s)", err, optString(resp.Resources[0].ErrorMessage))
	}
}

func TestGroupConfigsValidatedAndDescribed(t *testing.T) {
	tb := startBroker(t, "", nil)
	addr := serve(t, tb)
	cl := newClient(t, addr)
	setGroupConfigs(t, cl, "g", "share.auto.offset.reset", "earliest")
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("sometimes")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("bad value: %v %+v", err, resp)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	dreq.Resources = append(dreq.Resources, dres)
	dresp, err := dreq.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = optString(c.Value)
	}
	if got["share.auto.offset.reset"] != "earliest" || got["share.record.lock.duration.ms"] != "30000" {
		t.Fatalf("described %v", got)
	}
}

// shareConsume runs consumers share consumers of group on topic until
// they have accepted want records between them, and returns how often
// each value was delivered.
func shareConsume(t *testing.T, addr, group, topic string, consumers, want int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range consumers {
		cl := newClient(t, addr, kgo.ShareGroup(group), kgo.ShareMaxRecords(10), kgo.ConsumeTopics(topic), kgo.ClientID(fmt.Sprintf("c%d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(pollCtx)
				if pollCtx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					seen[string(r.Value)]++
					total++
					if total == want {
						close(done)
						stopPolls()
					}
					mu.Unlock()
				})
				if pollCtx.Err() != nil {
					if err := cl.FlushAcks(ctx); err != nil {
						t.Errorf("flush acks: %v", err)
					}
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		t.Errorf("consumed %d of %d records", total, want)
		mu.Unlock()
	}
	wg.Wait()
	return seen
}

func TestShareGroupConsumersShareAPartition(t *testing.T) {
	tb := startBroker(t, "", func(s *config.Broker) { s.OffsetsTopicNumPartitions = 1; s.ShareStateTopicPartitions = 1 })
	addr := serve(t, tb)
	tb.createTopic(t, "q", 1, nil)
	cl := newClient(t, addr)
	setGroupConfigs(t, cl, "g", "share.auto.offset.reset", "earliest")
	const n = 300
	produceN(t, addr, "q", n)
	seen := shareConsume(t, addr, "g", "q", 3, n)
	for i := range n {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("record %d delivered %d times", i, seen[strconv.Itoa(i)])
		}
	}
	// The share-partition's start moved past everything acknowledged.
	tb.waitFor(t, "start offset at the end", func() bool {
		p := tb.shares.part(shareKey{group: "g", topicID: tb.ctrl.Image().Topics["q"].ID, partition: 0})
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.q != nil && p.q.Start() == n
	})
}
