package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// socketClient is a kgo client that reaches every node through its Unix
// socket (as root: a super user there), whatever TCP address the
// metadata names.
func (c *cluster) socketClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	sockets := map[string]string{}
	for _, n := range c.nodes {
		sockets[n.addr] = n.socket
	}
	var d net.Dialer
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) {
		sock, ok := sockets[addr]
		if !ok {
			return nil, fmt.Errorf("no node at %s", addr)
		}
		return d.DialContext(ctx, "unix", sock)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.nodes[0].addr), kgo.Dialer(dial)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// tcpPeers lists the remote ports of the established TCP connections
// process pid holds (its descriptors' sockets, looked up in the
// network namespace's tables).
func tcpPeers(pid int) ([]int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "01" || !inodes[fields[9]] {
				continue
			}
			_, portHex, _ := strings.Cut(fields[2], ":")
			b, err := hex.DecodeString(portHex)
			if err != nil || len(b) != 2 {
				continue
			}
			ports = append(ports, int(b[0])<<8|int(b[1]))
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecuredClusterPeersSpeakOnlyTLS: with security.inter.broker.protocol
// SSL, a node's connections to the other brokers (the replica fetchers,
// the peer pool, the Watch's idle connection to each, and a metrics
// scrape's lag lookups) all go to their ssl:// listeners as the node:
// no node holds a connection to another's plaintext listener, and the
// lag of a group's partitions led elsewhere is served although the
// plaintext listeners, whose clients are anonymous, may read nothing.
func TestSecuredClusterPeersSpeakOnlyTLS(t *testing.T) {
	parallel(t)
	metricsAddrs := freeAddrs(t, 3)
	pki := &securedPKI{}
	o := securedOptsPKI(t, 3, clusterOpts{}, pki)
	secured := o.nodeProps
	o.nodeProps = func(id int32) []string {
		// After the secured ones: anonymous clients are no super users.
		return append(secured(id), "super.users=User:CN=nobody", "metrics.listen=tcp://"+metricsAddrs[id-1])
	}
	c := startCluster(t, 3, o)
	ctx := ctxFor(t, time.Minute)
	cl := c.socketClient(t)
	adm := kadm.NewClient(cl)

	const group, n = "spread", 20
	offsets := kadm.Offsets{}
	for id := int32(1); id <= 3; id++ {
		topic := fmt.Sprintf("on-%d", id)
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		as := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		as.Replicas = []int32{id} // one replica, on node id
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, as)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: int64(id), LeaderEpoch: -1})
	}
	for id := int32(1); id <= 3; id++ {
		topic := fmt.Sprintf("on-%d", id)
		mqtest.WaitFor(t, topic+" on node "+strconv.Itoa(int(id))+" alone", func() (bool, string) {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			p := td[topic].Partitions[0]
			return slices.Equal(p.Replicas, []int32{id}) && p.Leader == id, fmt.Sprintf("%+v", p)
		})
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := adm.CommitOffsets(ctx, group, offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	coords := adm.FindGroupCoordinators(ctx, group)
	if coords[group].Err != nil {
		t.Fatalf("find coordinator: %v", coords[group].Err)
	}
	coordinator := coords[group].NodeID

	// The coordinator hosts one of the three partitions; the lag of the
	// other two is asked of their leaders.
	mqtest.WaitFor(t, "the group's lag on its coordinator's metrics", func() (bool, string) {
		families := scrape(t, metricsAddrs[coordinator-1])
		for id := 1; id <= 3; id++ {
			topic := fmt.Sprintf("on-%d", id)
			got, ok := sample(families, "mq_group_lag_messages", "group="+group, "topic="+topic, "partition=0")
			if !ok || got != float64(n-id) {
				return false, fmt.Sprintf("coordinator %d: mq_group_lag_messages of %s %v (present %v), want %d", coordinator, topic, got, ok, n-id)
			}
		}
		return true, ""
	})

	plain, ssl := map[int]int32{}, map[int]int32{}
	for _, node := range c.nodes {
		plain[portOf(t, node.addr)] = node.id
		for _, a := range node.args {
			if rest, ok := strings.CutPrefix(a, "ssl://"); ok {
				ssl[portOf(t, rest)] = node.id
			}
		}
	}
	mqtest.WaitFor(t, "every node's connections to the others on their ssl:// listeners only", func() (bool, string) {
		for _, node := range c.nodes {
			ports, err := tcpPeers(node.pid())
			if err != nil {
				return false, err.Error()
			}
			reached := map[int32]bool{}
			for _, p := range ports {
				if id, ok := plain[p]; ok && id != node.id {
					return false, fmt.Sprintf("node %d holds a connection to node %d's plaintext listener", node.id, id)
				}
				if id, ok := ssl[p]; ok && id != node.id {
					reached[id] = true
				}
			}
			if len(reached) != 2 {
				return false, fmt.Sprintf("node %d is connected to the ssl:// listeners of %v, want both others (the Watch)", node.id, reached)
			}
		}
		return true, ""
	})
}

// TestSecuredClusterShareStateOnAnotherNode: with the brokers speaking
// TLS to each other, a share-partition whose state is on a partition of
// __share_group_state led by the other node loads and writes that state
// through the other node's ssl:// listener (its plaintext one does not
// speak TLS): every record is delivered and acknowledged once.
func TestSecuredClusterShareStateOnAnotherNode(t *testing.T) {
	parallel(t)
	props := []string{"group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1", "share.coordinator.state.topic.num.partitions=1"}
	c := startCluster(t, 2, securedOpts(t, 2, clusterOpts{props: props}))
	cl := c.client()
	setShareConfigs(t, cl, "workers", "share.auto.offset.reset", "earliest")
	// A first share fetch creates __share_group_state; its one partition's
	// leader is S.
	stateLeader := warmShareState(t, c, "workers", 2)
	// jobs' one replica is on the other node: its share-partition leader
	// reads and writes its state on S.
	other := 3 - stateLeader
	c.createTopicOn("jobs", [][]int32{{other}}, nil)
	const n = 200
	produceValues(t, cl, "jobs", 0, n)
	tally := newShareTally()
	stop := tally.consumersOf(t, c.client, "workers", "jobs", 2)
	tally.waitDistinct(t, n, 60*time.Second)
	stop()
	for i := 0; i < n; i++ {
		if got := tally.accepted[strconv.Itoa(i)]; got != 1 {
			t.Errorf("record %d accepted %d times, want 1", i, got)
		}
	}
}
