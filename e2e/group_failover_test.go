package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupFailoverLogs, when set, is a directory that gets each member's kgo
// log at debug level (the timeline of a group failover, with the mqd logs
// of -e2e.logs).
var groupFailoverLogs = flag.String("e2e.grouplogs", "", "a directory for the kgo debug logs of the group failover tests")

// failoverGroup is a consumer group of kgo members, each polling and
// committing what it polled synchronously before polling again (as
// mqpipe consume -g does), against a topic a producer keeps writing: the
// group consumes only while its coordinator answers.
type failoverGroup struct {
	t       *testing.T
	c       *cluster
	topic   string
	id      string
	members []*kgo.Client

	mu sync.Mutex
	// killedAt is when the coordinator was killed (zero: not yet);
	// resumed is, per partition, when a member first committed a record
	// produced after that.
	killedAt time.Time
	resumed  map[int32]time.Time
	// committers are the members that committed records since the
	// group started.
	committers map[*kgo.Client]bool
	changed    chan struct{} // closed and replaced on every commit
}

// startFailoverGroup starts n members of group id consuming topic, with
// opts (and each a debug log under -e2e.grouplogs), and waits until the
// group is settled: every partition's records committed, no rebalance
// going on.
func startFailoverGroup(t *testing.T, c *cluster, topic, id string, n int, opts ...kgo.Opt) *failoverGroup {
	t.Helper()
	g := &failoverGroup{t: t, c: c, topic: topic, id: id, resumed: map[int32]time.Time{}, committers: map[*kgo.Client]bool{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		var log io.Writer = io.Discard
		if *groupFailoverLogs != "" {
			f, err := os.Create(filepath.Join(*groupFailoverLogs, strings.ReplaceAll(t.Name(), "/", "_")+"-m"+strconv.Itoa(i)+".log"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			log = f
		}
		prefix := func() string { return time.Now().UTC().Format("15:04:05.000 ") }
		cl := c.client(append([]kgo.Opt{kgo.ConsumerGroup(id), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.WithLogger(kgo.BasicLogger(log, kgo.LogLevelDebug, prefix))}, opts...)...)
		g.members = append(g.members, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.consume(ctx, cl)
		}()
	}
	g.waitFor("every partition committed", func() bool { return len(g.resumed) == 3 })
	// The group is settled when every member commits in a round that
	// leaves every member id and generation as it was, all in one
	// generation: no rebalance is going on, and that generation's record
	// is durable (a member commits only once its SyncGroup is answered,
	// which waits for the record).
	for {
		before := g.memberGenerations()
		g.mu.Lock()
		clear(g.committers)
		g.mu.Unlock()
		g.waitFor("every member committing", func() bool { return len(g.committers) == n })
		if after := g.memberGenerations(); slices.Equal(after, before) && oneGeneration(after) {
			return g
		}
	}
}

// oneGeneration reports whether the members ("id@generation") are all in
// one generation.
func oneGeneration(members []string) bool {
	for _, m := range members {
		_, gen, _ := strings.Cut(m, "@")
		_, first, _ := strings.Cut(members[0], "@")
		if gen != first {
			return false
		}
	}
	return true
}

// consume polls and commits until ctx ends.
func (g *failoverGroup) consume(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		latest := map[int32]time.Time{}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Timestamp.After(latest[r.Partition]) {
				latest[r.Partition] = r.Timestamp
			}
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			continue
		}
		now := time.Now()
		g.mu.Lock()
		if len(latest) > 0 {
			g.committers[cl] = true
		}
		for p, at := range latest {
			if _, ok := g.resumed[p]; !ok && at.After(g.killedAt) {
				g.resumed[p] = now
			}
		}
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
}

// waitFor waits, as long as a cluster's start may take, until ok (called
// with mu held) holds.
func (g *failoverGroup) waitFor(what string, ok func() bool) {
	g.t.Helper()
	deadline := time.After(clusterReadyTimeout)
	for {
		g.mu.Lock()
		done, changed := ok(), g.changed
		resumed := fmt.Sprint(g.resumed)
		g.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			g.t.Fatalf("%s: not after %v; partitions resumed at %s", what, clusterReadyTimeout, resumed)
		}
	}
}

// killCoordinator SIGKILLs the node coordinating the group and returns
// it, when it was killed, and the partition of __consumer_offsets that
// holds the group.
func (g *failoverGroup) killCoordinator() (*clusterNode, time.Time, int32) {
	g.t.Helper()
	var id int32
	clusterWait.For(g.t, "the group's coordinator", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		id, err = findCoordinator(ctx, g.members[0], g.id)
		return err == nil, fmt.Sprint(err)
	})
	victim := g.c.node(id)
	offsets := g.c.node(id%3 + 1).partitions("__consumer_offsets")
	g.mu.Lock()
	g.killedAt = time.Now()
	clear(g.resumed)
	g.mu.Unlock()
	victim.kill()
	return victim, g.killedAt, offsetsPartition(g.id, int32(len(offsets)))
}

// TestClusterGroupKeepsItsMembersThroughItsCoordinatorsLoss: when the
// broker coordinating a group is SIGKILLed, the node that takes over its
// partition of __consumer_offsets restores the group as it was, with the
// same members, and the group consumes again without waiting for a
// session or rebalance timeout: those are minutes long here, longer than
// the test waits. Every member keeps its member id (kgo's GroupMetadata)
// through the failover; one the new coordinator did not know would get
// UNKNOWN_MEMBER_ID and join again with a new one. (Its generation may
// change: kgo ends a member's session itself when its FindCoordinator
// picks the dead broker, and joins again with its member id, which makes
// a rebalance.)
// It logs (a) how long after the kill another node led the group's
// partition and (b) how long until the group committed records produced
// after the kill on every partition: (b)-(a) is the group's own part.
func TestClusterGroupKeepsItsMembersThroughItsCoordinatorsLoss(t *testing.T) {
	parallel(t)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			c := startCluster(t, 3, clusterOpts{props: fastFailover})
			c.createRF3("gf", 3)
			producer := startPacedProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "gf", "p0-", newAcked(), 20*time.Millisecond)
			defer producer.abandon()
			g := startFailoverGroup(t, c, "gf", "gf-group", n, kgo.SessionTimeout(3*time.Minute), kgo.RebalanceTimeout(3*time.Minute))
			before := g.memberIDs()
			victim, killed, p := g.killCoordinator()
			var led time.Time
			survivor := c.node(victim.id%3 + 1)
			clusterWait.For(t, "a new leader of the group's partition", func() (bool, string) {
				ps := survivor.partitions("__consumer_offsets")
				if int(p) < len(ps) && ps[p].leader >= 0 && ps[p].leader != victim.id {
					led = time.Now()
					return true, ""
				}
				return false, fmt.Sprint(ps)
			})
			g.waitFor("the group committing records produced after the kill on every partition", func() bool { return len(g.resumed) == 3 })
			var last time.Time
			g.mu.Lock()
			for _, at := range g.resumed {
				if at.After(last) {
					last = at
				}
			}
			g.mu.Unlock()
			if after := g.memberIDs(); !slices.Equal(after, before) {
				t.Errorf("the members' ids went from %q to %q through the failover: the new coordinator did not restore them", before, after)
			}
			a, b := led.Sub(killed), last.Sub(killed)
			t.Logf("node %d killed at %s: __consumer_offsets-%d led again after (a) %v, the group consuming after (b) %v; (b)-(a) = %v",
				victim.id, killed.UTC().Format("15:04:05.000"), p, a.Round(time.Millisecond), b.Round(time.Millisecond), (b - a).Round(time.Millisecond))
		})
	}
}

// memberIDs is each member's member id, as kgo has it.
func (g *failoverGroup) memberIDs() []string {
	var out []string
	for _, cl := range g.members {
		id, _ := cl.GroupMetadata()
		out = append(out, id)
	}
	return out
}

// memberGenerations is each member's member id and generation, as kgo
// has them.
func (g *failoverGroup) memberGenerations() []string {
	var out []string
	for _, cl := range g.members {
		id, gen := cl.GroupMetadata()
		out = append(out, fmt.Sprintf("%s@%d", id, gen))
	}
	return out
}

// findCoordinator asks the cluster which node coordinates group id.
func findCoordinator(ctx context.Context, cl *kgo.Client, id string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return resp.NodeID, nil
}

// offsetsPartition is the partition of __consumer_offsets (of n) that
// holds group id: Kafka's abs(String.hashCode(id)) % n, for an ASCII id
// (the e2e tests do not link the server's lib/group).
func offsetsPartition(id string, n int32) int32 {
	var h int32
	for i := range len(id) {
		h = 31*h + int32(id[i])
	}
	if h < 0 {
		h = -h
	}
	return h % n
}
