package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// fastFailover are settings that make a cluster notice a lost broker in
// about two seconds instead of Kafka's nine to thirty.
var fastFailover = []string{
	"broker.session.timeout.ms=2000",
	"broker.heartbeat.interval.ms=250",
	"replica.lag.time.max.ms=2000",
	"replica.fetch.wait.max.ms=100",
	"replica.fetch.backoff.ms=100",
	"group.initial.rebalance.delay.ms=0",
}

// partitionState is one partition as a node's Metadata shows it.
type partitionState struct {
	leader, epoch int32
	replicas, isr []int32
}

// partitions returns a topic's partitions in node's Metadata (nil when
// the node does not answer or does not know the topic).
func (n *clusterNode) partitions(topic string) []partitionState {
	m, err := n.metadata(context.Background())
	if err != nil {
		return nil
	}
	for _, t := range m.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		out := make([]partitionState, len(t.Partitions))
		for _, p := range t.Partitions {
			out[p.Partition] = partitionState{p.Leader, p.LeaderEpoch, p.Replicas, p.ISR}
		}
		return out
	}
	return nil
}

// waitPartitions waits until every serving node's Metadata shows topic's
// partitions satisfying ok, and returns what the last node showed.
func (c *cluster) waitPartitions(topic, what string, ok func([]partitionState) bool) []partitionState {
	c.t.Helper()
	return c.waitPartitionsOn(nil, topic, what, ok)
}

// waitPartitionsOn is waitPartitions as the serving nodes other than
// except show it: a node whose disk is full cannot write the controller's
// log either, so its image stays behind until the disk has room again.
func (c *cluster) waitPartitionsOn(except *clusterNode, topic, what string, ok func([]partitionState) bool) []partitionState {
	c.t.Helper()
	var last []partitionState
	// A cluster that never gets there is stuck: its stacks say where.
	wait := mqtest.Wait{Timeout: clusterReadyTimeout, OnTimeout: c.dumpStacks}
	wait.For(c.t, what, func() (bool, string) {
		for _, node := range c.serving() {
			if node == except {
				continue
			}
			last = node.partitions(topic)
			if last == nil || !ok(last) {
				return false, fmt.Sprintf("node %d shows %s as %+v", node.id, topic, last)
			}
		}
		return true, ""
	})
	return last
}

// fullISR: every partition led and every replica in sync.
func fullISR(ps []partitionState) bool {
	for _, p := range ps {
		if p.leader < 0 || len(p.isr) != len(p.replicas) {
			return false
		}
	}
	return true
}

// createRF3 creates topic with RF=3 and min.insync.replicas=2 and waits
// until it is fully in sync.
func (c *cluster) createRF3(topic string, partitions int32) {
	c.t.Helper()
	minISR := "2"
	resp, err := c.admin().CreateTopic(ctxFor(c.t, time.Minute), partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create %s: %v", topic, err)
	}
	c.waitPartitions(topic, topic+" in sync", fullISR)
}

// acked is what an acks=all producer had acknowledged: the offset of each
// record, and each key's records in the order they were produced.
type acked struct {
	mu       sync.Mutex
	offsets  map[string]int64     // "partition/value" → offset
	byKey    map[string][]string  // key → values in produce order (acknowledged ones)
	sent     map[string]time.Time // "partition/value" → when its produce began
	failed   []error
	attempts int // produce calls, acknowledged or not
}

func newAcked() *acked {
	return &acked{offsets: map[string]int64{}, byKey: map[string][]string{}, sent: map[string]time.Time{}}
}

// producer produces keyed records with acks=all (idempotent, kgo's
// default) until stop, one in flight per key at a time so that each key's
// acknowledged order is its produce order. Its keys and values begin with
// name, so producers of different names sharing one acked write
// different values.
type producer struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	n        int
}

func startProducer(t *testing.T, cl *kgo.Client, topic, name string, a *acked) *producer {
	return startPacedProducer(t, cl, topic, name, a, 0)
}

// startPacedProducer is startProducer with each key's produce calls at
// least pace apart (a rate, for long runs whose bookkeeping of every
// record would otherwise grow too large); 0: as fast as acknowledged.
func startPacedProducer(t *testing.T, cl *kgo.Client, topic, name string, a *acked, pace time.Duration) *producer {
	p := &producer{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(p.abandon)
	go func() {
		defer close(p.done)
		var wg sync.WaitGroup
		for k := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := name + "key-" + strconv.Itoa(k)
				var tick <-chan time.Time
				if pace > 0 {
					ticker := time.NewTicker(pace)
					defer ticker.Stop()
					tick = ticker.C
				}
				for i := 0; ; i++ {
					select {
					case <-p.stop:
						return
					default:
					}
					if tick != nil {
						select {
						case <-p.stop:
							return
						case <-tick:
						}
					}
					v := key + "/" + strconv.Itoa(i)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					began := time.Now()
					r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(v)}).First()
					cancel()
					a.mu.Lock()
					a.attempts++
					if err != nil {
						a.failed = append(a.failed, fmt.Errorf("%s: %w", v, err))
					} else {
						a.offsets[fmt.Sprintf("%d/%s", r.Partition, v)] = r.Offset
						a.sent[fmt.Sprintf("%d/%s", r.Partition, v)] = began
						a.byKey[key] = append(a.byKey[key], fmt.Sprintf("%d/%s", r.Partition, v))
					}
					a.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}()
	return p
}

// finish stops the producer and waits for its calls in flight; it may be
// called again (the test's cleanup calls it too, so that a test that
// fails early leaves no producer looping against a cluster that is gone:
// one once grew a CI run's test process to 8 GB of failed calls).
func (p *producer) finish() { p.stopOnce.Do(func() { close(p.stop) }); <-p.done }

// abandon stops the producer at the end of a test without waiting for
// its calls in flight: a record kgo holds for a partition without a
// leader is retried for ever, whatever ProduceSync's context says (CI saw
// a cleanup wait 13 minutes for one). The client's own cleanup, which
// runs after this one, closes it, which fails those calls, and the
// producer's goroutines, stopped, end there.
func (p *producer) abandon() { p.stopOnce.Do(func() { close(p.stop) }) }

// count is how many records have been acknowledged so far.
func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.offsets)
}

// sentSince reports whether a record of partition p whose produce began
// after t has been acknowledged.
func (a *acked) sentSince(p int32, t time.Time) bool { return len(a.since(p, t)) > 0 }

// since lists the acknowledged records of partition p whose produce began
// after t, in no order.
func (a *acked) since(p int32, t time.Time) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	prefix := strconv.Itoa(int(p)) + "/"
	var out []string
	for k, began := range a.sent {
		if strings.HasPrefix(k, prefix) && began.After(t) {
			out = append(out, k)
		}
	}
	return out
}

// waitMore waits until n more records than now are acknowledged: the
// producer is making progress.
func (a *acked) waitMore(t *testing.T, n int) {
	t.Helper()
	want := a.count() + n
	clusterWait.For(t, fmt.Sprintf("%d more records acknowledged", n), func() (bool, string) {
		got := a.count()
		return got >= want, fmt.Sprintf("%d of %d acknowledged", got, want)
	})
}

// verify reads topic back from the start and checks every acknowledged
// record is at its acknowledged offset and each key's records are in
// produce order.
func (a *acked) verify(t *testing.T, c *cluster, topic string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := ctxFor(t, 2*time.Minute)
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int64{}
	missing := func() int {
		n := 0
		for k := range a.offsets {
			if _, ok := seen[k]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d acknowledged records never read back", missing())
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%d/%s", r.Partition, r.Value)
			if _, dup := seen[k]; dup {
				t.Errorf("%s stored twice (offsets %d and %d)", k, seen[k], r.Offset)
			}
			seen[k] = r.Offset
		})
	}
	for k, off := range a.offsets {
		if seen[k] != off {
			t.Errorf("%s acknowledged at offset %d, stored at %d", k, off, seen[k])
		}
	}
	for key, vs := range a.byKey {
		for i := 1; i < len(vs); i++ {
			if seen[vs[i]] <= seen[vs[i-1]] {
				t.Errorf("key %s: %s (offset %d) before %s (offset %d)", key, vs[i], seen[vs[i]], vs[i-1], seen[vs[i-1]])
			}
		}
	}
}

// TestClusterLeadersKilledInTurnLoseNothingAcknowledged: with an acks=all
// producer running, the leader of each partition in turn is SIGKILLed and
// restarted. Every acknowledged record is read back at its acknowledged
// offset, each key in order, and the killed nodes rejoin every ISR.
func TestClusterLeadersKilledInTurnLoseNothingAcknowledged(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3("kills", 3)
	a := newAcked()
	p := startProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "kills", "", a)
	for part := range 3 {
		a.waitMore(t, 200)
		ps := c.waitPartitions("kills", "in sync", fullISR)
		victim := c.node(ps[part].leader)
		killed := time.Now()
		victim.kill()
		clusterWait.For(t, "a record produced since the kill acknowledged", func() (bool, string) {
			return a.sentSince(int32(part), killed), "no record of the partition produced since the kill acknowledged"
		})
		t.Logf("failover: partition %d's leader %d SIGKILLed; a record produced after it was acknowledged %v later",
			part, victim.id, time.Since(killed).Round(time.Millisecond))
		c.waitPartitions("kills", "new leader of partition "+strconv.Itoa(part), func(ps []partitionState) bool {
			return ps[part].leader >= 0 && ps[part].leader != victim.id
		})
		a.waitMore(t, 200) // producing goes on with 2 of 3
		victim.start()
		c.waitPartitions("kills", "whole ISR again", fullISR)
	}
	p.finish()
	if len(a.failed) > 0 {
		t.Logf("%d produce requests failed (first: %v); they were not acknowledged", len(a.failed), a.failed[0])
	}
	a.verify(t, c, "kills")
}

// TestClusterRollingRestartFailsNoProduce: SIGTERM and restart every node
// in turn, waiting for the whole ISR in between as an operator would.
// Controlled shutdown moves leaderships before a node stops serving, so
// an acks=all producer running throughout sees no failed request.
func TestClusterRollingRestartFailsNoProduce(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3("rolling", 3)
	a := newAcked()
	p := startProducer(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "rolling", "", a)
	for _, node := range c.nodes {
		a.waitMore(t, 100)
		node.stop()
		node.start()
		c.waitPartitions("rolling", fmt.Sprintf("whole ISR after restarting node %d", node.id), fullISR)
	}
	a.waitMore(t, 100)
	p.finish()
	if len(a.failed) > 0 {
		t.Fatalf("%d produce requests failed during the rolling restart, first: %v", len(a.failed), a.failed[0])
	}
	a.verify(t, c, "rolling")
}

// TestClusterPausedFollowersLeaveTheISR: a follower SIGSTOPped past
// replica.lag.time.max.ms leaves the ISR and acks=all goes on with 2 of 3;
// with a second one stopped acks=all is refused with NOT_ENOUGH_REPLICAS,
// never acknowledged; continued, both rejoin the ISR.
func TestClusterPausedFollowersLeaveTheISR(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	// The partition is led by the controller quorum's leader, so that the
	// followers paused below are Raft followers: pausing the Raft leader
	// would move the controller, and with fast failover the partition's
	// leadership with it (CI saw NOT_LEADER_FOR_PARTITION).
	rl := c.raftLeader(t)
	replicas := []int32{rl}
	for _, n := range c.nodes {
		if n.id != rl {
			replicas = append(replicas, n.id)
		}
	}
	c.createTopicOn("paused", [][]int32{replicas}, map[string]string{"min.insync.replicas": "2"})
	ps := c.waitPartitions("paused", "in sync", fullISR)
	var followers []*clusterNode
	for _, r := range ps[0].replicas {
		if r != ps[0].leader {
			followers = append(followers, c.node(r))
		}
	}
	// Straight to the leader, one request each (no client retries, no
	// metadata from a paused node): what the leader answers.
	leader := c.node(ps[0].leader)
	direct := leader.client().SeedBrokers()[0]
	produce := func(v string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 3000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "paused"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = encodeBatch(-1, -1, -1, []byte(v))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, direct)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err := produce("all three"); err != nil {
		t.Fatal(err)
	}

	followers[0].pause()
	c.waitPartitions("paused", "ISR without the paused follower", func(ps []partitionState) bool {
		return len(ps[0].isr) == 2 && !slices.Contains(ps[0].isr, followers[0].id)
	})
	if err := produce("two of three"); err != nil {
		t.Fatalf("acks=all with 2 of 3 in sync and min.insync.replicas=2: %v", err)
	}
	// mqctl shows it under-replicated, with the paused node out of the ISR.
	res := runTool(t, 30*time.Second, "", "mqctl", "-b", leader.addr, "topic", "describe", "--under-replicated", "-o", "json")
	if res.code != 0 || !strings.Contains(res.stdout, `"topic":"paused"`) {
		t.Errorf("mqctl topic describe --under-replicated: exit %d, %s%s", res.code, res.stdout, res.stderr)
	}

	// An attempt the leader takes before it sees the second follower fall
	// behind times out (REQUEST_TIMED_OUT: not acknowledged, and it may be
	// stored later); once it sees it, writes are refused and not stored.
	followers[1].pause()
	var refused []string
	attempt := 0
	clusterWait.For(t, "3 records refused with NOT_ENOUGH_REPLICAS", func() (bool, string) {
		attempt++
		v := "one of three #" + strconv.Itoa(attempt)
		err := produce(v)
		if errors.Is(err, kerr.NotEnoughReplicas) {
			refused = append(refused, v)
		} else if err == nil {
			t.Fatalf("%s acknowledged with acks=all and one of three replicas", v)
		}
		return len(refused) >= 3, fmt.Sprint(err)
	})

	followers[0].cont()
	followers[1].cont()
	c.waitPartitions("paused", "whole ISR again", fullISR)
	// Through a client that follows the leadership: once the quorum is
	// back, the controller may have moved it (CI saw NOT_LEADER here).
	healed := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := healed.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Topic: "paused", Value: []byte("three again")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Nothing refused was stored.
	consumer := c.client(kgo.ConsumeTopics("paused"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxFor(t, time.Minute)
	var got []string
	for !slices.Contains(got, "three again") {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %q", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for _, v := range refused {
		if slices.Contains(got, v) {
			t.Errorf("%s was refused with NOT_ENOUGH_REPLICAS, and stored: %q", v, got)
		}
	}
}

// raftLeader asks any node which node leads the controller quorum.
func (c *cluster) raftLeader(t *testing.T) int32 {
	t.Helper()
	var leader int32 = -1
	clusterWait.For(t, "a node to name the Raft leader", func() (bool, string) {
		for _, node := range c.serving() {
			req := kmsg.NewPtrDescribeQuorumRequest()
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = "__cluster_metadata"
			rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := req.RequestWith(ctx, node.client())
			cancel()
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].ErrorCode == 0 {
				leader = resp.Topics[0].Partitions[0].LeaderID
				return leader > 0, ""
			}
		}
		return false, "no node answered DescribeQuorum"
	})
	return leader
}

// TestClusterControllerKilledDuringTopicCreation: killing the Raft leader
// while topics are being created elects another; creation goes on, and
// every topic acknowledged as created is there afterwards. The topics have
// two replicas, which the two live brokers can hold: with three, every
// creation after the dead broker is fenced would rightly be refused
// (INVALID_REPLICATION_FACTOR), and how many came before depended on the
// machine's speed.
func TestClusterControllerKilledDuringTopicCreation(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	leader := c.node(c.raftLeader(t))
	var others []string
	for _, node := range c.nodes {
		if node != leader {
			others = append(others, node.addr)
		}
	}
	adm := kadm.NewClient(c.client(kgo.SeedBrokers(others...), kgo.RetryTimeout(time.Minute)))
	ctx := ctxFor(t, 2*time.Minute)
	var created []string
	for i := range 40 {
		if i == 10 {
			leader.kill()
		}
		name := "created-" + strconv.Itoa(i)
		resp, err := adm.CreateTopic(ctx, 1, 2, nil, name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists): // a retry of a creation that had committed
			created = append(created, name)
		default:
			t.Logf("create %s: %v", name, err)
		}
	}
	if len(created) < 30 {
		t.Fatalf("only %d of 40 topics created across the controller's death", len(created))
	}
	if next := c.raftLeader(t); next == leader.id {
		t.Fatalf("node %d still leads the quorum after SIGKILL", next)
	}
	leader.start()
	clusterWait.For(t, "every node to know every topic created", func() (bool, string) {
		for _, node := range c.nodes {
			m, err := node.metadata(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, name := range created {
				if topicLeaders(m, name) == nil {
					return false, fmt.Sprintf("node %d does not know %s", node.id, name)
				}
			}
		}
		return true, ""
	})
}

// TestClusterGroupSurvivesItsCoordinatorsLoss: a consumer group keeps
// consuming through the SIGKILL of its coordinator's broker, and resumes
// from its committed offsets: every record is read, none is skipped.
func TestClusterGroupSurvivesItsCoordinatorsLoss(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3("jobs", 3)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := ctxFor(t, 3*time.Minute)
	produceRange := func(from, to int) {
		for i := from; i < to; i++ {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Key: []byte(strconv.Itoa(i)), Value: []byte("job-" + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce job %d: %v", i, err)
			}
		}
	}
	produceRange(0, 300)
	consumer := c.client(kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("jobs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(30*time.Second), kgo.RetryTimeout(time.Minute))
	seen := map[string]bool{}
	consume := func(want int) {
		t.Helper()
		for len(seen) < want {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d jobs", len(seen), want)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("commit: %v", err)
			}
		}
	}
	consume(300)

	// Kill the group's coordinator.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "workers"
	resp, err := req.RequestWith(ctx, producer)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	coordinator := c.node(resp.NodeID)
	coordinator.kill()
	produceRange(300, 600)
	consume(600)
	coordinator.start()

	// A new member of the group starts from the committed offsets: it
	// reads only what comes after them. (The new coordinator restores the
	// members from the group's record; a commit it refuses while it is
	// still loading is tried again.)
	clusterWait.For(t, "the group's offsets committed", func() (bool, string) {
		err := consumer.CommitUncommittedOffsets(ctx)
		if err != nil {
			consumer.PollFetches(ctxFor(t, 100*time.Millisecond))
		}
		return err == nil, fmt.Sprint(err)
	})
	consumer.Close()
	// What the group has committed, as the coordinator of now answers it.
	committed, err := c.admin().FetchOffsets(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	produceRange(600, 610)
	next := c.client(kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var after []string
	missing := func() bool {
		for i := 600; i < 610; i++ {
			if !slices.Contains(after, "job-"+strconv.Itoa(i)) {
				return true
			}
		}
		return false
	}
	for missing() {
		fs := next.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after the committed offsets: %q", after)
		}
		fs.EachRecord(func(r *kgo.Record) {
			after = append(after, string(r.Value))
			if o, ok := committed.Lookup("jobs", r.Partition); !ok || r.Offset < o.At {
				t.Errorf("a new member read %s at %d-%d, below the committed offset %+v", r.Value, r.Partition, r.Offset, o)
			}
		})
	}
}

// TestKcatProducesAndConsumesThroughALeaderKill: librdkafka produces with
// acks=all and consumes through the SIGKILL of the partition's leader.
func TestKcatProducesAndConsumesThroughALeaderKill(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: fastFailover})
	c.createRF3("kc", 1)
	var before []string
	for i := range 50 {
		before = append(before, "a"+strconv.Itoa(i))
	}
	kcatAt(t, c.bootstrapList(), strings.Join(before, "\n")+"\n", "-P", "-t", "kc", "-p", "0", "-X", "acks=all")
	ps := c.waitPartitions("kc", "in sync", fullISR)
	c.node(ps[0].leader).kill()
	c.waitPartitions("kc", "a new leader", func(ps2 []partitionState) bool {
		return ps2[0].leader >= 0 && ps2[0].leader != ps[0].leader
	})
	var after []string
	for i := range 50 {
		after = append(after, "b"+strconv.Itoa(i))
	}
	kcatAt(t, c.bootstrapList(), strings.Join(after, "\n")+"\n", "-P", "-t", "kc", "-p", "0", "-X", "acks=all")
	out := kcatAt(t, c.bootstrapList(), "", "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e", "-q")
	got := strings.Fields(out)
	if want := append(before, after...); !slices.Equal(got, want) {
		t.Fatalf("kcat read %d records, want %d in order:\n%s", len(got), len(want), out)
	}
}
