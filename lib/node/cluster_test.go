package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// testCluster is a cluster of in-process nodes on loopback ports (an
// mqtest.Cluster): each a whole Daemon (controller member, broker,
// server) with its own data directory, the voters talking Raft over TCP.
// Tests stop, crash and restart nodes and watch the images.
type testCluster struct {
	*mqtest.Cluster[*Daemon]
	t       *testing.T
	mod     func(*config.Broker) // changes every node's settings; may be nil
	sockets string               // the nodes' Unix sockets: a short path, as socket paths must be
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

// startCluster starts n voters, each changed by mod (may be nil), and
// waits until every node's image lists every broker.
func startCluster(t *testing.T, n int, mod func(*config.Broker)) *testCluster {
	t.Helper()
	sockets, err := os.MkdirTemp("", "mqd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	c := &testCluster{t: t, mod: mod, sockets: sockets}
	c.Cluster = mqtest.NewCluster(t, n, mqtest.Lifecycle[*Daemon]{
		Start: c.start,
		Stop:  func(d *Daemon) error { return d.Shutdown(context.Background()) },
		Crash: func(d *Daemon) {
			d.settings.ControlledShutdown = false
			d.Shutdown(context.Background())
		},
	})
	c.StartAll()
	c.waitImage("every broker registered", func(img *controller.Image) bool { return len(img.Brokers) == n })
	return c
}

// addNonVoter starts another node, a broker and a non-voter of the
// quorum, and returns its ID.
func (c *testCluster) addNonVoter() int32 {
	c.t.Helper()
	id := c.AddNonVoter().ID
	c.Start(id)
	return id
}

func (c *testCluster) start(m mqtest.Member) (*Daemon, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return Start(ctx, Config{Settings: c.settings(m), Logger: clusterLogger(m.ID)})
}

// settings are member m's: quick timeouts for tests, liveness in about a
// second, replication rounds of tens of milliseconds; then the cluster's
// mod.
func (c *testCluster) settings(m mqtest.Member) config.Broker {
	s := config.Defaults()
	s.NodeID = m.ID
	s.DataDir = m.Dir
	s.Voters = c.Voters()
	if !m.Voter {
		s.RaftAddress = m.RaftAddr
	}
	s.Listeners = []string{"unix://" + filepath.Join(c.sockets, fmt.Sprintf("%d.sock", m.ID)), "tcp://" + m.KafkaAddr}
	s.BrokerHeartbeatInterval = 100 * time.Millisecond
	s.BrokerSessionTimeout = 1500 * time.Millisecond
	s.ReplicaLagTime = 1500 * time.Millisecond
	s.ReplicaFetchWait = 100 * time.Millisecond
	s.ReplicaFetchBackoff = 50 * time.Millisecond
	s.ReplicaHighWatermarkCheckpointInterval = 200 * time.Millisecond
	s.ControlledShutdownTimeout = 10 * time.Second
	s.GroupInitialRebalanceDelay = 0
	if c.mod != nil {
		c.mod(&s)
	}
	return s
}

// seeds lists the Kafka addresses of every node.
func (c *testCluster) seeds() []string {
	var out []string
	for _, m := range c.Members() {
		out = append(out, m.KafkaAddr)
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
	for _, d := range c.Running() {
		return d.ctrl.Image()
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
	clusterWait.For(c.t, what, c.Each(func(_ int32, d *Daemon) (bool, string) {
		last = d.ctrl.Image()
		return cond(last), "image " + describeImage(last)
	}))
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
