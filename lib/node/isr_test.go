package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
)

// TestISRLoopLeavesOutBrokersShuttingDown checks that once a controlled
// shutdown took a broker out of the ISRs, the leaders do not propose it
// back while its last fetches still make it look caught up: the
// controller would refuse each proposal, a Raft command every round for
// every partition (10,000 partitions made thousands a second).
func TestISRLoopLeavesOutBrokersShuttingDown(t *testing.T) {
	c := startCluster(t, 3, func(s *config.Broker) {
		s.ReplicaLagTime = 30 * time.Second // the stopped follower looks caught up throughout
	})
	createReplicated(t, c, "down", 12)
	c.Stop(3)
	c.waitImage("node 3 out of every ISR", func(img *controller.Image) bool {
		for _, p := range img.Topics["down"].Partitions {
			if p.Leader < 0 || slices.Contains(p.ISR, 3) {
				return false
			}
		}
		return true
	})
	// rounds waits until nodes 1 and 2 have each run n more ISR rounds
	// and returns how many proposals were not confirmed.
	from := map[int32]uint64{}
	rounds := func(n uint64) (unconfirmed uint64) {
		for id, d := range c.Running() {
			from[id] = d.parts.ISRCounts().Rounds
		}
		clusterWait.For(t, fmt.Sprintf("%d ISR rounds on nodes 1 and 2", n), c.Each(func(id int32, d *Daemon) (bool, string) {
			done := d.parts.ISRCounts().Rounds - from[id]
			return done >= n, fmt.Sprintf("%d rounds", done)
		}))
		for _, d := range c.Running() {
			unconfirmed += d.parts.ISRCounts().Unconfirmed
		}
		return unconfirmed
	}
	before := rounds(2) // proposals in flight at the shutdown have ended
	if after := rounds(4); after != before {
		t.Errorf("%d ISR proposals unconfirmed in 4 rounds after node 3 shut down, want none", after-before)
	}
}

// TestISRChangesShareCommands checks that a leader whose follower died
// takes it out of the ISR of every partition in a few AlterPartition
// commands, not one each: with 10,000 partitions, one Raft command per
// change made a rejoining node wait for thousands of them.
func TestISRChangesShareCommands(t *testing.T) {
	c := startCluster(t, 3, func(s *config.Broker) {
		s.ReplicaLagTime = time.Second // well before the controller fences node 3
		// The crash closes the node's ports, which the controller would
		// take for a dead process and fence it at once: this test needs
		// it unfenced while down, as a machine that vanished would be.
		s.ProcessProbe = false
	})
	createReplicated(t, c, "many", 150)
	var before [2]struct{ shrinks, commands uint64 }
	for i := range before {
		isr := c.Get(int32(i + 1)).parts.ISRCounts()
		before[i].shrinks, before[i].commands = isr.Shrinks, isr.Commands
	}
	c.Crash(3)
	c.waitImage("node 3 out of the ISR of every partition it does not lead", func(img *controller.Image) bool {
		for _, p := range img.Topics["many"].Partitions {
			if p.Leader != 3 && slices.Contains(p.ISR, 3) {
				return false
			}
		}
		return true
	})
	var shrinks, commands uint64
	for i := range before {
		isr := c.Get(int32(i + 1)).parts.ISRCounts()
		shrinks += isr.Shrinks - before[i].shrinks
		commands += isr.Commands - before[i].commands
	}
	if shrinks < 50 || commands > shrinks/10 {
		t.Errorf("%d ISR shrinks in %d AlterPartition commands; want many shrinks, in at most a tenth as many commands", shrinks, commands)
	}
	t.Logf("%d ISR shrinks in %d commands", shrinks, commands)
}

// TestMaintainWatchesSharedPartitionsOnly checks which partitions the ISR
// loop visits: on each node, those it leads with other replicas, and no
// partition alone on a node, which has no ISR change or hand-over to
// propose; and that the set follows a change of leader.
func TestMaintainWatchesSharedPartitionsOnly(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "shared", 3)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 6, 1, nil, "alone"); err != nil || resp.Err != nil {
		t.Fatalf("create alone: %v %v", err, resp.Err)
	}
	// watched reports whether every live node's set is what img says it
	// leads of "shared", and describes the sets.
	watched := func(img *controller.Image) (bool, string) {
		ok, desc := true, ""
		for id, d := range c.Running() {
			var want, got []string
			for _, p := range img.Topics["shared"].Partitions {
				if p.Leader == id {
					want = append(want, fmt.Sprintf("shared-%d", p.ID))
				}
			}
			for _, h := range d.parts.LeadShared() {
				got = append(got, h.String())
			}
			slices.Sort(got)
			ok = ok && slices.Equal(got, want)
			desc += fmt.Sprintf(" node %d: %v, want %v;", id, got, want)
		}
		return ok, desc
	}
	var last string
	img := c.waitImage("each node watching the shared partitions it leads", func(img *controller.Image) bool {
		if img.Topics["alone"] == nil || !fullyInSync(img, "alone") {
			return false
		}
		ok, desc := watched(img)
		last = desc
		return ok
	})
	t.Logf("watched:%s", last)

	leader := img.Topics["shared"].Partitions[0].Leader
	c.Stop(leader)
	c.waitImage("the shared partitions watched by their new leaders", func(img *controller.Image) bool {
		if img.Topics["shared"].Partitions[0].Leader == leader {
			return false
		}
		ok, desc := watched(img)
		last = desc
		return ok
	})
	t.Logf("after stopping node %d:%s", leader, last)
}

// TestApplyLeavesReplicasInStateAlone checks that an image changing no
// replica's state (a topic's config) gives no replica its state again and
// leaves the replica fetchers as they are: with 10,000 partitions, doing
// so for every image was most of a broker's CPU while ISRs changed.
func TestApplyLeavesReplicasInStateAlone(t *testing.T) {
	c := startCluster(t, 3, func(s *config.Broker) {
		s.ReplicaLagTime = 30 * time.Second // no ISR change while the test runs
	})
	createReplicated(t, c, "same", 6)
	// Every node's data plane has applied its latest image: the images
	// the creation made may still be on their way.
	before := map[int32]uint64{}
	clusterWait.For(t, "every node's latest image applied", c.Each(func(id int32, d *Daemon) (bool, string) {
		applied, latest := d.parts.Applied(), d.ctrl.Image().Version
		before[id] = d.parts.StateChanges()
		return applied == latest, fmt.Sprintf("applied image %d of %d", applied, latest)
	}))
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
	if resps, err := adm.AlterTopicConfigs(ctx, alter, "same"); err != nil || resps[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	clusterWait.For(t, "the new config applied on every node", c.Each(func(_ int32, d *Daemon) (bool, string) {
		h := d.parts.Lookup("same", 0)
		if h == nil {
			return false, "same-0 not hosted"
		}
		ms := h.Config().RetentionMS
		return ms == 3600000, fmt.Sprintf("same-0 has retention.ms %d", ms)
	}))
	for id, d := range c.Running() {
		if after := d.parts.StateChanges(); after != before[id] {
			t.Errorf("node %d: %d applies changed a replica for a config change, want none", id, after-before[id])
		}
	}
}
