package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// clusterSecured runs every cluster of the e2e tests (the chaos rows
// included; not those on a network of their own) secured as
// startSecuredCluster's: make chaos CHAOSFLAGS=-cluster.secured.
var clusterSecured = flag.Bool("cluster.secured", false, "start every loopback cluster with its own traffic authenticated (controller.ssl.*, security.inter.broker.protocol=SSL)")

// startSecuredCluster starts n nodes whose own traffic is authenticated:
// each node has a certificate CN=node-ID of one CA, its controller port
// is mutual TLS (controller.ssl.*), and its followers fetch over the
// leaders' ssl:// listeners with it (security.inter.broker.protocol
// SSL; the listener serves the same certificate and asks clients for
// theirs). The test's own clients use the plaintext tcp:// listeners.
func startSecuredCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c, _ := startSecuredClusterPKI(t, n)
	return c
}

// securedPKI is what startSecuredClusterPKI's nodes authenticate with:
// the cluster CA and each node's files (certificate, key, CA).
type securedPKI struct {
	ca    *mqtest.CA
	files map[int32]mqtest.TLSFiles
}

// startSecuredClusterPKI is startSecuredCluster that also returns the
// nodes' certificates.
func startSecuredClusterPKI(t *testing.T, n int) (*cluster, *securedPKI) {
	t.Helper()
	pki := &securedPKI{}
	o := securedOptsPKI(t, n, clusterOpts{}, pki)
	return startCluster(t, n, o), pki
}

// securedOpts adds to o what secures a cluster of n nodes (see
// startSecuredCluster), after o's own per-node properties and arguments.
func securedOpts(t testing.TB, n int, o clusterOpts) clusterOpts {
	t.Helper()
	return securedOptsPKI(t, n, o, &securedPKI{})
}

// securedOptsPKI is securedOpts that fills pki in.
func securedOptsPKI(t testing.TB, n int, o clusterOpts, pki *securedPKI) clusterOpts {
	t.Helper()
	ca := mqtest.NewCA(t, "cluster CA")
	dir := t.TempDir()
	files := map[int32]mqtest.TLSFiles{}
	ssl := map[int32]string{}
	for id := int32(1); id <= int32(n); id++ {
		name := fmt.Sprintf("node-%d", id)
		files[id] = ca.WriteFiles(t, dir, name, mqtest.Leaf{Subject: pkix.Name{CommonName: name}, Node: true, Hosts: []string{"127.0.0.1"}})
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		ssl[id] = addr
	}
	props, args := o.nodeProps, o.nodeArgs
	o.nodeProps = func(id int32) []string {
		var own []string
		if props != nil {
			own = props(id)
		}
		f := files[id]
		return append(own,
			"controller.ssl.certificate.location="+f.Cert, "controller.ssl.key.location="+f.Key, "controller.ssl.ca.location="+f.CA,
			"ssl.certificate.location="+f.Cert, "ssl.key.location="+f.Key, "ssl.ca.location="+f.CA, "ssl.client.auth=requested",
			"security.inter.broker.protocol=SSL",
			// The tests' clients are anonymous on tcp:// and may do
			// anything; the nodes, on ssl:// with their certificates, are
			// let in as nodes (ACLs are enforced: an ssl:// listener
			// exists), which is what replication and the coordinators
			// need.
			"super.users=User:ANONYMOUS")
	}
	o.nodeArgs = func(id int32) []string {
		var own []string
		if args != nil {
			own = args(id)
		}
		return append(own, "--listen", "ssl://"+ssl[id])
	}
	pki.ca, pki.files = ca, files
	o.secured = true
	t.Logf("cluster secured: controller port mutual TLS, followers fetching over ssl:// as their node")
	return o
}

// TestSecuredClusterReplicatesAndFailsOver: with the controller port
// authenticated, a 3-node cluster replicates and a killed leader's
// partition is taken over, every acknowledged record kept.
func TestSecuredClusterReplicatesAndFailsOver(t *testing.T) {
	parallel(t)
	c := startSecuredCluster(t, 3)
	c.createRF3("secured", 1)
	cl := c.client(kgo.RecordRetries(20))
	ctx := ctxFor(t, 2*time.Minute)
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secured", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 20)
	leader := c.node(c.waitPartitions("secured", "in sync", fullISR)[0].leader)
	leader.kill()
	c.waitPartitionsOn(leader, "secured", "another leader", func(ps []partitionState) bool {
		return ps[0].leader >= 0 && ps[0].leader != leader.id
	})
	produce(20, 40)
	consumer := c.client(kgo.ConsumeTopics("secured"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 40 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 40: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("v%d", i); v != want {
			t.Fatalf("record %d = %q, want %q", i, v, want)
		}
	}
}

// TestSecuredClusterRefusesOutsiders: an outsider on the controller port
// (no certificate, or another CA's) gets no answer to a controller RPC
// and no Raft connection, so it can neither create topics, register,
// fence nor override partitions, nor speak Raft; the cluster keeps its
// brokers and its controller. A plain client fetching as replica 999 is
// refused and the high-water mark stays.
func TestSecuredClusterRefusesOutsiders(t *testing.T) {
	parallel(t)
	c := startSecuredCluster(t, 3)
	c.createRF3("guarded", 1)
	ctx := ctxFor(t, 2*time.Minute)
	cl := c.client()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	controllerBefore := c.node(1).quorumLeader(ctx)

	stranger := mqtest.NewCA(t, "stranger CA")
	sf := stranger.WriteFiles(t, t.TempDir(), "node-1", mqtest.Leaf{Subject: pkix.Name{CommonName: "node-1"}, Node: true})
	strangerCert, err := tls.LoadX509KeyPair(sf.Cert, sf.Key)
	if err != nil {
		t.Fatal(err)
	}
	voters := strings.Split(c.voters, ",")
	createTopic := append([]byte{3, 1}, `{"name":"evil","id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":1,"replication_factor":1}`...)
	rpc := func(op string, body []byte) []byte {
		js, _ := json.Marshal(body)
		req, _ := json.Marshal(map[string]any{"op": op, "from": 1, "voters": voters, "timeout_ms": 5000, "body": json.RawMessage(js)})
		frame := binary.BigEndian.AppendUint32([]byte{'M'}, uint32(len(req)))
		return append(frame, req...)
	}
	raftGreeting := binary.BigEndian.AppendUint16([]byte{'V'}, uint16(len(c.voters)))
	raftGreeting = append(raftGreeting, c.voters...)
	for _, node := range c.nodes {
		for _, tc := range []struct {
			name  string
			tls   bool
			bytes []byte
		}{
			{"plaintext create topic", false, rpc("propose", createTopic)},
			{"plaintext register", false, rpc("propose", append([]byte{2, 3}, `{"id":1,"host":"evil","port":1}`...))},
			{"plaintext fence", false, rpc("propose", append([]byte{10, 2}, `{"id":2,"epoch":1}`...))},
			{"plaintext override", false, rpc("propose", append([]byte{8, 1}, `{"topic":"guarded","partition":0,"leader":-1,"isr":[],"leader_epoch":99}`...))},
			{"plaintext join", false, rpc("join", []byte(`{"id":9,"addr":"127.0.0.1:1"}`))},
			{"plaintext raft", false, raftGreeting},
			{"other CA create topic", true, rpc("propose", createTopic)},
			{"other CA raft", true, raftGreeting},
		} {
			t.Run(fmt.Sprintf("node %d %s", node.id, tc.name), func(t *testing.T) {
				conn, err := net.DialTimeout("tcp", node.raftAddr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				if tc.tls {
					tconn := tls.Client(conn, &tls.Config{Certificates: []tls.Certificate{strangerCert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
					if err := tconn.Handshake(); err != nil {
						return // refused at the handshake
					}
					// TLS 1.3: the server's refusal of the certificate
					// arrives with the first read.
					conn = tconn
				}
				conn.Write(tc.bytes)
				n, err := io.ReadFull(conn, make([]byte, 1))
				var timeout net.Error
				if n > 0 || err == nil || errors.As(err, &timeout) && timeout.Timeout() {
					t.Fatalf("read %d bytes, %v: want the connection closed unanswered", n, err)
				}
			})
		}
	}

	// Nothing the outsider sent took effect.
	meta, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := meta.Topics["evil"]; ok {
		t.Fatal("an outsider created a topic")
	}
	for _, b := range meta.Brokers {
		if b.Host != "127.0.0.1" {
			t.Fatalf("broker %d registered at %s", b.NodeID, b.Host)
		}
	}
	ps := c.waitPartitions("guarded", "still in sync", fullISR)
	if after := c.node(1).quorumLeader(ctx); after != controllerBefore {
		t.Fatalf("the active controller moved from %d to %d", controllerBefore, after)
	}

	// A client posing as replica 999, or as a real follower, reads nothing
	// and moves nothing: its connection carries no certificate of that
	// node. It poses while at the log end, where a follower's fetch would
	// count as holding every record.
	td, err := kadm.NewClient(cl).ListTopics(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	hwBefore := highWatermark(t, cl, "guarded")
	follower := ps[0].replicas[0]
	if follower == ps[0].leader {
		follower = ps[0].replicas[1]
	}
	for _, replica := range []int32{999, follower} {
		for _, offset := range []int64{0, hwBefore} {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.ReplicaState.ID = replica, replica
			req.MaxBytes, req.MinBytes = 1<<20, 1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "guarded", td["guarded"].ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(int(ps[0].leader)))
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
				t.Fatalf("fetch as replica %d from a client: %v, want CLUSTER_AUTHORIZATION_FAILED", replica, kerr.ErrorForCode(resp.ErrorCode))
			}
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					if len(p.RecordBatches) != 0 {
						t.Fatalf("fetch as replica %d from a client read %d bytes", replica, len(p.RecordBatches))
					}
				}
			}
		}
	}
	if hw := highWatermark(t, cl, "guarded"); hw != hwBefore {
		t.Fatalf("high-water mark moved from %d to %d", hwBefore, hw)
	}
	// The real followers, over their certificates, still replicate.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("acks=all produce after the refused fetches: %v", err)
	}
	c.waitPartitions("guarded", "in sync after", fullISR)
}

// highWatermark is partition 0's end offset as ListOffsets shows it.
func highWatermark(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, 0)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.Offset
}

// TestSecuredClusterReloadsNodeCertificates: a node's certificate
// renewed with the same subject and read again on SIGHUP is what its
// controller port presents from then on, and the other nodes take it
// from new connections (the binding is to the subject): a follower
// restarted afterwards catches up and the partition is in sync again.
func TestSecuredClusterReloadsNodeCertificates(t *testing.T) {
	parallel(t)
	c, pki := startSecuredClusterPKI(t, 3)
	c.createRF3("renewed", 1)
	node := c.node(1)
	first := controllerPortSerial(t, node.raftAddr)
	certPEM, keyPEM := pki.ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: "node-1"}, Node: true, Hosts: []string{"127.0.0.1"}})
	writeFileAtomic(t, pki.files[1].Cert, certPEM)
	writeFileAtomic(t, pki.files[1].Key, keyPEM)
	if err := syscall.Kill(node.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	mqtest.WaitFor(t, "node 1 to reload its certificates", func() (bool, string) {
		log := node.stderr.String()
		return strings.Contains(log, "SIGHUP: TLS certificate reloaded"), tail(log, 10)
	})
	if second := controllerPortSerial(t, node.raftAddr); second == first {
		t.Fatal("the controller port presents the old certificate after SIGHUP")
	}
	// Node 2 restarted: every connection between it and node 1 is new,
	// made with node 1's renewed certificate both ways.
	c.node(2).restart(false)
	cl := c.client()
	if err := cl.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Topic: "renewed", Value: []byte("after renewal")}).FirstErr(); err != nil {
		t.Fatalf("produce after renewal: %v", err)
	}
	c.waitPartitions("renewed", "in sync after the renewal", fullISR)
}

// controllerPortSerial is the serial of the certificate a node's
// controller port presents (read in the handshake, which the node then
// refuses: the test presents no certificate).
func controllerPortSerial(t *testing.T, addr string) string {
	t.Helper()
	var serial string
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			serial = cs.PeerCertificates[0].SerialNumber.String()
			return nil
		}})
	if err == nil {
		conn.Close()
	}
	if serial == "" {
		t.Fatalf("no certificate from the controller port at %s: %v", addr, err)
	}
	return serial
}
