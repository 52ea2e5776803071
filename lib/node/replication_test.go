package node

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

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
)

// createReplicated creates topic with partitions partitions of three
// replicas and min.insync.replicas=2, and waits until every node sees
// every partition led with its whole ISR.
func createReplicated(t *testing.T, c *testCluster, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	minISR := "2"
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	c.waitImage(topic+" fully in sync", func(img *controller.Image) bool {
		tp := img.Topics[topic]
		if tp == nil {
			return false
		}
		for _, p := range tp.Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
}

// fullyInSync reports whether every partition of topic has a leader and
// every replica in its ISR. A node that restarted a moment ago may not
// have the topic in its image yet: not in sync.
func fullyInSync(img *controller.Image, topic string) bool {
	t := img.Topics[topic]
	if t == nil {
		return false
	}
	for _, p := range t.Partitions {
		if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return true
}

// isrSize is the ISR size of partition 0 of topic, -1 when the image
// does not have it yet.
func isrSize(img *controller.Image, topic string) int {
	p := img.Partition(topic, 0)
	if p == nil {
		return -1
	}
	return len(p.ISR)
}

// produceAll produces n records of keys key-0… to topic with acks=all and
// returns the offsets acknowledged, by record value.
func produceAll(t *testing.T, cl *kgo.Client, topic string, from, n int) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	var failed []error
	for i := from; i < from+n; i++ {
		wg.Add(1)
		v := "v" + strconv.Itoa(i)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i%7)), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			acked[fmt.Sprintf("%d/%s", r.Partition, v)] = r.Offset
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d produces failed, first: %v", len(failed), n, failed[0])
	}
	return acked
}

// readBack consumes topic from the start until it has every acknowledged
// record, and checks each is at its acknowledged offset.
func readBack(t *testing.T, c *testCluster, topic string, acked map[string]int64) {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]int64{}
	for len(seen) < len(acked) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d acknowledged records: %v", len(seen), len(acked), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[fmt.Sprintf("%d/%s", r.Partition, r.Value)] = r.Offset
		})
	}
	for k, off := range acked {
		if got, ok := seen[k]; !ok || got != off {
			t.Errorf("record %s acknowledged at offset %d, read at %d (found %v)", k, off, got, ok)
		}
	}
}

func TestClusterReplicatesAndSurvivesTheLossOfLeaders(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "orders", 3)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := produceAll(t, cl, "orders", 0, 300)

	// Every replica has every record: the logs end at the same offset.
	c.waitImage("logs equal", func(*controller.Image) bool {
		for p := int32(0); p < 3; p++ {
			var ends []int64
			for _, d := range c.Running() {
				if h := d.parts.Lookup("orders", p); h != nil {
					ends = append(ends, h.Log().EndOffset())
				}
			}
			if len(ends) != 3 || slices.Min(ends) != slices.Max(ends) {
				return false
			}
		}
		return true
	})

	// Crash the leader of partition 0; another ISR member takes over with
	// a new epoch, and producing goes on.
	before := c.image().Partition("orders", 0)
	dead := before.Leader
	c.Crash(dead)
	after := c.waitImage("new leader", func(img *controller.Image) bool {
		p := img.Partition("orders", 0)
		return p != nil && p.Leader >= 0 && p.Leader != before.Leader
	}).Partition("orders", 0)
	if after.LeaderEpoch <= before.LeaderEpoch || !slices.Contains(before.ISR, after.Leader) {
		t.Errorf("after the crash: %+v, before %+v", after, before)
	}
	for k, v := range produceAll(t, cl, "orders", 300, 300) {
		acked[k] = v
	}
	c.Start(dead)
	readBack(t, c, "orders", acked)
	// The crashed node catches up and rejoins every ISR.
	c.waitImage("whole ISR again", func(img *controller.Image) bool { return fullyInSync(img, "orders") })
}

func TestClusterRefusesAcksAllWithoutEnoughInSyncReplicas(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "strict", 1)
	p := c.image().Partition("strict", 0)
	var followers []int32
	for _, r := range p.Replicas {
		if r != p.Leader {
			followers = append(followers, r)
		}
	}
	// The first records go with retries: the image names the leader a
	// moment before the leader's broker has taken the partition up, and a
	// busy machine sees NOT_LEADER_FOR_PARTITION in between.
	produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "strict", 0, 10)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1),
		kgo.ProduceRequestTimeout(2*time.Second))
	produceAll(t, cl, "strict", 10, 1) // now led: the strict client's records are answered

	c.Crash(followers[0])
	c.waitImage("ISR of 2", func(img *controller.Image) bool { return isrSize(img, "strict") == 2 })
	produceAll(t, cl, "strict", 11, 10) // 2 of 3 is enough

	// With both followers gone the controller has lost its quorum too, so
	// the ISR cannot shrink in the image; the leader refuses acks=all
	// once the followers have not kept up for replica.lag.time.max.ms.
	c.Crash(followers[1])
	var err error
	clusterWait.For(t, "acks=all produce refused with NOT_ENOUGH_REPLICAS", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "strict", Value: []byte("refused")}).FirstErr()
		return errors.Is(err, kerr.NotEnoughReplicas), fmt.Sprintf("produce: %v", err)
	})
	c.Start(followers[0])
	c.waitImage("ISR of 2 again", func(img *controller.Image) bool { return isrSize(img, "strict") >= 2 })
	produceAll(t, cl, "strict", 21, 10)
}

func TestClusterRollingRestartLosesNoAcknowledgedProduce(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "rolling", 3)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	acked := map[string]int64{}
	var failed []error
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			wg.Add(1)
			v := "r" + strconv.Itoa(i)
			cl.Produce(context.Background(), &kgo.Record{Topic: "rolling", Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked[fmt.Sprintf("%d/%s", r.Partition, v)] = r.Offset
			})
			if i%50 == 49 {
				<-time.After(time.Millisecond) // a steady stream, not a flood
			}
		}
	}()
	for _, m := range c.Members() {
		c.Stop(m.ID)
		c.Start(m.ID)
		c.waitImage(fmt.Sprintf("whole ISR after restarting node %d", m.ID), func(img *controller.Image) bool { return fullyInSync(img, "rolling") })
	}
	cancel()
	<-done
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d produces failed during the rolling restart, first: %v", len(failed), failed[0])
	}
	if len(acked) == 0 {
		t.Fatal("nothing produced")
	}
	readBack(t, c, "rolling", acked)
}

func TestClusterNonVoterHoldsTheImageAndReplicas(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.addNonVoter()
	c.waitImage("4 brokers", func(img *controller.Image) bool { return len(img.Brokers) == 4 })
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 4, 4, nil, "wide")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.waitImage("wide in sync", func(img *controller.Image) bool {
		t := img.Topics["wide"]
		return t != nil && len(t.Partitions[3].ISR) == 4
	})
	acked := produceAll(t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), "wide", 0, 100)
	readBack(t, c, "wide", acked)
	if h := c.Get(4).parts.Lookup("wide", 0); h == nil || h.Log().EndOffset() == 0 {
		t.Errorf("the non-voter holds no data of wide-0: %v", h)
	}
}

func TestClusterConfigurationErrors(t *testing.T) {
	first := "127.0.0.1:" + strconv.Itoa(freePort(t))
	voters := "1@" + first + ",2@127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, tc := range []struct {
		name string
		mod  func(*config.Broker)
		want string
	}{
		{"not a voter and no raft address", func(s *config.Broker) { s.NodeID = 3; s.Voters = voters }, "not one of the voters"},
		{"duplicate voter id", func(s *config.Broker) { s.Voters = voters + ",1@127.0.0.1:1" }, "listed twice"},
		{"raft address of another voter", func(s *config.Broker) { s.NodeID, s.Voters, s.RaftAddress = 3, voters, first }, "voter 1's address"},
		{"a voter with another raft address", func(s *config.Broker) { s.Voters, s.RaftAddress = voters, "127.0.0.1:1" }, "give one address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSettings(t)
			tc.mod(&s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d, err := Start(ctx, Config{Settings: s})
			if err == nil {
				d.Shutdown(context.Background())
				t.Fatal("started")
			}
			var cerr *ConfigError
			if !errors.As(err, &cerr) {
				t.Fatalf("Start: %v (%T), want a ConfigError", err, err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestDataDirectoryOfAnotherNodeIsRefused(t *testing.T) {
	s := testSettings(t)
	d := startDaemon(t, s)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.NodeID = 7
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Start(ctx, Config{Settings: s})
	var cerr *ConfigError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "belongs to node 1") {
		t.Fatalf("Start as node 7 on node 1's directory: %v, want a ConfigError naming node 1", err)
	}
}

// TestClusterUncleanElection: with the whole ISR of a partition gone, the
// partition stays without a leader while unclean.leader.election.enable
// is false, rather than elect a replica that lacks acknowledged records;
// with it true, a live replica outside the ISR is elected when it comes
// back.
func TestClusterUncleanElection(t *testing.T) {
	// Heartbeats every 250ms: before an unclean election the controller
	// waits two intervals for every live replica's report of its log.
	slower := func(s *config.Broker) { s.BrokerHeartbeatInterval = 250 * time.Millisecond }
	c := startCluster(t, 3, slower)
	for range 2 { // brokers 4 and 5, not voters: the quorum outlives them
		c.addNonVoter()
	}
	c.waitImage("5 brokers", func(img *controller.Image) bool { return len(img.Brokers) == 5 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// "advanced" allows no unclean election until its replicas 5 and 4,
	// both behind 3, are back: then 4, ahead of 5, must win although 5
	// comes first in the replica list.
	for _, topic := range []struct {
		name, unclean string
		replicas      []int32
	}{{"clean", "false", []int32{4, 5}}, {"unclean", "true", []int32{4, 5}}, {"advanced", "false", []int32{3, 5, 4}}} {
		_, err := c.Get(1).ctrl.CreateTopic(ctx, controller.CreateTopic{
			Name: topic.name, Assignments: [][]int32{topic.replicas},
			Configs: map[string]string{"unclean.leader.election.enable": topic.unclean},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	both := []string{"clean", "unclean"}
	all := []string{"clean", "unclean", "advanced"}
	inSync := func(n int) func(*controller.Image) bool {
		return func(img *controller.Image) bool {
			for _, topic := range both {
				if p := img.Partition(topic, 0); p == nil || len(p.ISR) != n || p.Leader < 0 {
					return false
				}
			}
			p := img.Partition("advanced", 0)
			return p != nil && len(p.ISR) == n+1 && p.Leader == 3
		}
	}
	c.waitImage("all in sync", inSync(2))
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for _, topic := range all {
		produceAll(t, cl, topic, 0, 10)
	}
	c.Crash(5)
	c.waitImage("ISR {4} and {3 4}", inSync(1))
	for _, topic := range all {
		produceAll(t, cl, topic, 10, 10) // acknowledged without 5: 5 lacks them
	}
	c.Crash(4)
	c.waitImage("no leader, advanced ISR {3}", func(img *controller.Image) bool {
		a, b, adv := img.Partition("clean", 0), img.Partition("unclean", 0), img.Partition("advanced", 0)
		return a != nil && b != nil && a.Leader == -1 && b.Leader == -1 && slices.Equal(adv.ISR, []int32{3})
	})
	produceAll(t, cl, "advanced", 20, 10) // acknowledged by 3 alone
	c.Crash(3)
	c.waitImage("advanced has no leader", func(img *controller.Image) bool {
		p := img.Partition("advanced", 0)
		return p != nil && p.Leader == -1
	})
	c.Start(5)
	img := c.waitImage("5 leads unclean", func(img *controller.Image) bool {
		p := img.Partition("unclean", 0)
		return p != nil && p.Leader == 5
	})
	if p := img.Partition("clean", 0); p.Leader != -1 || !slices.Equal(p.ISR, []int32{4}) {
		t.Errorf("clean after 5 came back: %+v, want no leader and ISR [4] (only 4 has every acknowledged record)", p)
	}
	if p := img.Partition("unclean", 0); !slices.Equal(p.ISR, []int32{5}) {
		t.Errorf("unclean after the election: %+v, want ISR [5]", p)
	}

	c.Start(4)
	c.waitImage("4 leads clean", func(img *controller.Image) bool {
		p := img.Partition("clean", 0)
		return p != nil && p.Leader == 4
	})
	// Both replicas of advanced hold their logs, offline in their images.
	for id, want := range map[int32]int64{5: 10, 4: 20} {
		d := c.Get(id)
		mqtest.WaitFor(t, fmt.Sprintf("broker %d to report advanced at offset %d", id, want), func() (bool, string) {
			positions := d.offlinePositions()
			for _, pos := range positions {
				if pos.Topic == "advanced" && pos.EndOffset == want {
					return true, ""
				}
			}
			return false, fmt.Sprintf("offline positions %+v", positions)
		})
	}
	if err := c.Get(1).ctrl.AlterTopicConfigs(ctx, "advanced", map[string]string{"unclean.leader.election.enable": "true"}, nil); err != nil {
		t.Fatal(err)
	}
	img = c.waitImage("advanced has a leader", func(img *controller.Image) bool {
		p := img.Partition("advanced", 0)
		return p != nil && p.Leader >= 0
	})
	if p := img.Partition("advanced", 0); p.Leader != 4 || !slices.Equal(p.ISR, []int32{4}) {
		t.Errorf("advanced after the unclean election: %+v, want leader 4 and ISR [4]: 4 has 20 records, 5 only 10", p)
	}
}

// TestClusterFollowersFetchIncrementally checks that followers fetch in
// sessions: once caught up, their rounds are incremental and name no
// partition, and no session is created again.
func TestClusterFollowersFetchIncrementally(t *testing.T) {
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "inc", 4)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := produceAll(t, cl, "inc", 0, 200)
	readBack(t, c, "inc", acked)

	type counts struct{ full, incremental, partitions int64 }
	snapshot := func() (out []counts) {
		for _, d := range c.Running() {
			s, _ := d.broker.FetchSessionCounts()
			out = append(out, counts{s.Full, s.Incremental, s.IncrementalPartitions})
		}
		return out
	}
	// waitRounds waits until every leader has served n more incremental
	// rounds than in from.
	waitRounds := func(from []counts, n int64) []counts {
		var now []counts
		c.waitImage("incremental rounds", func(*controller.Image) bool {
			now = snapshot()
			for i := range now {
				if now[i].incremental < from[i].incremental+n {
					return false
				}
			}
			return true
		})
		return now
	}
	// Rounds in flight may still carry the last fetch offsets; after them,
	// idle rounds carry nothing.
	settled := waitRounds(snapshot(), 3)
	idle := waitRounds(settled, 5)
	for i := range idle {
		if idle[i].partitions != settled[i].partitions || idle[i].full != settled[i].full {
			t.Errorf("node %d while idle: %+v, then %+v: want incremental rounds naming no partition", i+1, settled[i], idle[i])
		}
	}
	// Producing again is replicated through the same sessions.
	for k, v := range produceAll(t, cl, "inc", 200, 100) {
		acked[k] = v
	}
	readBack(t, c, "inc", acked)
	c.waitImage("whole ISR", func(img *controller.Image) bool { return fullyInSync(img, "inc") })
	for i, now := range snapshot() {
		if now.full != idle[i].full {
			t.Errorf("node %d: %d full fetches after producing again, want %d: the sessions went on", i+1, now.full, idle[i].full)
		}
	}
}
