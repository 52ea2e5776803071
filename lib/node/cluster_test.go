package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// testCluster is a cluster of in-process nodes on loopback ports: each a
// whole Daemon (controller member, broker, server) with its own data
// directory, the voters talking Raft over TCP. Tests stop, crash and
// restart nodes and watch the images.
type testCluster struct {
	t      *testing.T
	voters string
	nodes  []*clusterNode
}

type clusterNode struct {
	id int32
	s  config.Broker
	mu sync.Mutex
	d  *Daemon // nil while stopped
}

// clusterLogger logs node id's messages to stderr when MQ_TEST_LOG is set
// (debug, info, …: the level), and nothing otherwise.
func clusterLogger(id int32) *slog.Logger {
	level := os.Getenv("MQ_TEST_LOG")
	if level == "" {
		return nil
	}
	var l slog.Level
	l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})).With("node", id)
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago, one no
// outgoing connection takes (lib/loopback).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// clusterSettings are quick timeouts for tests: liveness in about a second,
// replication rounds of tens of milliseconds.
func clusterSettings(t *testing.T, id int32, voters string, kafkaPort int) config.Broker {
	s := testSettings(t)
	s.NodeID = id
	s.Voters = voters
	s.Listeners = []string{s.Listeners[0], "tcp://127.0.0.1:" + strconv.Itoa(kafkaPort)}
	s.BrokerHeartbeatInterval = 100 * time.Millisecond
	s.BrokerSessionTimeout = 1500 * time.Millisecond
	s.ReplicaLagTime = 1500 * time.Millisecond
	s.ReplicaFetchWait = 100 * time.Millisecond
	s.ReplicaFetchBackoff = 50 * time.Millisecond
	s.ReplicaHighWatermarkCheckpointInterval = 200 * time.Millisecond
	s.ControlledShutdownTimeout = 10 * time.Second
	s.GroupInitialRebalanceDelay = 0
	return s
}

// startCluster starts n voters, each changed by mod (may be nil), and
// waits until every node's image lists every broker.
func startCluster(t *testing.T, n int, mod func(*config.Broker)) *testCluster {
	t.Helper()
	var vs []string
	for i := 1; i <= n; i++ {
		vs = append(vs, fmt.Sprintf("%d@127.0.0.1:%d", i, freePort(t)))
	}
	c := &testCluster{t: t, voters: strings.Join(vs, ",")}
	for i := 1; i <= n; i++ {
		s := clusterSettings(t, int32(i), c.voters, freePort(t))
		if mod != nil {
			mod(&s)
		}
		c.nodes = append(c.nodes, &clusterNode{id: int32(i), s: s})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startNode(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stopAll)
	c.waitImage("every broker registered", func(img *controller.Image) bool { return len(img.Brokers) == n })
	return c
}

// addNode starts another node with settings s (a non-voter when its ID is
// not among the voters).
func (c *testCluster) addNode(s config.Broker) *clusterNode {
	c.t.Helper()
	c.nodes = append(c.nodes, &clusterNode{id: s.NodeID, s: s})
	if err := c.startNode(len(c.nodes) - 1); err != nil {
		c.t.Fatal(err)
	}
	return c.nodes[len(c.nodes)-1]
}

func (c *testCluster) startNode(i int) error {
	n := c.nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := Start(ctx, Config{Settings: n.s, Logger: clusterLogger(n.id)})
	if err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	n.mu.Lock()
	n.d = d
	n.mu.Unlock()
	return nil
}

// daemon returns node i's running daemon (index into nodes), or nil.
func (c *testCluster) daemon(i int) *Daemon {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.d
}

// stop shuts node i down the way SIGTERM does (controlled shutdown first).
func (c *testCluster) stop(i int) {
	c.t.Helper()
	d := c.take(i)
	if d == nil {
		return
	}
	if err := d.Shutdown(context.Background()); err != nil {
		c.t.Errorf("node %d shutdown: %v", c.nodes[i].id, err)
	}
}

// crash stops node i without a controlled shutdown: to the cluster it
// just goes silent, as after SIGKILL (its data stays as written).
func (c *testCluster) crash(i int) {
	c.t.Helper()
	d := c.take(i)
	if d == nil {
		return
	}
	d.settings.ControlledShutdown = false
	d.Shutdown(context.Background())
}

func (c *testCluster) take(i int) *Daemon {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.d
	n.d = nil
	return d
}

// restart starts a stopped node again on the same directory and ports.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	if err := c.startNode(i); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) stopAll() {
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := c.take(i); d != nil {
				d.settings.ControlledShutdown = false
				d.Shutdown(context.Background())
			}
		}()
	}
	wg.Wait()
}

// addr is node i's Kafka address.
func (c *testCluster) addr(i int) string {
	return strings.TrimPrefix(c.nodes[i].s.Listeners[1], "tcp://")
}

// seeds lists the Kafka addresses of every node.
func (c *testCluster) seeds() []string {
	var out []string
	for i := range c.nodes {
		out = append(out, c.addr(i))
	}
	return out
}

// client returns a kgo client bootstrapped from every node.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	// Bounded: a replication bug must fail a test, not hang it.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(30 * time.Second),
		kgo.RecordDeliveryTimeout(time.Minute)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// image returns the image of any running node (the first found).
func (c *testCluster) image() *controller.Image {
	for i := range c.nodes {
		if d := c.daemon(i); d != nil {
			return d.ctrl.Image()
		}
	}
	return nil
}

// clusterWait bounds the waits for a state the whole cluster reaches (an
// election, an ISR change, a topic on every node): these take Raft rounds
// and replication rounds, and get 30 s rather than mqtest.WaitFor's 20.
var clusterWait = mqtest.Wait{Timeout: 30 * time.Second}

// waitImage waits until every running node's image satisfies cond, and
// returns the last node's. It fails with the image of the first node
// whose image did not (describeImage).
func (c *testCluster) waitImage(what string, cond func(*controller.Image) bool) *controller.Image {
	c.t.Helper()
	var last *controller.Image
	clusterWait.For(c.t, what, func() (bool, string) {
		for i := range c.nodes {
			if d := c.daemon(i); d != nil {
				last = d.ctrl.Image()
				if !cond(last) {
					return false, fmt.Sprintf("node %d's image: %s", c.nodes[i].id, describeImage(last))
				}
			}
		}
		return true, ""
	})
	return last
}

// describeImage renders what the cluster tests wait for in an image: its
// version, the brokers (fenced, shutting down), and each partition as
// id:leader[ISR].
func describeImage(img *controller.Image) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d; brokers", img.Version)
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		fmt.Fprintf(&b, " %d", id)
		if br := img.Brokers[id]; br.Fenced {
			b.WriteString(" (fenced)")
		} else if br.InControlledShutdown {
			b.WriteString(" (shutting down)")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(img.Topics)) {
		fmt.Fprintf(&b, "; %s", name)
		for _, p := range img.Topics[name].Partitions {
			fmt.Fprintf(&b, " %d:%d%v", p.ID, p.Leader, p.ISR)
		}
	}
	return b.String()
}

// index returns the position in nodes of the node with id.
func (c *testCluster) index(id int32) int {
	for i, n := range c.nodes {
		if n.id == id {
			return i
		}
	}
	c.t.Fatalf("no node %d", id)
	return -1
}
