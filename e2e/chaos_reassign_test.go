package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestChaosReassign (row "reassign"): partitions move between four
// brokers under the row's acks=all load. Each round moves one replica of
// a random partition (the leader's, at times) onto the broker that holds
// none of it, and by the seed lets the move complete, SIGKILLs the new
// replica's broker as the move starts and restarts it while the move
// waits, or SIGKILLs it and cancels the move. Nothing acknowledged may
// be lost, reordered or duplicated, and every replica that ends up in
// the replica set holds the same log below the high-water mark.
func TestChaosReassign(t *testing.T) {
	parallel(t)
	runChaosRow(t, chaosRow{
		name:    "reassign",
		nodes:   4,
		cluster: clusterOpts{voters: 3, props: fastFailover},
		fault:   func(n *nemesis) { n.reassign() },
	})
}

// TestChaosRebalance (row "rebalance"): a cluster grows from three
// brokers to four and shrinks back, under the row's acks=all load, with
// the tools an operator uses: the chaos topic starts on brokers 1-3 with
// broker 4 empty, then the rounds alternate `mqctl cluster rebalance`
// (which moves replicas and preferred leaders onto broker 4) and
// `mqctl broker decommission 4` (which moves every replica off it),
// throttled. Nothing acknowledged may be lost, reordered or duplicated.
func TestChaosRebalance(t *testing.T) {
	parallel(t)
	runChaosRow(t, chaosRow{
		name:    "rebalance",
		nodes:   4,
		cluster: clusterOpts{voters: 3, props: fastFailover},
		topicOn: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}},
		fault:   func(n *nemesis) { n.rebalance() },
	})
}

// rebalance is one round of TestChaosRebalance: odd rounds fill broker
// 4, even ones empty it.
func (n *nemesis) rebalance() {
	n.t.Helper()
	args := []string{"cluster", "rebalance", "--throttle", "20MB"}
	if n.rounds%2 == 1 {
		args = []string{"broker", "decommission", "4", "--throttle", "20MB"}
	}
	n.logf("mqctl %s", strings.Join(args, " "))
	res := n.c.mqctl(n.t, 3*time.Minute, args...)
	if res.code != 0 {
		n.t.Fatalf("mqctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	ps := n.c.waitPartitions(chaosTopic, "every partition in sync after the moves", fullISR)
	on4 := 0
	for _, p := range ps {
		if slices.Contains(p.replicas, 4) {
			on4++
		}
	}
	n.logf("broker 4 holds %d of the 3 partitions", on4)
	if n.rounds%2 == 0 && on4 == 0 || n.rounds%2 == 1 && on4 > 0 {
		n.t.Errorf("after mqctl %s broker 4 holds %d partitions", strings.Join(args, " "), on4)
	}
}

// reassign is one round of TestChaosReassign.
func (n *nemesis) reassign() {
	n.t.Helper()
	part := n.rng.Intn(3)
	cur := n.c.waitPartitions(chaosTopic, "every partition in sync before a move", fullISR)[part]
	var to *clusterNode
	for _, node := range n.c.nodes {
		if !slices.Contains(cur.replicas, node.id) {
			to = node
		}
	}
	if to == nil {
		n.t.Fatalf("partition %d has replicas %v: no broker to move it to", part, cur.replicas)
	}
	target := slices.Clone(cur.replicas)
	i := n.rng.Intn(len(target))
	from := target[i]
	target[i] = to.id
	mode := n.rng.Intn(3)
	how := [...]string{"completes", "its new broker killed and restarted", "its new broker killed, then cancelled"}[mode]
	n.logf("move partition %d from %v (leader %d) to %v: node %d for node %d, %s", part, cur.replicas, cur.leader, target, to.id, from, how)
	n.c.assign(n.t, chaosTopic, int32(part), target)
	switch mode {
	case 0:
		n.placed(part, target)
	case 1:
		to.kill()
		n.hold(n.between(300*time.Millisecond, 1500*time.Millisecond))
		to.start()
		n.placed(part, target)
	case 2:
		to.kill()
		n.c.assign(n.t, chaosTopic, int32(part), nil)
		n.placed(part, cur.replicas)
		to.start()
	}
}

// assign asks, through kadm, for topic's partition to move to replicas
// (nil: cancels its move), failing the test on a refusal.
func (c *cluster) assign(t *testing.T, topic string, partition int32, replicas []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	if replicas == nil {
		req.CancelAssign(topic, partition)
	} else {
		req.Assign(topic, partition, replicas)
	}
	resp, err := c.admin().AlterPartitionAssignments(ctxFor(t, time.Minute), req)
	if err == nil {
		err = resp[topic][partition].Err
	}
	if err != nil {
		t.Fatalf("move %s partition %d to %v: %v", topic, partition, replicas, err)
	}
}

// placed waits until partition part of the chaos topic has exactly
// replicas, every one in sync.
func (n *nemesis) placed(part int, replicas []int32) {
	n.t.Helper()
	ps := n.c.waitPartitions(chaosTopic, fmt.Sprintf("partition %d on %v", part, replicas), func(ps []partitionState) bool {
		p := ps[part]
		return slices.Equal(p.replicas, replicas) && len(p.isr) == len(replicas) && p.leader >= 0
	})
	n.logf("partition %d on %v, led by node %d at epoch %d", part, replicas, ps[part].leader, ps[part].epoch)
}
