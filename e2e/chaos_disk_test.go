package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The disk rows of the chaos matrix: power loss (a node's disk keeps only
// what its file system wrote back or fsynced) and a full disk, on nodes
// whose data directories are ext4 loop disks (loopDisk).

// diskSize is the size of a loop disk that only has to hold a short row.
const diskSize = 64 << 20

// createTopic creates topic with partitions, replication factor rf and
// configs, and waits until every partition is led with its whole ISR.
func (c *cluster) createTopic(topic string, partitions int32, rf int16, configs map[string]string) {
	c.t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := c.admin().CreateTopic(ctxFor(c.t, time.Minute), partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create %s: %v", topic, err)
	}
	c.waitPartitions(topic, topic+" in sync", fullISR)
}

// endOffsets returns the log end offsets (high-water marks) of topic's
// partitions, waiting until every partition answers.
func (c *cluster) endOffsets(topic string, partitions int) []int64 {
	c.t.Helper()
	adm := c.admin()
	out := make([]int64, partitions)
	waitFor(c.t, clusterReadyTimeout, func() (bool, string) {
		ends, err := adm.ListEndOffsets(context.Background(), topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range partitions {
			e, ok := ends.Lookup(topic, int32(p))
			if !ok || e.Err != nil {
				return false, fmt.Sprintf("ListOffsets of %s-%d: %v", topic, p, e.Err)
			}
			out[p] = e.Offset
		}
		return true, ""
	})
	return out
}

// TestPowerLossLosesWhatWasNotFsynced checks the power loss itself: one
// node, a topic with flush.policy=always and one with flush.policy=os,
// records produced to both (acks=1), the power cut. The first keeps every
// acknowledged record; the second has lost what ext4 had not written back
// (all of it, written a moment before: writeback waits 30 s). Were the
// fault a mere crash, the page cache would keep both.
func TestPowerLossLosesWhatWasNotFsynced(t *testing.T) {
	c := startCluster(t, 1, clusterOpts{disks: map[int32]int64{1: diskSize}})
	c.createTopic("synced", 1, 1, map[string]string{"flush.policy": "always"})
	c.createTopic("unsynced", 1, 1, map[string]string{"flush.policy": "os"})
	cl := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	ctx := ctxFor(t, time.Minute)
	const n = 500
	for _, topic := range []string{"synced", "unsynced"} {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	c.powerLoss(c.node(1))
	c.node(1).start()
	c.waitMetadata()
	synced, unsynced := c.endOffsets("synced", 1)[0], c.endOffsets("unsynced", 1)[0]
	t.Logf("after the power loss: flush.policy=always kept %d of %d acknowledged records, flush.policy=os %d of %d", synced, n, unsynced, n)
	if synced != n {
		t.Errorf("flush.policy=always: %d of %d acknowledged records after a power loss, want all", synced, n)
	}
	if unsynced >= n {
		t.Errorf("flush.policy=os: all %d records written a moment before the power loss survived it: the fault lost no page cache", n)
	}
}

// onDisks gives each of n nodes a loop disk of size bytes.
func onDisks(n int, size int64) map[int32]int64 {
	disks := map[int32]int64{}
	for id := range int32(n) {
		disks[id+1] = size
	}
	return disks
}

// withProps is fastFailover and more properties.
func withProps(props ...string) []string {
	return append(slices.Clone(fastFailover), props...)
}

// powerLossLeader cuts the power of a partition's leader, keeps it down
// for down and starts it again on what its disk kept.
func (n *nemesis) powerLossLeader(down time.Duration) {
	_, victim := n.victim("power loss of", down)
	n.c.powerLoss(victim)
	n.hold(down)
	victim.start()
	n.logf("node %d started on what its disk kept", victim.id)
}

// powerLossCluster cuts the power of every node at once, keeps them down
// for down and starts them together on what their disks kept.
func (n *nemesis) powerLossCluster(down time.Duration) {
	n.logf("power loss of the whole cluster for %v", down)
	n.c.powerLoss(n.c.nodes...)
	n.hold(down)
	n.c.startTogether(n.c.nodes...)
	n.logf("every node started on what its disk kept")
}

// TestChaosPowerLossOneNode (row 6a): with flush.policy=always, a
// partition's leader loses power and comes back on what its disk kept,
// and every other fault the whole cluster does. Every ISR member fsynced
// an acknowledged record before it counted for the high-water mark, so
// none is lost, and the replicas do not diverge. (The single losses alone
// could not catch a missing fsync: another replica's page cache keeps the
// records; the whole cluster's loss can.)
func TestChaosPowerLossOneNode(t *testing.T) {
	faults := 0
	runChaosRow(t, chaosRow{
		name:    "power-loss-always",
		cluster: clusterOpts{props: withProps("log.flush.policy=always"), disks: onDisks(3, diskSize)},
		fault: func(n *nemesis) {
			if faults++; faults%2 == 1 {
				n.powerLossLeader(n.between(300*time.Millisecond, 1500*time.Millisecond))
			} else {
				n.powerLossCluster(n.between(300*time.Millisecond, time.Second))
			}
			n.hold(n.between(time.Second, 2*time.Second))
		},
	})
}
