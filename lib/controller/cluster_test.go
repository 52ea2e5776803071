package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mqproject/mq/lib/mqtest"
)

// testCluster runs controllers in-process on loopback ports (an
// mqtest.Cluster): voters 1..n and non-voters after them.
type testCluster struct {
	*mqtest.Cluster[*Controller]
	t      *testing.T
	voters []Voter
	tweak  func(*Config)
}

// testRaftTimeout makes elections quick but not so quick that a busy
// machine under -race keeps electing.
const testRaftTimeout = 500 * time.Millisecond

// startCluster starts voters voters and nonVoters non-voters, each
// configured by tweak (may be nil).
func startCluster(t *testing.T, voters, nonVoters int, tweak func(*Config)) *testCluster {
	t.Helper()
	tc := newCluster(t, voters, nonVoters, tweak)
	tc.StartAll()
	return tc
}

// newCluster is startCluster without the start.
func newCluster(t *testing.T, voters, nonVoters int, tweak func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, tweak: tweak}
	tc.Cluster = mqtest.NewCluster(t, voters, mqtest.Lifecycle[*Controller]{Start: tc.open, Stop: (*Controller).Close})
	for range nonVoters {
		tc.AddNonVoter()
	}
	vs, err := ParseVoters(tc.Voters())
	if err != nil {
		t.Fatal(err)
	}
	tc.voters = vs
	return tc
}

func (tc *testCluster) open(m mqtest.Member) (*Controller, error) {
	cfg := Config{NodeID: m.ID, Dir: m.Dir, Voters: tc.voters, RaftAddr: m.RaftAddr, raftTimeout: testRaftTimeout}
	if tc.tweak != nil {
		tc.tweak(&cfg)
	}
	return Open(cfg)
}

// leader waits for an active controller among the running nodes.
func (tc *testCluster) leader() *Controller {
	tc.t.Helper()
	var leader *Controller
	mqtest.WaitFor(tc.t, "an active controller", func() (bool, string) {
		for _, c := range tc.Running() {
			if c.isActive() {
				leader = c
				return true, ""
			}
		}
		return false, "no active controller"
	})
	return leader
}

// converged waits until every running node's image has the content of
// want's.
func (tc *testCluster) converged(want *Controller) {
	tc.t.Helper()
	mqtest.WaitFor(tc.t, fmt.Sprintf("every image to be node %d's", want.cfg.NodeID), tc.Each(func(_ int32, c *Controller) (bool, string) {
		w, got := content(tc.t, want.Image()), content(tc.t, c.Image())
		return got == w, fmt.Sprintf("image\n%s\nwant\n%s", got, w)
	}))
}

// heartbeats sends broker id's heartbeats through its own node every
// interval until stop is called.
func (tc *testCluster) heartbeats(id int32, epoch int64, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			c := tc.Get(id)
			if c == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.Heartbeat(ctx, Heartbeat{BrokerID: id, BrokerEpoch: epoch, AppliedVersion: c.Image().Version})
			cancel()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestRaftTransportDoesNotPipeline: replication to each follower is one
// AppendEntries at a time. hashicorp/raft's pipelined path can deadlock
// (see Open), so the transport must refuse to pipeline.
func TestRaftTransportDoesNotPipeline(t *testing.T) {
	tc := startCluster(t, 3, 0, nil)
	tc.leader()
	for id := int32(1); id <= 3; id++ {
		_, err := tc.Get(id).transport.AppendEntriesPipeline("peer", "127.0.0.1:1")
		if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
			t.Errorf("node %d: AppendEntriesPipeline: %v, want %v", id, err, raft.ErrPipelineReplicationNotSupported)
		}
	}
}

// TestClusterOfVotersAndNonVoter runs 3 voters and a non-voter through
// forwarding, controlled shutdown and the loss of the Raft leader. It runs
// on wall time: Raft elects on its own timers, and the brokers heartbeat
// from goroutines. How the active controller times sessions out and
// rebalances leaders is stepped on a manual clock in liveness_test.go.
func TestClusterOfVotersAndNonVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four raft nodes over TCP")
	}
	const session = 1500 * time.Millisecond
	tc := startCluster(t, 3, 1, func(c *Config) { c.BrokerSessionTimeout = session })
	leader := tc.leader()

	// Every node registers its own broker through its own controller:
	// followers and the non-voter forward to the leader.
	epochs := map[int32]int64{}
	stops := map[int32]func(){}
	for id := int32(1); id <= 4; id++ {
		epoch, err := tc.Get(id).RegisterBroker(ctxFor(t, 20*time.Second), Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id})
		if err != nil {
			t.Fatalf("register broker %d through its node: %v", id, err)
		}
		epochs[id] = epoch
		stops[id] = tc.heartbeats(id, epoch, 100*time.Millisecond)
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	if b := leader.Image().Brokers[4]; b.Epoch != epochs[4] || b.RaftAddr != tc.Member(4).RaftAddr {
		t.Fatalf("broker 4 in the image: %+v, registered with epoch %d", b, epochs[4])
	}

	var follower *Controller
	for id := int32(1); id <= 3; id++ {
		if c := tc.Get(id); c != leader {
			follower = c
			break
		}
	}
	nonVoter := tc.Get(4)
	t.Run("forwarding", func(t *testing.T) {
		if _, err := follower.CreateTopic(ctxFor(t, 10*time.Second), CreateTopic{Name: "from-follower", Partitions: 4, ReplicationFactor: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := nonVoter.CreateTopic(ctxFor(t, 10*time.Second), CreateTopic{Name: "from-non-voter", Partitions: 4, ReplicationFactor: 2}); err != nil {
			t.Fatal(err)
		}
		// Errors come back as the same sentinels.
		if _, err := nonVoter.CreateTopic(ctxFor(t, 10*time.Second), CreateTopic{Name: "from-follower", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
			t.Fatalf("duplicate topic through the non-voter = %v, want ErrTopicExists", err)
		}
		first, err := follower.AllocateProducerIDs(ctxFor(t, 10*time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		second, err := nonVoter.AllocateProducerIDs(ctxFor(t, 10*time.Second), 10)
		if err != nil || second != first+10 {
			t.Fatalf("producer id blocks %d then %d (%v)", first, second, err)
		}
		p := leader.Image().Partition("from-follower", 0)
		got, err := nonVoter.AlterPartition(ctxFor(t, 10*time.Second), AlterPartition{
			Topic: "from-follower", Partition: 0, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader},
		})
		if err != nil || got.PartitionEpoch != p.PartitionEpoch+1 || !slices.Equal(got.ISR, []int32{p.Leader}) {
			t.Fatalf("AlterPartition through the non-voter = %+v, %v", got, err)
		}
		// Many changes in one command: each outcome comes back at its
		// index, a refusal as its sentinel.
		p1, p2 := leader.Image().Partition("from-follower", 1), leader.Image().Partition("from-follower", 2)
		batch, err := follower.AlterPartitions(ctxFor(t, 10*time.Second), []AlterPartition{
			{Topic: "from-follower", Partition: 1, Leader: p1.Leader, LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch, ISR: []int32{p1.Leader}},
			{Topic: "from-follower", Partition: 2, Leader: p2.Leader, LeaderEpoch: p2.LeaderEpoch, PartitionEpoch: p2.PartitionEpoch + 1, ISR: []int32{p2.Leader}},
			{Topic: "nope", Partition: 0, Leader: 1, ISR: []int32{1}},
		})
		if err != nil || len(batch) != 3 || batch[0].Err != nil || batch[0].Partition.PartitionEpoch != p1.PartitionEpoch+1 ||
			!errors.Is(batch[1].Err, ErrInvalidUpdateVersion) || !errors.Is(batch[2].Err, ErrUnknownTopic) {
			t.Fatalf("AlterPartitions through a follower = %+v, %v", batch, err)
		}
		results, err := follower.ElectLeaders(ctxFor(t, 10*time.Second), ElectPreferred, []TopicPartition{{"from-follower", 0}, {"nope", 0}})
		if err != nil || !errors.Is(results[TopicPartition{"from-follower", 0}], ErrElectionNotNeeded) || !errors.Is(results[TopicPartition{"nope", 0}], ErrUnknownTopic) {
			t.Fatalf("ElectLeaders through a follower = %v, %v", results, err)
		}
		tc.converged(leader)
	})

	t.Run("quorum", func(t *testing.T) {
		mqtest.WaitFor(t, "the quorum as the non-voter describes it", func() (bool, string) {
			q, err := nonVoter.Quorum(ctxFor(t, 5*time.Second))
			if err != nil {
				return false, err.Error()
			}
			var parts []string
			for _, m := range q.Members {
				parts = append(parts, fmt.Sprintf("%d@%s voter=%v beat=%v", m.ID, m.Addr, m.Voter, !m.LastHeartbeat.IsZero()))
			}
			got := strings.Join(parts, " ")
			want := fmt.Sprintf("1@%s voter=true beat=true 2@%s voter=true beat=true 3@%s voter=true beat=true 4@%s voter=false beat=true",
				tc.Member(1).RaftAddr, tc.Member(2).RaftAddr, tc.Member(3).RaftAddr, tc.Member(4).RaftAddr)
			ok := q.LeaderID == leader.cfg.NodeID && q.Term != 0 && q.LastIndex >= leader.Image().Version && got == want
			return ok, fmt.Sprintf("quorum leader=%d term=%d last=%d members %s, want leader %d members %s", q.LeaderID, q.Term, q.LastIndex, got, leader.cfg.NodeID, want)
		})
	})

	t.Run("controlled shutdown", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		// Broker 4 leads led-by-4/0, with 1 and 2 in the ISR.
		if _, err := leader.CreateTopic(ctx, CreateTopic{Name: "led-by-4", Assignments: [][]int32{{4, 1, 2}}}); err != nil {
			t.Fatal(err)
		}
		var res HeartbeatResult
		mqtest.WaitFor(t, "broker 4 to be told to shut down", func() (bool, string) {
			var err error
			res, err = nonVoter.Heartbeat(ctx, Heartbeat{BrokerID: 4, BrokerEpoch: epochs[4], AppliedVersion: nonVoter.Image().Version, WantShutDown: true})
			if err != nil {
				return false, err.Error()
			}
			return res.ShouldShutDown, fmt.Sprintf("heartbeat result %+v", res)
		})
		img := leader.Image()
		if !img.Brokers[4].InControlledShutdown {
			t.Fatal("broker 4 not in controlled shutdown")
		}
		if p := img.Partition("led-by-4", 0); p.Leader != 1 || slices.Contains(p.ISR, 4) {
			t.Fatalf("led-by-4/0 after broker 4's controlled shutdown: %+v", p)
		}
		// A new registration ends it.
		stops[4]()
		epoch, err := nonVoter.RegisterBroker(ctx, Broker{ID: 4, Host: "127.0.0.1", Port: 9094})
		if err != nil {
			t.Fatal(err)
		}
		epochs[4] = epoch
		stops[4] = tc.heartbeats(4, epoch, 100*time.Millisecond)
		if b := leader.Image().Brokers[4]; b.InControlledShutdown || b.Fenced || b.Epoch != epoch {
			t.Fatalf("broker 4 after registering again: %+v", b)
		}
	})

	t.Run("leader loss", func(t *testing.T) {
		old := leader.cfg.NodeID
		before := content(t, leader.Image())
		tc.Stop(old)
		leader = tc.leader()
		if leader.cfg.NodeID == old {
			t.Fatal("closed node still leader")
		}
		// Nothing committed is lost (the old leader's broker may be
		// fenced meanwhile, so compare topics only).
		if !strings.Contains(content(t, leader.Image()), `"name":"from-non-voter"`) || len(before) == 0 {
			t.Fatalf("new leader's image lacks committed topics")
		}
		// Commands keep working through every node left.
		for _, id := range []int32{1, 2, 3, 4} {
			c := tc.Get(id)
			if c == nil {
				continue
			}
			name := fmt.Sprintf("after-failover-%d", id)
			if _, err := c.CreateTopic(ctxFor(t, 20*time.Second), CreateTopic{Name: name, Partitions: 1, ReplicationFactor: 2}); err != nil {
				t.Fatalf("create topic through node %d after failover: %v", id, err)
			}
			if err := c.DeleteTopic(ctxFor(t, 20*time.Second), name); err != nil {
				t.Fatalf("delete topic through node %d after failover: %v", id, err)
			}
		}
		// The old leader's broker stops heartbeating with it: fenced.
		mqtest.WaitFor(t, fmt.Sprintf("broker %d (closed) to be fenced", old), func() (bool, string) {
			b := leader.Image().Brokers[old]
			return b.Fenced, fmt.Sprintf("broker %d: %+v", old, b)
		})
		tc.converged(leader)

		// The old leader comes back as a follower, the non-voter restarts:
		// both catch up with the image.
		tc.Start(old)
		tc.Stop(4)
		tc.Start(4)
		if _, err := tc.Get(4).CreateTopic(ctxFor(t, 20*time.Second), CreateTopic{Name: "after-restarts", Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		tc.converged(leader)
	})
}

func TestRestartWithOtherVotersFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	addrs := freeAddrs(t, 2)
	dir := t.TempDir()
	one := []Voter{{ID: 1, Addr: addrs[0]}}
	c, err := Open(Config{NodeID: 1, Dir: dir, Voters: one})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	two := []Voter{{ID: 1, Addr: addrs[0]}, {ID: 2, Addr: addrs[1]}}
	if c, err := Open(Config{NodeID: 1, Dir: dir, Voters: two}); !errors.Is(err, ErrVotersMismatch) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("reopen with other voters = %v, want ErrVotersMismatch", err)
	}
	// The same voters still open.
	c, err = Open(Config{NodeID: 1, Dir: dir, Voters: one})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestPeerWithOtherVotersFiresFatal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	addrs := freeAddrs(t, 3)
	voters := []Voter{{ID: 1, Addr: addrs[0]}}
	c, err := Open(Config{NodeID: 1, Dir: t.TempDir(), Voters: voters})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Node 2 believes in a second voter: its join is refused.
	other := []Voter{{ID: 1, Addr: addrs[0]}, {ID: 3, Addr: addrs[2]}}
	n, err := Open(Config{NodeID: 2, Dir: t.TempDir(), Voters: other, RaftAddr: addrs[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	select {
	case err := <-n.Fatal():
		if !errors.Is(err, ErrVotersMismatch) {
			t.Fatalf("Fatal() = %v, want ErrVotersMismatch", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no fatal error within 20s")
	}
	select {
	case err := <-c.Fatal():
		t.Fatalf("the healthy node got a fatal error: %v", err)
	default:
	}
}

// TestRaftTimeoutsOfAQuorumSuitALAN: a quorum of several voters runs
// with the LAN timeouts, pre-vote on (its transport supports it), and a
// test's raftTimeout still replaces them.
func TestRaftTimeoutsOfAQuorumSuitALAN(t *testing.T) {
	hlog := newHCLogger(slog.New(slog.DiscardHandler))
	rc := raftConfig(Config{NodeID: 1}, false, hlog)
	if rc.HeartbeatTimeout != 500*time.Millisecond || rc.ElectionTimeout != 500*time.Millisecond || rc.LeaderLeaseTimeout != 500*time.Millisecond {
		t.Errorf("timeouts: heartbeat %v, election %v, leader lease %v", rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		t.Error(err)
	}
	var transport raft.Transport = &raft.NetworkTransport{}
	if _, ok := transport.(raft.WithPreVote); !ok || rc.PreVoteDisabled {
		t.Errorf("pre-vote: transport supports it %v, disabled %v", ok, rc.PreVoteDisabled)
	}
	if rc := raftConfig(Config{NodeID: 1, raftTimeout: 2 * time.Second}, false, hlog); rc.HeartbeatTimeout != 2*time.Second || rc.LeaderLeaseTimeout != 2*time.Second {
		t.Errorf("raftTimeout 2s: heartbeat %v, leader lease %v", rc.HeartbeatTimeout, rc.LeaderLeaseTimeout)
	}
}

// TestTopicCommandsReturnOnceTheImageHereHoldsThem: a topic created,
// grown or deleted through a follower is in the follower's own image when
// the call returns, although the follower applies the leader's commits
// later than the leader (here 300 ms later): the broker that created a
// topic answers its client from an image holding it, and the client's
// next request to it finds it.
func TestTopicCommandsReturnOnceTheImageHereHoldsThem(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three raft nodes over TCP")
	}
	tc := startCluster(t, 3, 0, nil)
	leader := tc.leader()
	if _, err := leader.RegisterBroker(ctxFor(t, 10*time.Second), Broker{ID: 1, Host: "127.0.0.1", Port: 9091}); err != nil {
		t.Fatal(err)
	}
	var follower *Controller
	for _, c := range tc.Running() {
		if c != leader {
			follower = c
			break
		}
	}
	tc.converged(leader)
	follower.DelayApplyForTest(300 * time.Millisecond)
	defer follower.DelayApplyForTest(0)

	if _, err := follower.CreateTopic(ctxFor(t, 10*time.Second), CreateTopic{Name: "new", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if tp := follower.Image().Topics["new"]; tp == nil || len(tp.Partitions) != 2 {
		t.Errorf("after CreateTopic through node %d, its image has %+v, want the topic with 2 partitions", follower.cfg.NodeID, tp)
	}
	if err := follower.CreatePartitions(ctxFor(t, 10*time.Second), "new", 3, nil); err != nil {
		t.Fatal(err)
	}
	if tp := follower.Image().Topics["new"]; tp == nil || len(tp.Partitions) != 3 {
		t.Errorf("after CreatePartitions through node %d, its image has %+v, want 3 partitions", follower.cfg.NodeID, tp)
	}
	if err := follower.DeleteTopic(ctxFor(t, 10*time.Second), "new"); err != nil {
		t.Fatal(err)
	}
	if tp := follower.Image().Topics["new"]; tp != nil {
		t.Errorf("after DeleteTopic through node %d, its image still has the topic", follower.cfg.NodeID)
	}
}
