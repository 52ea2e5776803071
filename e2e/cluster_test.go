package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// clusterOpts configures startCluster.
type clusterOpts struct {
	// voters is how many nodes (the first ones, ids 1…voters) are Raft
	// voters of the controller quorum; the others join as non-voters.
	// 0: every node votes.
	voters int
	// props are key=value properties (--set) for every node.
	props []string
	// nodeProps gives one node's own properties (broker.rack…); nil: none.
	nodeProps func(id int32) []string
	// nodeArgs gives one node's own command-line arguments (an extra
	// --listen…), kept across restarts; nil: none.
	nodeArgs func(id int32) []string
	// secured: securedOpts set up the nodes' certificates already.
	secured bool
	// disks gives the nodes it names (node id → size in bytes) a data
	// directory on an ext4 loop disk of their own (see loopDisk); the
	// others get a directory of the test's. Needs root.
	disks map[int32]int64
	// netns runs the cluster on a network of its own (netns_test.go):
	// each node in a network namespace of its own, the test's clients in
	// another, all on one bridge, so that the network can fail. It needs
	// root; without it the test is skipped.
	netns bool
}

// cluster is n real mqd processes on loopback (or on a network of their
// own: clusterOpts.netns), one data directory, Kafka port and Raft port
// each, owned by one test: every node is stopped (and its peak memory
// checked) when the test ends.
type cluster struct {
	t      testing.TB
	nodes  []*clusterNode // nodes[i] has node id i+1
	voters string         // the --voters value every node gets
	net    *testNet       // the cluster's own network; nil: loopback
}

// clusterNode is one mqd of a cluster. Its Kafka address and Raft
// address stay the same across restarts.
type clusterNode struct {
	*mqdProc
	c        *cluster
	id       int32
	raftAddr string
	disk     *loopDisk // the data directory's disk; nil: the test's own

	directOnce sync.Once
	direct     *kgo.Client // talks to this node only (metadata checks)
	// cutOff: a network fault keeps the node from its peers, so its view
	// of the cluster may be stale or unreachable; the waits for the
	// cluster's state do not ask it. heal clears it.
	cutOff bool
}

// clusterReadyTimeout bounds a cluster's start: processes up, a
// controller elected, every broker registered and seen by every node.
const clusterReadyTimeout = 60 * time.Second

// clusterWait waits for a state of the cluster (an election, a leader
// moved, a record acknowledged through a failover) as long as a cluster's
// start may take.
var clusterWait = mqtest.Wait{Timeout: clusterReadyTimeout}

// startCluster starts n nodes at once (a quorum needs a majority of its
// voters up before any node can register, so they cannot start one by
// one) and waits until every node serves Metadata listing all n brokers.
func startCluster(t testing.TB, n int, o clusterOpts) *cluster {
	t.Helper()
	if o.voters <= 0 || o.voters > n {
		o.voters = n
	}
	if *clusterSecured && !o.netns && !o.secured {
		o = securedOpts(t, n, o)
	}
	c := &cluster{t: t}
	if o.netns {
		c.net = newTestNet(t, n) // removed after the nodes are stopped
	}
	var voters []string
	for i := range n {
		node := &clusterNode{c: c, id: int32(i + 1), mqdProc: &mqdProc{keepAddr: true}}
		if err := node.pickAddrs(); err != nil {
			t.Fatal(err)
		}
		if size, ok := o.disks[node.id]; ok {
			node.disk = newLoopDisk(t, size)
			node.dataDir = node.disk.mount
		} else {
			node.dataDir = t.TempDir()
		}
		c.nodes = append(c.nodes, node)
		if i < o.voters {
			voters = append(voters, fmt.Sprintf("%d@%s", node.id, node.raftAddr))
		}
	}
	c.voters = strings.Join(voters, ",")
	for i, node := range c.nodes {
		node.args = []string{"--node-id", strconv.Itoa(int(node.id)), "--voters", c.voters, "--advertise", node.addr}
		node.props = slices.Clone(o.props)
		if i >= o.voters {
			node.props = append(node.props, "controller.raft.address="+node.raftAddr)
		}
		if o.nodeProps != nil {
			node.props = append(node.props, o.nodeProps(node.id)...)
		}
		if o.nodeArgs != nil {
			node.args = append(node.args, o.nodeArgs(node.id)...)
		}
	}
	t.Cleanup(c.cleanup)
	c.startTogether(c.nodes...)
	c.waitMetadata()
	return c
}

// startTogether starts nodes at once: a node is ready only once it has
// registered, which needs a quorum of voters up.
func (c *cluster) startTogether(nodes ...*clusterNode) {
	c.t.Helper()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := node.mqdProc.start(); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", node.id, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
}

// pickAddrs gives the node its Kafka and Raft addresses: its namespace's
// on a netns cluster, free loopback ports otherwise.
func (n *clusterNode) pickAddrs() error {
	if tn := n.c.net; tn != nil {
		n.addr, n.raftAddr, n.netns = tn.kafkaAddr(n.id), tn.raftAddr(n.id), tn.nodeNS(n.id)
		return nil
	}
	kafka, err := freeAddr()
	if err != nil {
		return err
	}
	raft, err := freeAddr()
	if err != nil {
		return err
	}
	n.addr, n.raftAddr = kafka, raft
	return nil
}

// cleanup stops every node at once (one by one, the last nodes would
// wait for a quorum already gone) and checks their memory peaks. A
// network fault still in place is healed first, so that the nodes can
// shut down as usual.
func (c *cluster) cleanup() {
	if c.t.Failed() {
		for _, node := range c.nodes {
			if node.stderr != nil {
				c.t.Logf("node %d's log, the last of it:\n%s", node.id, tail(node.stderr.String(), 80))
			}
		}
	}
	c.healNet()
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i, node := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if node.direct != nil {
				node.direct.Close()
			}
			errs[i] = errors.Join(node.mqdProc.cleanup(), node.checkPeak())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Errorf("node %d: %v", i+1, err)
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// node returns the node with id.
func (c *cluster) node(id int32) *clusterNode { return c.nodes[id-1] }

// bootstrap is every node's Kafka address.
func (c *cluster) bootstrap() []string {
	out := make([]string, len(c.nodes))
	for i, node := range c.nodes {
		out[i] = node.addr
	}
	return out
}

// bootstrapList is the bootstrap addresses as one -b argument.
func (c *cluster) bootstrapList() string { return strings.Join(c.bootstrap(), ",") }

// clientOpts are the options every client of the cluster starts with: on
// a netns cluster, the dialer that connects from the client namespace.
func (c *cluster) clientOpts(seeds ...string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	if c.net != nil {
		opts = append(opts, kgo.Dialer(c.net.dial))
	}
	return opts
}

// client returns a kgo client seeded with every node, closed at test end.
func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append(c.clientOpts(c.bootstrap()...), opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *cluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// dumpStacks is for a cluster that never reached a state a test waited
// for: SIGQUIT makes every running node's Go runtime print each
// goroutine's stack and exit, and each node's stacks are kept in a file
// of their own (named in the test's log), for what a stuck loop waits on.
func (c *cluster) dumpStacks() {
	for _, node := range c.nodes {
		if !node.running() {
			continue
		}
		node.mqdProc.cont() // a stopped process would not see SIGQUIT
		from := len(node.stderr.String())
		node.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-node.exited:
		case <-time.After(10 * time.Second):
			c.t.Logf("node %d did not exit within 10s of SIGQUIT", node.id)
			continue
		}
		f, err := os.CreateTemp("", fmt.Sprintf("mq-e2e-stacks-node%d-*.txt", node.id))
		if err == nil {
			_, err = f.WriteString(node.stderr.String()[from:])
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			c.t.Logf("node %d's stacks: %v", node.id, err)
			continue
		}
		c.t.Logf("node %d's goroutine stacks: %s", node.id, f.Name())
	}
}

// serving returns the nodes that run, are not paused and are not cut off
// by the network.
func (c *cluster) serving() []*clusterNode {
	var out []*clusterNode
	for _, node := range c.nodes {
		if node.running() && !node.paused && !node.cutOff {
			out = append(out, node)
		}
	}
	return out
}

// waitMetadata waits until every serving node answers Metadata listing
// all the cluster's brokers.
func (c *cluster) waitMetadata() {
	c.t.Helper()
	want := make([]int32, len(c.nodes))
	for i := range want {
		want[i] = int32(i + 1)
	}
	clusterWait.For(c.t, "every node to list every broker", func() (bool, string) {
		for _, node := range c.serving() {
			m, err := node.metadata(context.Background())
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", node.id, err)
			}
			if got := brokerIDs(m); !slices.Equal(got, want) {
				return false, fmt.Sprintf("node %d lists brokers %v, want %v", node.id, got, want)
			}
		}
		return true, ""
	})
}

// brokerIDs lists the brokers of a Metadata answer, sorted.
func brokerIDs(m *kmsg.MetadataResponse) []int32 {
	ids := make([]int32, 0, len(m.Brokers))
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// metadata asks this node, and no other, for the cluster's metadata and
// every topic's.
func (n *clusterNode) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	n.directOnce.Do(func() {
		cl, err := kgo.NewClient(n.c.clientOpts(n.addr)...)
		if err != nil {
			n.c.t.Fatal(err)
		}
		n.direct = cl
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all of them
	return req.RequestWith(ctx, n.direct.SeedBrokers()[0])
}

// client returns a kgo client seeded with this node only.
func (n *clusterNode) client(opts ...kgo.Opt) *kgo.Client {
	n.c.t.Helper()
	cl, err := kgo.NewClient(append(n.c.clientOpts(n.addr), opts...)...)
	if err != nil {
		n.c.t.Fatal(err)
	}
	n.c.t.Cleanup(cl.Close)
	return cl
}

// stop sends SIGTERM (controlled shutdown) and waits for a clean exit.
func (n *clusterNode) stop() {
	n.c.t.Helper()
	if err := n.mqdProc.stop(); err != nil {
		n.c.t.Fatalf("node %d: %v", n.id, err)
	}
}

// kill is SIGKILL: the node is gone at once, nothing flushed.
func (n *clusterNode) kill() { n.mqdProc.kill() }

// pause is SIGSTOP: the node holds its connections and answers nothing.
func (n *clusterNode) pause() {
	n.c.t.Helper()
	if err := n.mqdProc.pause(); err != nil {
		n.c.t.Fatalf("node %d: %v", n.id, err)
	}
}

// cont is SIGCONT after pause.
func (n *clusterNode) cont() {
	n.c.t.Helper()
	if err := n.mqdProc.cont(); err != nil {
		n.c.t.Fatalf("node %d: %v", n.id, err)
	}
}

// start starts a stopped or killed node again on its data directory and
// addresses, and waits until it is ready (registered).
func (n *clusterNode) start() {
	n.c.t.Helper()
	if err := n.mqdProc.start(); err != nil {
		n.c.t.Fatalf("node %d: %v", n.id, err)
	}
}

// restart stops (or, with crash, kills) the node and starts it again.
func (n *clusterNode) restart(crash bool) {
	n.c.t.Helper()
	if crash {
		n.kill()
	} else {
		n.stop()
	}
	n.start()
}

// heal restores the network, continues every paused node and starts
// every stopped or killed one, and waits until every node lists all the
// brokers.
func (c *cluster) heal() {
	c.t.Helper()
	c.healNet()
	for _, node := range c.nodes {
		switch {
		case node.paused:
			node.cont()
		case !node.running():
			node.start()
		}
	}
	c.waitMetadata()
}

// healNet brings back every link and flushes every cut of a netns
// cluster's network; the nodes are no longer cut off.
func (c *cluster) healNet() {
	if c.net == nil {
		return
	}
	if err := c.net.heal(); err != nil {
		c.t.Errorf("healing the network: %v", err)
	}
	for _, node := range c.nodes {
		node.cutOff = false
	}
}

// topicLeaders returns a topic's partition leaders in a Metadata answer,
// nil when the topic is not there.
func topicLeaders(m *kmsg.MetadataResponse, topic string) []int32 {
	for _, t := range m.Topics {
		if t.Topic != nil && *t.Topic == topic && t.ErrorCode == 0 {
			leaders := make([]int32, len(t.Partitions))
			for _, p := range t.Partitions {
				leaders[p.Partition] = p.Leader
			}
			return leaders
		}
	}
	return nil
}

// TestClusterOfThreeStartsAndEveryNodeServesMetadata: every node answers
// Metadata itself, with the same brokers, cluster id and controller.
func TestClusterOfThreeStartsAndEveryNodeServesMetadata(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{})
	ctx := ctxFor(t, time.Minute)
	var clusterID string
	controllers := map[int32]bool{}
	for _, node := range c.nodes {
		m, err := node.metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.ClusterID == nil || *m.ClusterID == "" {
			t.Fatalf("node %d: no cluster id", node.id)
		}
		if clusterID == "" {
			clusterID = *m.ClusterID
		} else if *m.ClusterID != clusterID {
			t.Fatalf("node %d: cluster id %s, node 1 said %s", node.id, *m.ClusterID, clusterID)
		}
		for _, b := range m.Brokers {
			if want := c.node(b.NodeID).addr; fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
				t.Errorf("node %d lists broker %d at %s:%d, want %s", node.id, b.NodeID, b.Host, b.Port, want)
			}
		}
		controllers[m.ControllerID] = true
	}
	if len(controllers) != 1 || controllers[-1] {
		t.Fatalf("the nodes name controllers %v, want one", slices.Collect(maps.Keys(controllers)))
	}
}

// TestClusterTopicsCreatedOnAnyNodeAreServed: a topic created through any
// node is placed over the brokers, every node's metadata shows it, and
// records produced through the cluster come back.
func TestClusterTopicsCreatedOnAnyNodeAreServed(t *testing.T) {
	parallel(t)
	c := startCluster(t, 3, clusterOpts{})
	ctx := ctxFor(t, 2*time.Minute)
	var topics []string
	for _, node := range c.nodes {
		topic := fmt.Sprintf("via-%d", node.id)
		topics = append(topics, topic)
		resp, err := kadm.NewClient(node.client()).CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s through node %d: %v", topic, node.id, err)
		}
	}
	led := map[int32]int{}
	clusterWait.For(t, "every partition led, on every node", func() (bool, string) {
		clear(led)
		for _, node := range c.nodes {
			m, err := node.metadata(ctx)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", node.id, err)
			}
			for _, topic := range topics {
				leaders := topicLeaders(m, topic)
				if leaders == nil || slices.Contains(leaders, -1) {
					return false, fmt.Sprintf("node %d: %s has leaders %v", node.id, topic, leaders)
				}
				if node.id == 1 {
					for _, l := range leaders {
						led[l]++
					}
				}
			}
		}
		return true, ""
	})
	if len(led) != 3 {
		t.Errorf("9 partitions led by %v, want every broker to lead some", led)
	}

	cl := c.client()
	const perTopic = 30
	for _, topic := range topics {
		for i := range perTopic {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(topic + "-" + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	consumer := c.client(kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < perTopic*len(topics) {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), perTopic*len(topics), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			if seen[string(r.Value)] {
				t.Fatalf("%s read twice", r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
}

// TestKcatListsEveryBrokerOfTheCluster: librdkafka bootstrapped from the
// whole list sees three brokers and a leader for every partition.
func TestKcatListsEveryBrokerOfTheCluster(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{})
	ctx := ctxFor(t, time.Minute)
	resp, err := c.admin().CreateTopic(ctx, 3, 1, nil, "kc3")
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	var meta string
	clusterWait.For(t, "kcat to list kc3 with its 3 partitions led", func() (bool, string) {
		meta = kcatAt(t, c.bootstrapList(), "", "-L", "-t", "kc3")
		return strings.Contains(meta, `topic "kc3" with 3 partitions:`) && !strings.Contains(meta, "leader -1"), meta
	})
	want := []string{"3 brokers:"}
	for _, node := range c.nodes {
		want = append(want, fmt.Sprintf("broker %d at %s", node.id, node.addr))
	}
	for _, w := range want {
		if !strings.Contains(meta, w) {
			t.Errorf("kcat -L output lacks %q:\n%s", w, meta)
		}
	}
}

// TestClusterOfOneIsAClusterToo: one node with --voters of its own is the
// same code as a lone mqd.
func TestClusterOfOneIsAClusterToo(t *testing.T) {
	parallel(t)
	c := startCluster(t, 1, clusterOpts{})
	ctx := ctxFor(t, time.Minute)
	cl := c.client(kgo.DefaultProduceTopic("solo"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.node(1).restart(false)
	c.waitMetadata()
	consumer := c.client(kgo.ConsumeTopics("solo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "one" {
		t.Fatalf("after a restart on the same addresses: %v", recs)
	}
}
