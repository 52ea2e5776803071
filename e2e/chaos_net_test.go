package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The network rows of the chaos matrix run on a netns cluster
// (netns_test.go): the nemesis takes links down and cuts connections
// between nodes with nft, while the clients keep their own link.

// cutWay says which connections between a leader and its followers a
// cut drops. A TCP connection needs packets both ways, so a one-way cut
// is one of connections: those one side originates (to the other's
// Kafka and Raft ports) fail, both their directions, while those the
// other side originates work.
type cutWay int

const (
	// bothWays drops every connection between them.
	bothWays cutWay = iota
	// leaderOut drops what the leader originates: its broker heartbeats
	// and forwarded controller calls when the Raft leader is a follower,
	// its Raft messages when it is the Raft leader, its fetches once it
	// follows. The followers still fetch from it.
	leaderOut
	// leaderIn drops what the followers originate: their fetches from
	// the leader, their heartbeats when it is the Raft leader, the Raft
	// leader's messages when that is a follower (the leader then loses
	// the Raft leader, cannot heartbeat, and is fenced). The leader still
	// reaches them.
	leaderIn
)

func (w cutWay) String() string {
	return [...]string{"both ways", "leader→followers", "followers→leader"}[w]
}

// others is every node but node: on the chaos rows' three nodes with
// RF=3, a partition leader's followers.
func (n *nemesis) others(node *clusterNode) []*clusterNode {
	return slices.DeleteFunc(slices.Clone(n.c.nodes), func(o *clusterNode) bool { return o == node })
}

// isolate takes node's link to the switch down for d: nothing reaches it
// and it reaches nothing, clients included; then brings it up again.
// during, if not nil, runs after the hold, before the link comes back.
func (n *nemesis) isolate(node *clusterNode, d time.Duration, during func()) {
	node.cutOff = true
	n.c.net.isolate(node.id)
	n.hold(d)
	if during != nil {
		during()
	}
	n.c.healNet()
}

// cut drops, for d, the connections between node and peers that way
// says (testNet.cut tells exactly which packets), clients untouched;
// then flushes the rules. during, if not nil, runs after the hold,
// before the cut is healed.
func (n *nemesis) cut(node *clusterNode, peers []*clusterNode, way cutWay, d time.Duration, during func()) {
	node.cutOff = true
	for _, p := range peers {
		if way != leaderIn {
			n.c.net.cut(node.id, p.id)
		}
		if way != leaderOut {
			n.c.net.cut(p.id, node.id)
		}
	}
	n.hold(d)
	if during != nil {
		during()
	}
	n.c.healNet()
}

// newLeader waits until the nodes not cut off show partition part led by
// a node other than old, and logs it.
func (n *nemesis) newLeader(part int, old *clusterNode) func() {
	return func() {
		next := n.c.waitPartitions(chaosTopic, fmt.Sprintf("a new leader of partition %d", part), func(ps []partitionState) bool {
			return len(ps) == 3 && ps[part].leader >= 0 && ps[part].leader != old.id
		})
		n.logf("partition %d is led by node %d at epoch %d, ISR %v", part, next[part].leader, next[part].epoch, next[part].isr)
	}
}

// minISRHolds waits until the nodes not cut off show partition part's
// ISR shrunk to its leader alone, below min.insync.replicas=2, lets the
// producers go on for a second, and notes as a violation every write to
// the partition begun since then that was acknowledged: the leader must
// refuse them all (NOT_ENOUGH_REPLICAS), and were it fenced meanwhile,
// no live ISR member would be left to lead. If instead the leader was
// fenced and another leads the partition, it only logs that.
func (n *nemesis) minISRHolds(part int, leader *clusterNode) func() {
	return func() {
		ps := n.c.waitPartitions(chaosTopic, fmt.Sprintf("partition %d's ISR shrunk to its leader %d, or another leader", part, leader.id), func(ps []partitionState) bool {
			return len(ps) == 3 && (ps[part].leader != leader.id || slices.Equal(ps[part].isr, []int32{leader.id}))
		})
		if ps[part].leader != leader.id {
			n.logf("partition %d is led by node %d at epoch %d, ISR %v", part, ps[part].leader, ps[part].epoch, ps[part].isr)
			return
		}
		shrunk := time.Now()
		n.hold(time.Second)
		acked := n.acked.since(int32(part), shrunk)
		slices.Sort(acked)
		n.logf("partition %d's ISR is [%d]: %d writes begun in the next second were acknowledged", part, leader.id, len(acked))
		for _, k := range acked {
			n.belowMinISR = append(n.belowMinISR, fmt.Sprintf("%s acknowledged; produced after partition %d's ISR had shrunk to [%d]", k, part, leader.id))
		}
	}
}

// raftLeaderVictim picks a partition led by the node that leads the Raft
// quorum, the one leader a leaderIn cut leaves in place, and returns it
// with its leader, logging what is done to it; nil when the Raft leader
// leads none.
func (n *nemesis) raftLeaderVictim(what string, d time.Duration) (int, *clusterNode) {
	rl := n.c.raftLeader(n.t)
	ps := n.c.waitPartitions(chaosTopic, "a leader for every partition", func(ps []partitionState) bool {
		return len(ps) == 3 && !slices.ContainsFunc(ps, func(p partitionState) bool { return p.leader < 0 })
	})
	var led []int
	for part, p := range ps {
		if p.leader == rl {
			led = append(led, part)
		}
	}
	if len(led) == 0 {
		return 0, nil
	}
	part := led[n.rng.Intn(len(led))]
	n.logf("%s node %d, Raft leader and leader of partition %d at epoch %d, for %v", what, rl, part, ps[part].epoch, d)
	return part, n.c.node(rl)
}

// inSync waits until every partition has its whole ISR again, so that a
// fault cutting off a leader leaves in-sync replicas to take over (cut
// off as the ISR's only member, it would leave the partition without a
// leader until healed, rightly, and no new leader could be waited for).
func (n *nemesis) inSync() {
	n.c.waitPartitions(chaosTopic, "the whole ISR before the next fault", fullISR)
}

// isolateLeader isolates a partition's leader from everyone for d
// (longer than the session timeout), waits until another node leads the
// partition, and heals the link.
func (n *nemesis) isolateLeader(d time.Duration) {
	n.inSync()
	part, victim := n.victim("isolate", d)
	n.isolate(victim, d, n.newLeader(part, victim))
	n.logf("node %d's link is up", victim.id)
}

// cutLeader cuts a partition's leader from its followers the way way
// says, for d, while the clients reach every node. Cut both ways, or
// from reaching the followers, the leader loses the controller, which
// fences it and elects another: that is waited for before healing. Cut
// from being reached, it stays leader if it leads the Raft quorum (else
// it misses the Raft leader's messages and is fenced too): its followers
// cannot fetch, its ISR shrinks to itself alone, and acks=all must be
// refused; that is checked before healing.
func (n *nemesis) cutLeader(way cutWay, d time.Duration) {
	n.inSync()
	what := "cut " + way.String() + " between the followers and"
	var part int
	var victim *clusterNode
	if way == leaderIn {
		part, victim = n.raftLeaderVictim(what, d)
	}
	if victim == nil {
		part, victim = n.victim(what, d)
	}
	during := n.newLeader(part, victim)
	if way == leaderIn {
		during = n.minISRHolds(part, victim)
	}
	n.cut(victim, n.others(victim), way, d, during)
	n.logf("node %d's cut is healed", victim.id)
}

// netRow is a chaos row on a netns cluster with fast failover.
func netRow(name string, fault func(n *nemesis)) chaosRow {
	return chaosRow{name: name, cluster: clusterOpts{netns: true, props: fastFailover}, fault: fault}
}

// TestChaosLeaderCutFromFollowers (row 4): an asymmetric partition. A
// partition's leader is cut from both followers, both ways, past
// broker.session.timeout.ms, while the clients still reach it and keep
// producing to it: it must acknowledge no acks=all write once its ISR
// that keeps up is below min.insync.replicas (the checker's "lost" finds
// one the new leader lacks), and must truncate when it follows again.
func TestChaosLeaderCutFromFollowers(t *testing.T) {
	runChaosRow(t, netRow("cut-leader", func(n *nemesis) {
		n.cutLeader(bothWays, n.between(2500*time.Millisecond, 4*time.Second)) // broker.session.timeout.ms=2000
		n.hold(n.between(time.Second, 2*time.Second))
	}))
}

// TestChaosLeaderCutOneWay (row 4, one way): as row 4, with only one
// direction of connections cut each time, at random: the leader's own
// (it is fenced and replaced, yet its followers could still fetch from
// it) or its followers' (they cannot fetch, the leader stays).
func TestChaosLeaderCutOneWay(t *testing.T) {
	runChaosRow(t, netRow("cut-one-way", func(n *nemesis) {
		way := leaderOut
		if n.rng.Intn(2) == 0 {
			way = leaderIn
		}
		n.cutLeader(way, n.between(2500*time.Millisecond, 4*time.Second))
		n.hold(n.between(time.Second, 2*time.Second))
	}))
}

// TestChaosIsolateLeader (row 5): a partition's leader loses its link,
// to the other nodes and to the clients, for longer than
// broker.session.timeout.ms; another is elected, and the link comes
// back. Nothing acknowledged is lost, and the old leader truncates to
// the new epoch.
func TestChaosIsolateLeader(t *testing.T) {
	runChaosRow(t, netRow("isolate-leader", func(n *nemesis) {
		n.isolateLeader(n.between(2500*time.Millisecond, 4*time.Second))
		n.hold(n.between(time.Second, 2*time.Second))
	}))
}
