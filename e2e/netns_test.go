package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// A cluster with clusterOpts.netns runs on a network of its own, so that
// the nemesis can cut links the way a real network fails (chaos_net_test.go):
//
//	node 1 ns  eth0 10.X.Y.1 ──veth── n1 ┐
//	node 2 ns  eth0 10.X.Y.2 ──veth── n2 ├ br0, in the switch ns
//	…                                    │
//	client ns  eth0 10.X.Y.200 ─veth── c ┘
//
// Every mqd runs in its node's namespace (ip netns exec, which execs in
// place: the pid is mqd's, so SIGKILL and SIGSTOP reach it), listening on
// its node's address with fixed ports. The test's own clients create
// their sockets in the client namespace (testNet.dial); nothing dials a
// node from the root namespace, which has no route to the subnet anyway.
// The NOTIFY_SOCKET and the Unix listener are filesystem sockets, which
// work across network namespaces.

// The ports every node listens on, the same on each node since each node
// has an address of its own.
const (
	netKafkaPort = 9092
	netRaftPort  = 9093
)

// clientHost is the client namespace's host number on the subnet; nodes
// are 1…n.
const clientHost = 200

// netRuns numbers this process's networks: with the pid, it makes the
// namespaces' names unique to one run, so that parallel test processes
// never share them. The subnet is drawn from the same numbers; two runs
// may get the same one without harm (their namespaces are apart), but
// rarely do, which keeps a run's addresses recognizable in its logs.
var netRuns atomic.Uint32

// testNet is one test's network namespaces, bridge and veth pairs. Its
// faults (isolate, cut) last until heal; everything is removed when the
// test ends, failed or not. Its faults and heal are called from the
// test's goroutine only; dial from any.
type testNet struct {
	t      testing.TB
	prefix string // every namespace's name begins with it
	subnet string // "10.X.Y"
	nodes  int
	client *os.File // the client namespace (/run/netns/…), for setns

	down map[int32]bool // nodes whose link to the switch is down
	cuts map[int32]bool // nodes whose namespace holds cut rules
}

// newTestNet creates the switch, node and client namespaces of an n-node
// cluster and wires them; a test not run as root is skipped.
func newTestNet(t testing.TB, n int) *testNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the netns cluster needs root for network namespaces")
	}
	sweepStaleNets()
	run := netRuns.Add(1)
	v := (uint32(os.Getpid())<<4 + run) & 0xffff
	tn := &testNet{t: t, prefix: fmt.Sprintf("mq%d-%d-", os.Getpid(), run),
		subnet: fmt.Sprintf("10.%d.%d", v>>8, v&0xff), nodes: n,
		down: map[int32]bool{}, cuts: map[int32]bool{}}
	t.Cleanup(tn.remove)
	if err := tn.create(); err != nil {
		t.Fatal(err)
	}
	return tn
}

// switchNS, clientNS and nodeNS name the namespaces.
func (tn *testNet) switchNS() string       { return tn.prefix + "sw" }
func (tn *testNet) clientNS() string       { return tn.prefix + "c" }
func (tn *testNet) nodeNS(id int32) string { return tn.prefix + strconv.Itoa(int(id)) }

// host is the address of host number h on the subnet.
func (tn *testNet) host(h int) string { return tn.subnet + "." + strconv.Itoa(h) }

// kafkaAddr and raftAddr are a node's listeners.
func (tn *testNet) kafkaAddr(id int32) string {
	return net.JoinHostPort(tn.host(int(id)), strconv.Itoa(netKafkaPort))
}
func (tn *testNet) raftAddr(id int32) string {
	return net.JoinHostPort(tn.host(int(id)), strconv.Itoa(netRaftPort))
}

// faultTable is the nft table each node namespace has from the start, its
// chains empty until a cut adds rules.
const faultTable = `table inet mqfault {
	chain input { type filter hook input priority 0; policy accept; }
	chain output { type filter hook output priority 0; policy accept; }
}`

// create makes the namespaces: a bridge in the switch namespace, and for
// the client and each node a namespace with lo up and a veth into the
// bridge, the namespace's end named eth0.
func (tn *testNet) create() error {
	sw := tn.switchNS()
	cmds := [][]string{
		{"ip", "netns", "add", sw},
		{"ip", "-n", sw, "link", "set", "lo", "up"},
		{"ip", "-n", sw, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", sw, "link", "set", "br0", "up"},
	}
	attach := func(ns, port string, host int) {
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			// Created right in both namespaces: no name is taken in the
			// root namespace, even for a moment.
			[]string{"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw},
			[]string{"ip", "-n", sw, "link", "set", port, "master", "br0", "up"},
			[]string{"ip", "-n", ns, "addr", "add", tn.host(host) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"})
	}
	attach(tn.clientNS(), "c", clientHost)
	for i := 1; i <= tn.nodes; i++ {
		attach(tn.nodeNS(int32(i)), "n"+strconv.Itoa(i), i)
	}
	for _, c := range cmds {
		if err := runCmd("", c...); err != nil {
			return err
		}
	}
	for i := 1; i <= tn.nodes; i++ {
		if err := runCmd(faultTable, "ip", "netns", "exec", tn.nodeNS(int32(i)), "nft", "-f", "-"); err != nil {
			return err
		}
	}
	f, err := os.Open("/run/netns/" + tn.clientNS())
	if err != nil {
		return err
	}
	tn.client = f
	return nil
}

// remove deletes every namespace of the run, which takes their veths and
// nft tables with them.
func (tn *testNet) remove() {
	if tn.client != nil {
		tn.client.Close()
	}
	names := []string{tn.switchNS(), tn.clientNS()}
	for i := 1; i <= tn.nodes; i++ {
		names = append(names, tn.nodeNS(int32(i)))
	}
	for _, ns := range names {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue // never created
		}
		if err := runCmd("", "ip", "netns", "delete", ns); err != nil {
			tn.t.Errorf("removing the test's network: %v", err)
		}
	}
}

// runCmd runs a command with stdin and returns an error with its output
// when it fails.
func runCmd(stdin string, args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dial is the kgo.Dialer of every client of a netns cluster: it creates
// the socket in the client namespace. The dial runs on a goroutine locked
// to its OS thread, which enters the client namespace, dials (socket and
// connect), and returns to the namespace it came from. If it cannot
// return, the goroutine ends still locked and Go discards the thread.
// A connection whose local address is not the client namespace's is
// refused: it would come from some other namespace.
func (tn *testNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, back, err := tn.dialInside(ctx, network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	if local, ok := r.conn.LocalAddr().(*net.TCPAddr); !ok || local.IP.String() != tn.host(clientHost) {
		r.conn.Close()
		return nil, fmt.Errorf("dial %s: local address %v is not the client namespace's %s", addr, r.conn.LocalAddr(), tn.host(clientHost))
	}
	return r.conn, nil
}

// dialInside dials from the client namespace on the calling goroutine's
// locked thread, and reports whether the thread is back in its own
// namespace.
func (tn *testNet) dialInside(ctx context.Context, network, addr string) (net.Conn, bool, error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer own.Close()
	if err := unix.Setns(int(tn.client.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter the client namespace: %w", err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if berr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); berr != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, errors.Join(err, fmt.Errorf("leave the client namespace: %w", berr))
	}
	return conn, true, err
}

// isolate takes node id's link to the switch down: nothing reaches the
// node and nothing leaves it (its packets are dropped silently, as with
// a pulled cable; connections are not reset) until heal.
func (tn *testNet) isolate(id int32) {
	tn.t.Helper()
	tn.down[id] = true
	if err := runCmd("", "ip", "-n", tn.switchNS(), "link", "set", "n"+strconv.Itoa(int(id)), "down"); err != nil {
		tn.t.Fatal(err)
	}
}

// cut drops, from now until heal, every packet of the TCP connections
// node from originates towards node to, that is those to to's Kafka and
// Raft ports: from's packets to them and to's answers. Connections open
// already are cut as well as new ones (the rules match every packet, not
// only the first), and a new one never gets past its SYN. Connections
// that to originates towards from are untouched. The rules sit in from's
// namespace.
func (tn *testNet) cut(from, to int32) {
	tn.t.Helper()
	tn.cuts[from] = true
	ports := fmt.Sprintf("{ %d, %d }", netKafkaPort, netRaftPort)
	peer := tn.host(int(to))
	rules := fmt.Sprintf("add rule inet mqfault output ip daddr %s tcp dport %s drop\n"+
		"add rule inet mqfault input ip saddr %s tcp sport %s drop\n", peer, ports, peer, ports)
	if err := runCmd(rules, "ip", "netns", "exec", tn.nodeNS(from), "nft", "-f", "-"); err != nil {
		tn.t.Fatal(err)
	}
}

// heal brings every link taken down up again and flushes every cut rule.
func (tn *testNet) heal() error {
	var errs []error
	for id := range tn.down {
		errs = append(errs, runCmd("", "ip", "-n", tn.switchNS(), "link", "set", "n"+strconv.Itoa(int(id)), "up"))
	}
	for id := range tn.cuts {
		errs = append(errs, runCmd("", "ip", "netns", "exec", tn.nodeNS(id), "nft", "flush", "table", "inet", "mqfault"))
	}
	clear(tn.down)
	clear(tn.cuts)
	return errors.Join(errs...)
}

// netnsOf is the network namespace of process pid, as /proc names it
// ("net:[inode]").
func netnsOf(pid int) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
}

// TestNetnsClusterRoundTripFromTheClientNamespace: a netns cluster serves
// a produce/consume round trip; every node runs in its own namespace as
// the very process the test signals (mqd, not a wrapper), and every
// connection the clients opened has the client namespace's address, so
// none came from the root namespace.
func TestNetnsClusterRoundTripFromTheClientNamespace(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{netns: true})
	self, err := netnsOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{self: true}
	for _, node := range c.nodes {
		pid := node.cmd.Process.Pid
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "mqd" {
			t.Errorf("node %d: pid %d is %q (%v), want mqd itself", node.id, pid, comm, err)
		}
		ns, err := netnsOf(pid)
		if err != nil || seen[ns] {
			t.Errorf("node %d runs in network namespace %s (%v), the test's or another node's", node.id, ns, err)
		}
		seen[ns] = true
	}

	var mu sync.Mutex
	locals := map[string]int{}
	hooks := kgo.WithHooks(connectHook(func(conn net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		locals[conn.LocalAddr().(*net.TCPAddr).IP.String()]++
	}))
	c.createRF3("netns", 1)
	ctx := ctxFor(t, time.Minute)
	producer := c.client(hooks, kgo.RequiredAcks(kgo.AllISRAcks()))
	var want []string
	for i := range 20 {
		v := "r" + strconv.Itoa(i)
		want = append(want, v)
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "netns", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := c.node(1).client(hooks, kgo.ConsumeTopics("netns"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %q", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(locals) != 1 || locals[c.net.host(clientHost)] == 0 {
		t.Fatalf("the clients' connections had local addresses %v, want only the client namespace's %s", locals, c.net.host(clientHost))
	}
	t.Logf("%d connections, all from %s", locals[c.net.host(clientHost)], c.net.host(clientHost))
}

// connectHook calls f with every connection a kgo client opens.
type connectHook func(net.Conn)

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if err == nil {
		h(conn)
	}
}
