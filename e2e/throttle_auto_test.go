package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAutoReplicationThrottleYieldsToProduces: with mq's auto throttle
// (replication.throttle.auto.target.ms) and a target no acks=all produce
// can meet, a follower catching up from its leader is held far below the
// ceiling (leader.replication.throttled.rate) while a producer writes to
// another topic of the same leader: the leader's
// mq_replication_throttle_rate_bytes stays low, and so does the rate the
// follower's replica grows at. With the producer stopped the rate climbs
// to the ceiling, and the catch-up runs at it.
func TestAutoReplicationThrottleYieldsToProduces(t *testing.T) {
	metricsAddrs := freeAddrs(t, 3)
	c := startCluster(t, 3, clusterOpts{
		props: []string{"replica.lag.time.max.ms=3000", "replica.fetch.max.bytes=262144"},
		nodeProps: func(id int32) []string {
			return []string{"metrics.listen=tcp://" + metricsAddrs[id-1]}
		},
	})
	leader := c.raftLeader(t)
	replicas := []int32{leader}
	for _, n := range c.nodes {
		if n.id != leader {
			replicas = append(replicas, n.id)
		}
	}
	const topic, loadTopic = "catching-up", "load"
	c.createTopicOn(topic, [][]int32{replicas}, map[string]string{"min.insync.replicas": "2"})
	c.createTopicOn(loadTopic, [][]int32{replicas[:2]}, map[string]string{"min.insync.replicas": "2"})
	c.waitPartitions(topic, "in sync", fullISR)
	c.waitPartitions(loadTopic, "in sync", fullISR)
	follower := c.node(replicas[2])
	follower.stop()
	c.waitPartitions(topic, "the stopped follower out of the ISR", func(ps []partitionState) bool {
		return len(ps[0].isr) == 2 && !slices.Contains(ps[0].isr, follower.id)
	})

	const value, records = 16 << 10, 5120 // 80 MiB to catch up on
	throttleProducer(t, c, topic, value)(records)
	adm := c.admin()
	alterThrottledReplicas(t, adm, topic, kadm.SetConfig, kadm.StringPtr("*"), kadm.StringPtr("*"))
	const ceiling = 8 * mib
	alterThrottleRates(t, adm, ceiling, 0)
	alterBrokerConfig(t, adm, "replication.throttle.auto.target.ms", "1")
	leaderMetrics := metricsAddrs[leader-1]
	rate := func() float64 {
		v, ok := sample(scrape(t, leaderMetrics), "mq_replication_throttle_rate_bytes", "side=leader")
		if !ok {
			t.Fatal("no mq_replication_throttle_rate_bytes{side=leader}")
		}
		return v
	}
	clusterWait.For(t, "the auto throttle on, at its floor", func() (bool, string) {
		r := rate()
		return r == mib, fmt.Sprintf("leader side at %.0f", r)
	})

	// acks=all produces to the leader, which no target of 1 ms lets pass.
	load := startLoad(t, c, loadTopic)
	follower.start()
	samples := sampleSize(t, follower, topic, 0, 100*time.Millisecond)
	clusterWait.For(t, "the follower to start catching up", func() (bool, string) {
		l := samples.latest()
		return l.size > 0, fmt.Sprintf("%+v, error %q", l, samples.last)
	})
	// Long enough for a controller that ignored the latency to have
	// climbed from the floor to the ceiling (about 4 s), then 3 s
	// measured, the leader's rate read all along.
	begun := samples.latest().at
	from, to := begun.Add(4*time.Second), begun.Add(7*time.Second)
	highest := 0.0
	clusterWait.For(t, "7 s of catch-up under load", func() (bool, string) {
		r := rate()
		if time.Now().After(from) {
			highest = max(highest, r)
		}
		l := samples.latest()
		return l.at.After(to), fmt.Sprintf("leader side at %.2f MiB/s, latest sample %+v, %d produced", r/mib, l, load.acked())
	})
	r, a, b := samples.rate(t, from, to)
	t.Logf("under load: the leader side at most %.2f MiB/s, the catch-up at %.2f MiB/s (%d to %d bytes), %d records produced",
		highest/mib, r/mib, a.size, b.size, load.acked())
	if highest > ceiling/4 || highest < mib {
		t.Errorf("under load the leader side went up to %.2f MiB/s, want between the floor of 1 MiB/s and a quarter of the ceiling of %.0f MiB/s", highest/mib, float64(ceiling)/mib)
	}
	if r > ceiling/2 {
		t.Errorf("under load the catch-up ran at %.2f MiB/s, want well below the ceiling of %.0f MiB/s", r/mib, float64(ceiling)/mib)
	}
	if load.acked() == 0 {
		t.Fatal("the producer got nothing acknowledged")
	}

	// No load: up to the ceiling, and the catch-up at it.
	load.stop()
	clusterWait.For(t, "the auto throttle up at its ceiling", func() (bool, string) {
		r := rate()
		return r == ceiling, fmt.Sprintf("leader side at %.2f MiB/s", r/mib)
	})
	back := time.Now()
	from, to = back.Add(500*time.Millisecond), back.Add(2500*time.Millisecond)
	samples.waitPast(t, to, "2 s of catch-up without load")
	r, a, b = samples.rate(t, from, to)
	if b.size >= records*value {
		t.Fatalf("the follower caught up (%d bytes) before the rate without load could be measured", b.size)
	}
	withinRate(t, fmt.Sprintf("without load, the auto throttle at its ceiling (%d to %d bytes)", a.size, b.size), r, ceiling)

	alterBrokerConfig(t, adm, "replication.throttle.auto.target.ms", "")
	alterThrottleRates(t, adm, 0, 0)
	c.waitPartitions(topic, "the follower in the ISR", fullISR)
}

// alterBrokerConfig sets a cluster-wide broker config; "" deletes it.
func alterBrokerConfig(t *testing.T, adm *kadm.Client, name, value string) {
	t.Helper()
	cfg := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name}
	if value != "" {
		cfg = kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}
	}
	res, err := adm.AlterBrokerConfigs(ctxFor(t, time.Minute), []kadm.AlterConfig{cfg})
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("alter broker config %s: %v", name, err)
	}
}

// load is producers sending 1 KiB records with acks=all, one at a time
// each, until stop.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	n      int
	err    error
}

func startLoad(t *testing.T, c *cluster, topic string) *load {
	cl := c.client(kgo.ProducerLinger(0))
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	value := make([]byte, 1024)
	for range 4 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
				l.mu.Lock()
				if err == nil {
					l.n++
				} else if ctx.Err() == nil {
					l.err = err
				}
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// acked is how many records were acknowledged so far.
func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}
