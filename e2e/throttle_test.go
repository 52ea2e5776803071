package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sizeSample is a replica's size on its node at a time.
type sizeSample struct {
	at   time.Time
	size int64
}

// sizeSampler records, every interval, the size of a partition's
// replica on one node as that node's DescribeLogDirs reports it.
type sizeSampler struct {
	mu      sync.Mutex
	samples []sizeSample
	last    string // the last error, for a failure message
	stop    chan struct{}
	done    chan struct{}
}

func sampleSize(t *testing.T, n *clusterNode, topic string, partition int32, interval time.Duration) *sizeSampler {
	s := &sizeSampler{stop: make(chan struct{}), done: make(chan struct{})}
	adm := kadm.NewClient(n.client())
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			dirs, err := adm.DescribeBrokerLogDirs(ctx, n.id, set)
			cancel()
			now := time.Now()
			s.mu.Lock()
			if err == nil {
				err = dirs.Error()
			}
			if err != nil {
				s.last = err.Error()
			} else {
				var size int64
				dirs.EachPartition(func(p kadm.DescribedLogDirPartition) { size += p.Size })
				s.samples = append(s.samples, sizeSample{now, size})
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(s.stop)
		<-s.done
	})
	return s
}

// latest is the last sample (zero before the first).
func (s *sizeSampler) latest() sizeSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sizeSample{}
	}
	return s.samples[len(s.samples)-1]
}

// at is the first sample taken at or after t.
func (s *sizeSampler) at(t time.Time) (sizeSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.samples, func(x sizeSample) bool { return !x.at.Before(t) })
	if i < 0 {
		return sizeSample{}, false
	}
	return s.samples[i], true
}

// waitPast waits until a sample taken after t exists.
func (s *sizeSampler) waitPast(t *testing.T, when time.Time, what string) {
	t.Helper()
	clusterWait.For(t, what, func() (bool, string) {
		l := s.latest()
		return l.at.After(when), fmt.Sprintf("latest sample %+v, error %q", l, s.last)
	})
}

// rate is the bytes per second the replica grew by from the first
// sample at or after from to the first at or after to.
func (s *sizeSampler) rate(t *testing.T, from, to time.Time) (float64, sizeSample, sizeSample) {
	t.Helper()
	a, ok1 := s.at(from)
	b, ok2 := s.at(to)
	if !ok1 || !ok2 || !b.at.After(a.at) {
		t.Fatalf("no samples for %v to %v", from, to)
	}
	return float64(b.size-a.size) / b.at.Sub(a.at).Seconds(), a, b
}

// TestReplicationThrottleHoldsACatchUpToTheRate: a follower that was
// down catches up at the replication throttle's rate (KIP-73), measured
// from its replica's size over time: first the leader side's rate alone,
// then, changed while the catch-up runs, the leader's raised and the
// follower's set lower, which then paces it, whatever the long-polls of
// an idle partition fetched with it. Caught up, it joins the ISR and is
// throttled no more; without the throttle it is caught up and in the ISR.
func TestReplicationThrottleHoldsACatchUpToTheRate(t *testing.T) {
	// Fetches of at most 256 KiB a partition, and long-polls (of a
	// partition with nothing new) longer than the second of rate a quota
	// saves up: a throttled partition left out of a follower's fetch
	// must be fetched again when its quota gives, not a long-poll later.
	c := startCluster(t, 3, clusterOpts{props: []string{"replica.lag.time.max.ms=3000",
		"replica.fetch.max.bytes=262144", "replica.fetch.wait.max.ms=2000"}})
	// The leader is the Raft leader, so that the follower stopped is not:
	// no controller election slows the test.
	leader := c.raftLeader(t)
	replicas := []int32{leader}
	for _, n := range c.nodes {
		if n.id != leader {
			replicas = append(replicas, n.id)
		}
	}
	const topic = "throttled"
	c.createTopicOn(topic, [][]int32{replicas}, map[string]string{"min.insync.replicas": "2"})
	c.waitPartitions(topic, "in sync", fullISR)
	// An idle partition on the same leader, not throttled: the follower
	// fetches it with the throttled one, and its long-polls must not
	// hold the throttled one back.
	c.createTopicOn("idle", [][]int32{replicas}, nil)
	c.waitPartitions("idle", "in sync", fullISR)
	follower := c.node(replicas[2])
	follower.stop()
	c.waitPartitions(topic, "the stopped follower out of the ISR", func(ps []partitionState) bool {
		return len(ps[0].isr) == 2 && !slices.Contains(ps[0].isr, follower.id)
	})

	// 48 MiB in batches of about 128 KiB, so that a rate is measured in
	// many batches.
	const value, records = 16 << 10, 3072
	produce := throttleProducer(t, c, topic, value)
	produce(records)
	adm := c.admin()
	alterTopic := func(op kadm.IncrementalOp, value *string) {
		t.Helper()
		alterThrottledReplicas(t, adm, topic, op, value, value)
	}
	alterRates := func(leaderRate, followerRate int64) {
		t.Helper()
		alterThrottleRates(t, adm, leaderRate, followerRate)
	}
	alterTopic(kadm.SetConfig, kadm.StringPtr("*"))
	alterRates(2*mib, 0)

	follower.start()
	samples := sampleSize(t, follower, topic, 0, 100*time.Millisecond)
	clusterWait.For(t, "the follower to start catching up", func() (bool, string) {
		l := samples.latest()
		return l.size > 0, fmt.Sprintf("%+v, error %q", l, samples.last)
	})
	within := func(what string, got, want float64) { t.Helper(); withinRate(t, what, got, want) }

	// The leader side alone, once the catch-up is under way.
	begun := samples.latest().at
	from, to := begun.Add(time.Second), begun.Add(5*time.Second)
	samples.waitPast(t, to, "4 s of catch-up at the leader's rate")
	r, a, b := samples.rate(t, from, to)
	within(fmt.Sprintf("leader.replication.throttled.rate 2 MiB/s (%d to %d bytes)", a.size, b.size), r, 2*mib)

	// Changed mid-catch-up: the leader's rate up, the follower's lower;
	// the follower's paces it within a second.
	changed := time.Now()
	alterRates(8*mib, 5*mib)
	from, to = changed.Add(time.Second), changed.Add(4*time.Second)
	samples.waitPast(t, to, "3 s of catch-up at the new rates")
	r, a, b = samples.rate(t, from, to)
	within(fmt.Sprintf("follower.replication.throttled.rate 5 MiB/s under a leader's 8 MiB/s (%d to %d bytes)", a.size, b.size), r, 5*mib)
	if b.size >= records*value {
		t.Fatalf("the follower caught up (%d bytes) before the rates could be measured", b.size)
	}

	// Caught up, it joins the ISR under the throttle, and is no longer
	// held to it (KIP-73): 16 MiB produced with acks=all, a rate of 1 MiB/s
	// set on both sides, reach it far faster than that.
	c.waitPartitions(topic, "the throttled follower in the ISR once caught up", fullISR)
	alterRates(mib, mib)
	before := samples.latest()
	produce(1024)
	produced := time.Now()
	samples.waitPast(t, produced, "a sample after the produce")
	b, _ = samples.at(produced)
	a = before
	r = float64(b.size-a.size) / b.at.Sub(a.at).Seconds()
	t.Logf("in the ISR under a 1 MiB/s throttle: %.2f MiB/s (%d to %d bytes)", r/mib, a.size, b.size)
	if r < 2*mib {
		t.Errorf("the follower in the ISR replicated at %.2f MiB/s, held to the throttle's 1 MiB/s", r/mib)
	}

	// Without the throttle: caught up and in the ISR.
	alterTopic(kadm.DeleteConfig, nil)
	alterRates(0, 0)
	c.waitPartitions(topic, "the follower in the ISR", fullISR)
	clusterWait.For(t, "the follower's replica as large as the produced records", func() (bool, string) {
		l := samples.latest()
		return l.size >= (records+1024)*value, fmt.Sprintf("%+v", l)
	})
}

const mib = 1 << 20

// withinRate fails t unless got (bytes per second) is within 20% of want.
func withinRate(t *testing.T, what string, got, want float64) {
	t.Helper()
	t.Logf("%s: %.2f MiB/s, limit %.2f MiB/s", what, got/mib, want/mib)
	if got < want*0.8 || got > want*1.2 {
		t.Errorf("%s: caught up at %.2f MiB/s, want within 20%% of %.2f MiB/s", what, got/mib, want/mib)
	}
}

// throttleProducer returns a func that sends n records of value random
// bytes to topic, uncompressed (the bytes produced are the bytes to
// move), in batches of about 128 KiB (a rate is measured over many), with
// acks=all, and waits for them all.
func throttleProducer(t *testing.T, c *cluster, topic string, value int) func(n int) {
	cl := c.client(kgo.ProducerBatchMaxBytes(128<<10), kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(256),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	payload := make([]byte, value)
	rand.Read(payload)
	return func(n int) {
		t.Helper()
		ctx := ctxFor(t, 2*time.Minute)
		var wg sync.WaitGroup
		var produceErr error
		var errMu sync.Mutex
		for range n {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: payload}, func(_ *kgo.Record, err error) {
				if err != nil {
					errMu.Lock()
					produceErr = err
					errMu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		if produceErr != nil {
			t.Fatalf("produce: %v", produceErr)
		}
	}
}

// alterThrottledReplicas changes topic's two throttled-replicas lists
// (op DeleteConfig: removes them).
func alterThrottledReplicas(t *testing.T, adm *kadm.Client, topic string, op kadm.IncrementalOp, leader, follower *string) {
	t.Helper()
	cfgs := []kadm.AlterConfig{
		{Op: op, Name: "leader.replication.throttled.replicas", Value: leader},
		{Op: op, Name: "follower.replication.throttled.replicas", Value: follower},
	}
	res, err := adm.AlterTopicConfigs(ctxFor(t, time.Minute), cfgs, topic)
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("alter topic configs: %v", err)
	}
}

// alterThrottleRates sets the cluster-wide rates; 0 deletes one
// (unlimited).
func alterThrottleRates(t *testing.T, adm *kadm.Client, leaderRate, followerRate int64) {
	t.Helper()
	var cfgs []kadm.AlterConfig
	for name, rate := range map[string]int64{"leader.replication.throttled.rate": leaderRate, "follower.replication.throttled.rate": followerRate} {
		if rate == 0 {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
		} else {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(fmt.Sprint(rate))})
		}
	}
	res, err := adm.AlterBrokerConfigs(ctxFor(t, time.Minute), cfgs)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("alter broker configs: %v", err)
	}
}

// TestReplicationThrottleHoldsAMoveToTheRate: a partition moved to a new
// broker (KIP-455) with the throttle a reassignment tool sets, Kafka's
// partition:broker pairs (the leader list naming the replicas the data
// moves from, the follower list the one it moves to), is copied at the
// leader's rate, then, changed mid-move, at the follower's; the move
// ends once the throttle is gone, and so do the pairs naming it.
func TestReplicationThrottleHoldsAMoveToTheRate(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{props: []string{"replica.fetch.max.bytes=262144"}})
	leader := c.raftLeader(t)
	var others []int32
	for _, n := range c.nodes {
		if n.id != leader {
			others = append(others, n.id)
		}
	}
	const topic = "moved"
	c.createTopicOn(topic, [][]int32{{leader, others[0]}}, nil)
	c.waitPartitions(topic, "in sync", fullISR)
	const value, records = 16 << 10, 2048 // 32 MiB
	throttleProducer(t, c, topic, value)(records)

	adm := c.admin()
	alterThrottledReplicas(t, adm, topic, kadm.SetConfig,
		kadm.StringPtr(fmt.Sprintf("0:%d,0:%d", leader, others[0])), kadm.StringPtr(fmt.Sprintf("0:%d", others[1])))
	alterThrottleRates(t, adm, 3*mib, 0)
	target := []int32{leader, others[0], others[1]}
	c.assign(t, topic, 0, target)

	samples := sampleSize(t, c.node(others[1]), topic, 0, 100*time.Millisecond)
	clusterWait.For(t, "the new replica to start copying", func() (bool, string) {
		l := samples.latest()
		return l.size > 0, fmt.Sprintf("%+v, error %q", l, samples.last)
	})
	begun := samples.latest().at
	from, to := begun.Add(time.Second), begun.Add(4*time.Second)
	samples.waitPast(t, to, "3 s of the move at the leader's rate")
	r, a, b := samples.rate(t, from, to)
	withinRate(t, fmt.Sprintf("leader.replication.throttled.rate 3 MiB/s, leader list naming the source replicas (%d to %d bytes)", a.size, b.size), r, 3*mib)

	// The follower's rate first: each node applies a change when its
	// image has it, and a follower unlimited on both sides for a moment
	// copies the rest at once.
	alterThrottleRates(t, adm, 3*mib, 6*mib)
	changed := time.Now()
	alterThrottleRates(t, adm, 0, 6*mib)
	from, to = changed.Add(time.Second), changed.Add(3*time.Second)
	samples.waitPast(t, to, "2 s of the move at the follower's rate")
	r, a, b = samples.rate(t, from, to)
	withinRate(t, fmt.Sprintf("follower.replication.throttled.rate 6 MiB/s, follower list naming the new replica (%d to %d bytes)", a.size, b.size), r, 6*mib)
	if b.size >= records*value {
		t.Fatalf("the new replica was copied (%d bytes) before the rates could be measured", b.size)
	}

	alterThrottleRates(t, adm, 0, 0)
	c.waitPartitions(topic, "the move done", func(ps []partitionState) bool {
		return slices.Equal(ps[0].replicas, target) && len(ps[0].isr) == 3
	})
	// The controller ends the move's throttle: no pair names partition 0.
	clusterWait.For(t, "the move's throttled replicas gone", func() (bool, string) {
		cfgs, err := adm.DescribeTopicConfigs(context.Background(), topic)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, cfg := range cfgs[0].Configs {
			if strings.HasSuffix(cfg.Key, ".replication.throttled.replicas") && cfg.Value != nil && *cfg.Value != "" {
				seen = append(seen, cfg.Key+"="+*cfg.Value)
			}
		}
		return len(seen) == 0, strings.Join(seen, ", ")
	})
}
