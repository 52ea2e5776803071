package coordinator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/config"
	"github.com/mqproject/mq/lib/controller"
	"github.com/mqproject/mq/lib/mqtest"
	"github.com/mqproject/mq/lib/partition"
	"github.com/mqproject/mq/lib/peer"
	"github.com/mqproject/mq/lib/queue"
	"github.com/mqproject/mq/lib/record"
)

func TestReplicationFactorIsBoundedByLiveBrokers(t *testing.T) {
	brokers := func(n int) *controller.Image {
		img := &controller.Image{Brokers: map[int32]controller.Broker{}}
		for i := range n {
			img.Brokers[int32(i+1)] = controller.Broker{ID: int32(i + 1)}
		}
		return img
	}
	for _, tc := range []struct {
		setting int16
		brokers int
		want    int16
	}{
		{3, 1, 1},
		{3, 2, 2},
		{3, 3, 3},
		{3, 5, 3},
		{1, 3, 1},
		{5, 4, 4},
		{3, 0, 1}, // nobody registered yet: this node will be
	} {
		if got := ReplicationFactor(tc.setting, brokers(tc.brokers)); got != tc.want {
			t.Errorf("offsets.topic.replication.factor=%d with %d brokers: %d replicas, want %d", tc.setting, tc.brokers, got, tc.want)
		}
	}
}

// fakeLeader is another broker's listener as a Topic's remote writes see
// it: it answers each Produce once release lets it, and records the
// batches in the order they arrived.
type fakeLeader struct {
	addr    string
	release chan struct{}

	mu      sync.Mutex
	batches [][]byte
}

func startFakeLeader(t *testing.T) *fakeLeader {
	t.Helper()
	return startFakeLeaderTLS(t, nil)
}

// startFakeLeaderTLS is startFakeLeader on a TLS listener of cfg (nil:
// plain TCP).
func startFakeLeaderTLS(t *testing.T, cfg *tls.Config) *fakeLeader {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	f := &fakeLeader{addr: ln.Addr().String(), release: make(chan struct{}, 1000)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeLeader) serve(conn net.Conn) {
	defer conn.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			return
		}
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corr := binary.BigEndian.Uint32(frame[4:])
		body := frame[8:]
		clientID := int(int16(binary.BigEndian.Uint16(body)))
		body = body[2+max(clientID, 0):]
		if version >= 9 {
			body = body[1:] // no header tags
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		if err := req.ReadFrom(body); err != nil {
			return
		}
		<-f.release
		f.mu.Lock()
		f.batches = append(f.batches, bytes.Clone(req.Topics[0].Partitions[0].Records))
		f.mu.Unlock()
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = req.Topics[0].Topic
		rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
		resp.Topics = append(resp.Topics, rt)
		out := binary.BigEndian.AppendUint32(nil, corr)
		if version >= 9 {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
			return
		}
	}
}

// TestRemoteWritesAreQueuedInOrderWithoutWaiting: a write to a partition
// led by another node returns before that node answers (so that a
// caller may write under its mutex), and the writes reach the leader in
// the order they were made, each waited for by its own Pending.
func TestRemoteWritesAreQueuedInOrderWithoutWaiting(t *testing.T) {
	fake := startFakeLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, portText, _ := net.SplitHostPort(fake.addr)
	port, _ := strconv.Atoi(portText)
	topic := remoteStateTopic(t, ctx, controller.Broker{ID: 2, Host: host, Port: int32(port)}, nil)

	const n = 20
	var pending []queue.Pending
	for i := range n {
		batch, err := record.Build(record.BuildOptions{}, []record.Record{{Key: []byte("k"), Value: []byte(strconv.Itoa(i))}})
		if err != nil {
			t.Fatal(err)
		}
		w, err := topic.Write(ctx, 0, batch)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		pending = append(pending, w)
	}
	// Nothing was answered yet: every Write returned without waiting.
	fake.mu.Lock()
	answered := len(fake.batches)
	fake.mu.Unlock()
	if answered != 0 {
		t.Fatalf("%d writes answered before the leader let any through", answered)
	}
	for range n {
		fake.release <- struct{}{}
	}
	for i, w := range pending {
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for i, b := range fake.batches {
		var got string
		if err := record.Iterate(b, 0, func(r *record.Record) error { got = string(r.Value); return nil }); err != nil {
			t.Fatal(err)
		}
		if got != strconv.Itoa(i) {
			t.Fatalf("batch %d reached the leader carrying %q: out of order", i, got)
		}
	}
}

// TestRemoteWritesGoToTheSSLListenerWhenBrokersSpeakTLS: with
// security.inter.broker.protocol SSL (the partitions' PeerTLS, a TLS
// pool), a write to a partition led elsewhere goes to the leader's
// ssl:// listener, as the node, and never to its plaintext one, which
// does not speak TLS.
func TestRemoteWritesGoToTheSSLListenerWhenBrokersSpeakTLS(t *testing.T) {
	ca := mqtest.NewCA(t, "cluster CA")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	pair := func(name string) tls.Certificate {
		certPEM, keyPEM := ca.Issue(t, mqtest.Leaf{Subject: pkix.Name{CommonName: name}, Node: true, Hosts: []string{"127.0.0.1"}})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	fake := startFakeLeaderTLS(t, &tls.Config{Certificates: []tls.Certificate{pair("node-2")}, ClientCAs: roots,
		ClientAuth: tls.RequireAndVerifyClientCert})
	fake.release <- struct{}{}
	// The leader's plaintext listener: every dial is counted and closed.
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	var plainDials atomic.Int64
	go func() {
		for {
			conn, err := plain.Accept()
			if err != nil {
				return
			}
			plainDials.Add(1)
			conn.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, portText, _ := net.SplitHostPort(plain.Addr().String())
	port, _ := strconv.Atoi(portText)
	node1 := pair("node-1")
	peerTLS := func() *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{node1}, RootCAs: roots, ServerName: "127.0.0.1"}
	}
	topic := remoteStateTopic(t, ctx, controller.Broker{ID: 2, Host: host, Port: int32(port),
		Listeners: []string{"tcp://" + plain.Addr().String(), "ssl://" + fake.addr}}, peerTLS)

	batch, err := record.Build(record.BuildOptions{}, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := topic.Write(ctx, 0, batch)
	if err == nil {
		err = w.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("write to the partition led by node 2: %v (dials of its plaintext listener: %d)", err, plainDials.Load())
	}
	fake.mu.Lock()
	got := len(fake.batches)
	fake.mu.Unlock()
	if got != 1 || plainDials.Load() != 0 {
		t.Fatalf("node 2's ssl:// listener got %d writes and its plaintext one %d dials, want 1 and 0", got, plainDials.Load())
	}
}

// remoteStateTopic opens node 1 of a two-node cluster whose other node is
// leader, the one replica, of the internal topic __state, and returns
// node 1's coordinator runtime on it: every write goes to leader. With
// peerTLS the brokers speak TLS to each other.
func remoteStateTopic(t *testing.T, ctx context.Context, leader controller.Broker, peerTLS func() *tls.Config) *Topic {
	t.Helper()
	dir := t.TempDir()
	ctrl, err := controller.Open(controller.Config{NodeID: 1, Dir: filepath.Join(dir, "ctrl")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	for _, b := range []controller.Broker{{ID: 1, Host: "127.0.0.1", Port: 1}, leader} {
		if _, err := ctrl.RegisterBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ctrl.CreateTopic(ctx, controller.CreateTopic{Name: "__state", Partitions: 1, Assignments: [][]int32{{leader.ID}}, Internal: true}); err != nil {
		t.Fatal(err)
	}
	settings := config.Defaults()
	settings.NodeID, settings.DataDir = 1, filepath.Join(dir, "data")
	parts, err := partition.Open(partition.Config{Settings: settings, Controller: ctrl, PeerTLS: peerTLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parts.Close() })
	peers := peer.NewPool("test")
	if peerTLS != nil {
		peers = peer.NewPoolTLS("test", peerTLS)
	}
	t.Cleanup(peers.Close)
	topic := New(Config{Name: "__state", Partitions: 1, ReplicationFactor: 1, NodeID: 1, Controller: ctrl, Hosted: parts, Peers: peers})
	t.Cleanup(topic.Close)
	return topic
}
