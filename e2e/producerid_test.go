package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNewIdempotentProducerStartsWhileTheControllerQuorumIsLost: every
// broker holds a block of producer IDs from its start, so that with two
// of the three voters gone a new idempotent producer still gets its ID
// from a broker that never answered InitProducerId, and produces with
// acks=all to a partition whose leader and ISR are alive.
func TestNewIdempotentProducerStartsWhileTheControllerQuorumIsLost(t *testing.T) {
	// Nodes 1…3 vote; 4 and 5, which host the topic, do not.
	c := startCluster(t, 5, clusterOpts{voters: 3})
	t.Cleanup(func() {
		// Without a quorum no node can end its controlled shutdown.
		for _, node := range c.nodes {
			if node.running() {
				node.kill()
			}
		}
	})
	c.createTopicOn("events", [][]int32{{4, 5}}, map[string]string{"min.insync.replicas": "2"})
	clusterWait.For(t, "every broker to hold producer ids", func() (bool, string) {
		for _, node := range c.nodes {
			if !strings.Contains(node.stderr.String(), `msg="allocated producer ids"`) {
				return false, fmt.Sprintf("node %d has allocated none", node.id)
			}
		}
		return true, ""
	})

	c.node(2).kill()
	c.node(3).kill() // no majority of the voters is left

	// InitProducerId on node 4 itself.
	ctx := ctxFor(t, 2*time.Minute)
	direct := c.node(4).client()
	req := kmsg.NewPtrInitProducerIDRequest()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := req.RequestWith(rctx, direct.SeedBrokers()[0])
	cancel()
	id := int64(-1)
	if err == nil {
		err, id = kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID
	}
	if err != nil || id < 0 {
		t.Fatalf("InitProducerId on node 4 without a controller quorum: %v (id %d)", err, id)
	}

	// A new idempotent producer (acks=all) that knows only the topic's
	// brokers.
	producer, err := kgo.NewClient(append(c.clientOpts(c.node(4).addr, c.node(5).addr),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("events"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for i := range 5 {
		r := &kgo.Record{Value: []byte(fmt.Sprint(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce record %d without a controller quorum: %v", i, err)
		}
		if r.ProducerID < 0 || r.Offset != int64(i) {
			t.Fatalf("record %d: producer id %d offset %d, want an idempotent producer's at offset %d", i, r.ProducerID, r.Offset, i)
		}
	}
}
