package controller

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/mqtest"
)

// nodeTLS issues node id a certificate of ca (subject CN=node-ID) in dir.
func nodeTLS(t *testing.T, ca *mqtest.CA, dir string, id int32) *TLS {
	t.Helper()
	name := fmt.Sprintf("node-%d", id)
	f := ca.WriteFiles(t, dir, name, mqtest.Leaf{Subject: pkix.Name{CommonName: name}, Node: true, Hosts: []string{"127.0.0.1"}})
	tl, err := NewTLS(TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// startSecuredCluster starts voters nodes with certificates of one CA;
// ids lists each node's TLS by ID.
func startSecuredCluster(t *testing.T, voters int) (*testCluster, *mqtest.CA, map[int32]*TLS) {
	t.Helper()
	ca := mqtest.NewCA(t, "cluster")
	dir := t.TempDir()
	ids := map[int32]*TLS{}
	for id := int32(1); id <= int32(voters); id++ {
		ids[id] = nodeTLS(t, ca, dir, id)
	}
	tc := startCluster(t, voters, 0, func(cfg *Config) { cfg.TLS = ids[cfg.NodeID] })
	return tc, ca, ids
}

// rawCall sends one RPC to address as node from, over a connection made
// with tlsID (nil: plain TCP), and returns its error.
func rawCall(ctx context.Context, address string, tlsID *TLS, req rpcRequest) error {
	conn, err := dialKind(ctx, address, connRPC, "", tlsID)
	if err != nil {
		return errUnreachable{err}
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if err := writeMessage(conn, &req); err != nil {
		return errUnreachable{err}
	}
	var resp rpcResponse
	if err := readMessage(conn, &resp); err != nil {
		return errUnreachable{err}
	}
	return decodeError(resp.Err)
}

// TestSecuredPortRefusesStrangers: with TLS, a connection without a
// certificate of the cluster CA reaches neither the RPCs nor Raft; a
// node's certificate speaks only for that node: node 2's certificate
// cannot register as node 1, fence or shut down another broker, set a
// partition by hand, or take another ID.
func TestSecuredPortRefusesStrangers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	tc, _, ids := startSecuredCluster(t, 3)
	leader := tc.leader()
	ctx := ctxFor(t, 60*time.Second)
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		e, err := tc.Get(id).RegisterBroker(ctx, Broker{ID: id, Host: "127.0.0.1", Port: 9000 + id})
		if err != nil {
			t.Fatalf("register %d over TLS: %v", id, err)
		}
		epochs[id] = e
	}
	if _, err := tc.Get(2).CreateTopic(ctx, CreateTopic{Name: "orders", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatalf("create topic through node 2: %v", err)
	}
	tc.converged(leader)
	img := leader.Image()
	for id := int32(1); id <= 3; id++ {
		if got, want := img.NodePrincipals[id], ids[id].Principal(); got != want {
			t.Fatalf("node %d bound to %q, want %q", id, got, want)
		}
	}
	addr := leader.self.Addr
	base := rpcRequest{From: 2, Voters: leader.voterList, TimeoutMillis: 5000}
	propose := func(typ commandType, body any) rpcRequest {
		data := mustEncode(t, typ, body)
		js, _ := json.Marshal(data)
		r := base
		r.Op, r.Body = opPropose, js
		return r
	}
	heartbeat := func(hb Heartbeat) rpcRequest {
		js, _ := json.Marshal(hb)
		r := base
		r.Op, r.Body = opHeartbeat, js
		return r
	}
	p := img.Topics["orders"].Partitions[0]
	follower := p.Replicas[0]
	if follower == p.Leader {
		follower = p.Replicas[1]
	}
	stranger := nodeTLS(t, mqtest.NewCA(t, "other"), t.TempDir(), 2)
	for _, tc := range []struct {
		name string
		tls  *TLS
		req  rpcRequest
		want error // nil: the connection is closed unanswered
	}{
		{"no TLS at all", nil, propose(cmdCreateTopic, &createTopicV1{Name: "x", ID: TopicID{1}, Partitions: 1, ReplicationFactor: 1}), nil},
		{"another CA's certificate", stranger, propose(cmdCreateTopic, &createTopicV1{Name: "x", ID: TopicID{1}, Partitions: 1, ReplicationFactor: 1}), nil},
		{"node 2 registers as node 1", ids[2], propose(cmdRegisterBroker, &registerBrokerV3{ID: 1, Host: "evil", Port: 1}), ErrNodeNotAuthorized},
		{"node 2 claims to be node 1", ids[2], func() rpcRequest {
			r := propose(cmdRegisterBroker, &registerBrokerV3{ID: 1, Host: "evil", Port: 1})
			r.From = 1
			return r
		}(), ErrNodeNotAuthorized},
		{"node 2 takes a new ID", ids[2], func() rpcRequest {
			r := propose(cmdBindNode, &bindNodeV1{ID: 7, Principal: ids[2].Principal()})
			r.From = 7
			return r
		}(), ErrNodeNotAuthorized},
		{"node 2 fences node 3", ids[2], propose(cmdFenceBroker, &fenceBrokerV2{ID: 3, Epoch: epochs[3]}), ErrNodeNotAuthorized},
		{"node 2 shuts node 3 down", ids[2], propose(cmdControlledShutdown, &controlledShutdownV1{ID: 3, Epoch: epochs[3]}), ErrNodeNotAuthorized},
		{"node 2 heartbeats as node 3", ids[2], heartbeat(Heartbeat{BrokerID: 3, BrokerEpoch: epochs[3], WantShutDown: true}), ErrNodeNotAuthorized},
		{"node 2 elects a leader of its choice", ids[2], propose(cmdElectLeaders, &electLeadersV2{Type: 1, Partitions: []topicPartitionV1{{Topic: "orders", Partition: 0}}, Leaders: []uncleanLeaderV2{{Topic: "orders", Partition: 0, Leader: 2}}}), ErrNodeNotAuthorized},
		{"node 2 overrides a partition", ids[2], propose(cmdAlterPartition, &alterPartitionV1{Topic: "orders", Partition: 0, Leader: 2, ISR: []int32{2}, LeaderEpoch: p.LeaderEpoch + 1}), ErrNodeNotAuthorized},
		{"a follower changes an ISR as its leader", ids[follower], func() rpcRequest {
			r := propose(cmdAlterPartition, &alterPartitionV2{Topic: "orders", Partition: 0, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{p.Leader}})
			r.From = follower
			return r
		}(), ErrNodeNotAuthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := rawCall(ctxFor(t, 10*time.Second), addr, tc.tls, tc.req)
			var unreachable errUnreachable
			switch {
			case tc.want == nil && !errors.As(err, &unreachable):
				t.Fatalf("answered %v, want the connection refused", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	// A stranger's Raft connection is closed before Raft reads it.
	for _, tlsID := range []*TLS{nil, stranger} {
		if _, err := dialKind(ctx, addr, connRaft, leader.mux.voters, tlsID); err == nil && tlsID != nil {
			t.Fatal("a Raft connection with another CA's certificate was accepted")
		}
	}
	// Node 2's own requests still work, and nothing above changed the image.
	if _, err := tc.Get(2).Heartbeat(ctx, Heartbeat{BrokerID: 2, BrokerEpoch: epochs[2], AppliedVersion: tc.Get(2).Image().Version}); err != nil {
		t.Fatalf("node 2's own heartbeat: %v", err)
	}
	after := leader.Image()
	for id := int32(1); id <= 3; id++ {
		b := after.Brokers[id]
		if b.Host != "127.0.0.1" || b.Fenced || b.InControlledShutdown {
			t.Fatalf("broker %d after the refused requests: %+v", id, b)
		}
	}
	if _, ok := after.Topics["x"]; ok {
		t.Fatal("a stranger created a topic")
	}
	if got := after.Topics["orders"].Partitions[0]; got.LeaderEpoch != p.LeaderEpoch || len(got.ISR) != 3 {
		t.Fatalf("partition after the refused requests: %+v, was %+v", got, p)
	}
}

// TestRemoveNonvoter: a non-voter that joined can be removed; a voter
// cannot.
func TestRemoveNonvoter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	tc := startCluster(t, 3, 1, nil)
	leader := tc.leader()
	ctx := ctxFor(t, 30*time.Second)
	inConfig := func(id int32) bool {
		f := leader.raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		for _, s := range f.Configuration().Servers {
			if s.ID == serverID(id) {
				return true
			}
		}
		return false
	}
	mqtest.WaitFor(t, "node 4 joined", func() (bool, string) { return inConfig(4), "not in the configuration" })
	tc.Stop(4)
	if err := tc.Get(2).RemoveNonvoter(ctx, 4); err != nil {
		t.Fatalf("remove non-voter 4 through node 2: %v", err)
	}
	if inConfig(4) {
		t.Fatal("node 4 still in the configuration")
	}
	if err := tc.Get(2).RemoveNonvoter(ctx, 3); !errors.Is(err, ErrVotersMismatch) {
		t.Fatalf("remove voter 3: %v, want ErrVotersMismatch", err)
	}
}

// TestBindNodeNeverChangesABinding: a node ID is bound to one principal
// and a principal to one node ID, for good; binding the same pair again
// changes nothing.
func TestBindNodeNeverChangesABinding(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(cmdBindNode, &bindNodeV1{ID: 1, Principal: "User:CN=node-1"})
	if res := tf.do(cmdBindNode, &bindNodeV1{ID: 1, Principal: "User:CN=node-1"}); res.err != nil || !res.unchanged {
		t.Fatalf("the same binding again: %+v, want accepted and unchanged", res)
	}
	for _, b := range []bindNodeV1{
		{ID: 1, Principal: "User:CN=node-2"}, // node 1 to another certificate
		{ID: 2, Principal: "User:CN=node-1"}, // node 1's certificate to node 2
	} {
		if res := tf.do(cmdBindNode, &b); !errors.Is(res.err, ErrNodeNotAuthorized) {
			t.Fatalf("bind %+v: %v, want ErrNodeNotAuthorized", b, res.err)
		}
	}
	for _, b := range []bindNodeV1{{ID: -1, Principal: "User:x"}, {ID: 3}} {
		if res := tf.do(cmdBindNode, &b); !errors.Is(res.err, ErrInvalidCommand) {
			t.Fatalf("bind %+v: %v, want ErrInvalidCommand", b, res.err)
		}
	}
	tf.must(cmdBindNode, &bindNodeV1{ID: 2, Principal: "User:CN=node-2"})
	if got := tf.f.Image().NodePrincipals; len(got) != 2 || got[1] != "User:CN=node-1" || got[2] != "User:CN=node-2" {
		t.Fatalf("bindings %v", got)
	}
}

// TestUnregisterBrokerUnbindsItsNode: a broker that is stopped and hosts
// no replica leaves the image with its certificate binding, after which
// another node may bind that ID or that certificate; one that runs or
// hosts a replica is refused and keeps both.
func TestUnregisterBrokerUnbindsItsNode(t *testing.T) {
	tf := newTestFSM(t)
	for id := int32(1); id <= 4; id++ {
		tf.must(cmdBindNode, &bindNodeV1{ID: id, Principal: fmt.Sprintf("User:CN=node-%d", id)})
		tf.must(cmdRegisterBroker, broker(id))
	}
	tf.must(cmdCreateTopic, &createTopicV1{Name: "orders", ID: topicID(1), Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1, 2, 4}}})
	if res := tf.do(cmdUnregisterBroker, &unregisterBrokerV1{ID: 4}); !errors.Is(res.err, ErrBrokerInUse) || !strings.Contains(res.err.Error(), "running") {
		t.Fatalf("unregister a running broker: %v, want ErrBrokerInUse (running)", res.err)
	}
	tf.must(cmdControlledShutdown, &controlledShutdownV1{ID: 4, Epoch: tf.f.Image().Brokers[4].Epoch})
	if res := tf.do(cmdUnregisterBroker, &unregisterBrokerV1{ID: 4}); !errors.Is(res.err, ErrBrokerInUse) || !strings.Contains(res.err.Error(), "orders:0") {
		t.Fatalf("unregister a broker hosting orders:0: %v, want ErrBrokerInUse naming it", res.err)
	}
	tf.must(cmdDeleteTopic, &deleteTopicV1{Name: "orders"})
	tf.must(cmdUnregisterBroker, &unregisterBrokerV1{ID: 4})
	img := tf.f.Image()
	if _, ok := img.Brokers[4]; ok {
		t.Fatal("broker 4 still registered")
	}
	if _, ok := img.NodePrincipals[4]; ok || len(img.NodePrincipals) != 3 {
		t.Fatalf("bindings after unregistering 4: %v", img.NodePrincipals)
	}
	if res := tf.do(cmdUnregisterBroker, &unregisterBrokerV1{ID: 4}); res.err != nil || !res.unchanged {
		t.Fatalf("unregister 4 again: %+v, want accepted and unchanged", res)
	}
	// The ID and the certificate are free again, each on its own.
	tf.must(cmdBindNode, &bindNodeV1{ID: 4, Principal: "User:CN=node-4-new"})
	tf.must(cmdBindNode, &bindNodeV1{ID: 5, Principal: "User:CN=node-4"})
}

// TestTLSReload: Reload reads the files again, and files that do not
// load leave what was read before in use.
func TestTLSReload(t *testing.T) {
	ca := mqtest.NewCA(t, "cluster")
	dir := t.TempDir()
	f := ca.WriteFiles(t, dir, "node-1", mqtest.Leaf{Subject: pkix.Name{CommonName: "node-1"}, Node: true})
	tl, err := NewTLS(TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA})
	if err != nil {
		t.Fatal(err)
	}
	first := tl.Certificate().SerialNumber
	if tl.Principal() != "User:CN=node-1" {
		t.Fatalf("principal %q", tl.Principal())
	}
	ca.WriteFiles(t, dir, "node-1", mqtest.Leaf{Subject: pkix.Name{CommonName: "node-1"}, Node: true})
	if err := tl.Reload(); err != nil {
		t.Fatal(err)
	}
	second := tl.Certificate().SerialNumber
	if second.Cmp(first) == 0 {
		t.Fatal("Reload kept the old certificate")
	}
	if err := os.WriteFile(f.Key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tl.Reload(); err == nil {
		t.Fatal("Reload of a broken key file succeeded")
	}
	if tl.Certificate().SerialNumber.Cmp(second) != 0 {
		t.Fatal("a failed Reload replaced the certificate")
	}
	if _, err := NewTLS(TLSFiles{Cert: f.Cert, Key: f.Key}); err == nil {
		t.Fatal("NewTLS without a CA file succeeded")
	}
}
