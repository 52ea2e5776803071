package controller

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
	"github.com/mqproject/mq/lib/loopback"
	"github.com/mqproject/mq/lib/mqtest"
)

// raftStream encodes messages as hashicorp/raft's NetworkTransport
// writes them: the RPC type byte, then the request in msgpack.
type raftStream struct {
	t   testing.TB
	buf bytes.Buffer
	enc *codec.Encoder
}

func newRaftStream(t testing.TB) *raftStream {
	s := &raftStream{t: t}
	s.enc = codec.NewEncoder(&s.buf, &codec.MsgpackHandle{})
	return s
}

func (s *raftStream) add(rpcType byte, req any) {
	s.buf.WriteByte(rpcType)
	if err := s.enc.Encode(req); err != nil {
		s.t.Fatal(err)
	}
}

// feedChunks feeds b to f in random pieces.
func feedChunks(f *raftFrames, b []byte, rng *rand.Rand) error {
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(300))
		if err := f.feed(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func TestRaftFramesFollowRaftsOwnMessages(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	s := newRaftStream(t)
	header := raft.RPCHeader{ProtocolVersion: 3, ID: []byte("1"), Addr: []byte("127.0.0.1:9093")}
	var entries []*raft.Log
	for i := range raftMaxAppendEntries {
		data := make([]byte, rng.IntN(70000))
		entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 2, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()})
	}
	s.add(0, &raft.AppendEntriesRequest{RPCHeader: header, Term: 2, PrevLogEntry: 7, Entries: entries, LeaderCommitIndex: 9})
	// A snapshot's data follows its request, raw: here bytes that are
	// no msgpack at all (0xc1 is never one), far more than a message may hold.
	snapshot := bytes.Repeat([]byte{0xc1}, 3<<20)
	s.add(2, &raft.InstallSnapshotRequest{RPCHeader: header, SnapshotVersion: 1, Term: 2, LastLogIndex: 1 << 40, LastLogTerm: 2,
		Configuration: bytes.Repeat([]byte{1}, 300), ConfigurationIndex: 5, Size: int64(len(snapshot))})
	s.buf.Write(snapshot)
	s.add(1, &raft.RequestVoteRequest{RPCHeader: header, Term: 3, LastLogIndex: 12, LastLogTerm: 2, LeadershipTransfer: true})
	s.add(4, &raft.RequestPreVoteRequest{RPCHeader: header, Term: 3, LastLogIndex: 12, LastLogTerm: 2})
	s.add(3, &raft.TimeoutNowRequest{RPCHeader: header})
	s.add(0, &raft.AppendEntriesRequest{RPCHeader: header, Term: 3}) // a heartbeat

	f := newRaftFrames(raftMaxMessage)
	if err := feedChunks(f, s.buf.Bytes(), rng); err != nil {
		t.Fatalf("raft's own messages refused: %v", err)
	}
	if f.inMessage || f.snapshot != 0 || len(f.stack) != 0 {
		t.Fatalf("after the last message: in a message %v, snapshot bytes due %d, open containers %v", f.inMessage, f.snapshot, f.stack)
	}
	// The same stream under a bound below its AppendEntries.
	if err := feedChunks(newRaftFrames(1<<16), s.buf.Bytes(), rng); !errors.Is(err, errRaftMessage) {
		t.Fatalf("an AppendEntries over the bound: %v, want errRaftMessage", err)
	}
}

func TestRaftFramesRefuseAtTheAnnouncement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"bin32 of 3 GiB", []byte{0, 0x81, 0xa4, 'D', 'a', 't', 'a', 0xc6, 0xc0, 0, 0, 0}},
		{"str32 of 3 GiB", []byte{0, 0xdb, 0xc0, 0, 0, 0}},
		{"ext32 of 3 GiB", []byte{0, 0xc9, 0xc0, 0, 0, 0, 1}},
		{"array32 of 3G values", []byte{0, 0xdd, 0xc0, 0, 0, 0}},
		{"map32 of 2G pairs", []byte{0, 0xdf, 0x80, 0, 0, 0}},
		{"nesting", append([]byte{0}, bytes.Repeat([]byte{0x91}, raftMaxDepth+1)...)},
		{"unknown rpc type", []byte{9}},
		{"never-used byte", []byte{0, 0xc1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := newRaftFrames(raftMaxMessage).feed(tc.stream); !errors.Is(err, errRaftMessage) {
				t.Fatalf("%x: %v, want errRaftMessage", tc.stream, err)
			}
		})
	}
}

// logBuffer is a slog handler's output, safe for concurrent use.
type logBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newLogBuffer() *logBuffer { return &logBuffer{mu: make(chan struct{}, 1)} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu <- struct{}{}
	defer func() { <-l.mu }()
	return l.buf.String()
}

// raftGreeted dials node's Raft port and sends the greeting its voters
// expect, as a node of the cluster would.
func raftGreeted(t *testing.T, tc *testCluster, node *Controller) net.Conn {
	t.Helper()
	voters := strings.Join(tc.Get(node.cfg.NodeID).voterList, ",")
	conn, err := dialKind(ctxFor(t, 10*time.Second), node.cfg.RaftAddr, connRaftCluster, voters+"\x00"+node.Image().ClusterID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedByPeer waits (up to 10 s) for the other end to close conn.
func closedByPeer(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the node kept the connection open")
	}
}

func TestRaftConnectionsAreBoundedAndReplicationGoesOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three raft nodes over TCP")
	}
	const bound = 256 << 10
	logs := newLogBuffer()
	tc := startCluster(t, 3, 0, func(c *Config) {
		c.raftMaxMessage = bound
		c.raftIdle = time.Second
		c.raftTrailingLogs = 5
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	leader := tc.leader()
	var follower *Controller
	for _, c := range tc.Running() {
		if c != leader {
			follower = c
			break
		}
	}

	// refusedLine waits for the log line of the refusal of conn.
	refusedLine := func(t *testing.T, conn net.Conn, what string) {
		t.Helper()
		mqtest.WaitFor(t, "the refusal logged", func() (bool, string) {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, what) && strings.Contains(l, "remote="+conn.LocalAddr().String()) {
					return true, ""
				}
			}
			return false, logs.String()
		})
	}

	t.Run("a message announcing 3 GiB is refused at its header", func(t *testing.T) {
		conn := raftGreeted(t, tc, follower)
		if _, err := conn.Write([]byte{0, 0x81, 0xa7, 'E', 'n', 't', 'r', 'i', 'e', 's', 0x91, 0x81, 0xa4, 'D', 'a', 't', 'a', 0xc6, 0xc0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, conn)
		refusedLine(t, conn, "closing a raft connection that sent a message out of bounds")
	})

	t.Run("a message sent past the bound is not read", func(t *testing.T) {
		// An AppendEntries of 64 entries of bound/2 bytes each: every
		// length announced is within the bound, their sum is not.
		const entries, each = 64, bound / 2
		msg := []byte{0, 0x81, 0xa7, 'E', 'n', 't', 'r', 'i', 'e', 's', 0xdc, 0, entries}
		for range entries {
			msg = append(msg, 0x81, 0xa4, 'D', 'a', 't', 'a', 0xc6)
			msg = binary.BigEndian.AppendUint32(msg, each)
			msg = append(msg, make([]byte, each)...)
		}
		conn := raftGreeted(t, tc, follower)
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		go conn.Write(msg) // fails once the node closes
		closedByPeer(t, conn)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(len(msg))/4 {
			t.Fatalf("the node allocated %d bytes for a %d-byte message on a connection bounded to %d", grew, len(msg), bound)
		}
		refusedLine(t, conn, "closing a raft connection that sent a message out of bounds")
	})

	t.Run("an idle connection is closed", func(t *testing.T) {
		conn := raftGreeted(t, tc, follower)
		closedByPeer(t, conn)
		refusedLine(t, conn, "closing a raft connection idle for longer than its deadline")
	})

	// Replication goes on, and a node that missed more than the leader
	// keeps in its log is sent a snapshot larger than the bound.
	lagging := tc.Get(3)
	if lagging == leader {
		lagging = follower
	}
	laggingID := lagging.cfg.NodeID
	tc.Stop(laggingID)
	for i := range 40 {
		var bindings []auth.Binding
		for j := range 100 {
			bindings = append(bindings, auth.Binding{ResourceType: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral,
				ResourceName: fmt.Sprintf("topic-%d-%d-%s", i, j, strings.Repeat("x", 40)), Principal: "User:alice", Host: "*",
				Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow})
		}
		if err := leader.AlterACLs(ctxFor(t, 10*time.Second), bindings, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := writeSnapshot(&snap, leader.Image()); err != nil {
		t.Fatal(err)
	}
	if snap.Len() <= bound {
		t.Fatalf("the snapshot is %d bytes, not over the bound %d", snap.Len(), bound)
	}
	tc.Start(laggingID)
	tc.converged(leader)
	if got := tc.Get(laggingID).raft.Stats()["last_snapshot_index"]; got == "0" {
		t.Fatalf("node %d caught up without a snapshot", laggingID)
	}
	if _, err := tc.Get(laggingID).RegisterBroker(ctxFor(t, 10*time.Second), Broker{ID: laggingID, Host: "127.0.0.1", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	tc.converged(leader)
}

func TestProposalOverMaxCommandIsRefused(t *testing.T) {
	c := openController(t, t.TempDir())
	big := map[string]string{"x": strings.Repeat("y", maxCommand)}
	err := c.AlterGroupConfigs(context.Background(), "g", big, nil)
	if !errors.Is(err, ErrCommandTooLarge) {
		t.Fatalf("a %d-byte command: %v, want ErrCommandTooLarge", maxCommand, err)
	}
}

// FuzzRaftFrames: any bytes, requests or answers, fed whole or one at a time, are followed
// alike (the same refusal or none, the same state after), never panic,
// and never hold more than raftMaxDepth containers open.
func FuzzRaftFrames(f *testing.F) {
	s := newRaftStream(f)
	header := raft.RPCHeader{ProtocolVersion: 3, ID: []byte("1"), Addr: []byte("a:1")}
	s.add(0, &raft.AppendEntriesRequest{RPCHeader: header, Term: 2, Entries: []*raft.Log{{Index: 1, Term: 2, Data: []byte("x")}}})
	s.add(2, &raft.InstallSnapshotRequest{RPCHeader: header, Size: 3})
	s.buf.WriteString("abc")
	s.add(1, &raft.RequestVoteRequest{RPCHeader: header, Term: 3})
	f.Add(s.buf.Bytes(), uint16(1<<12), false)
	f.Add([]byte{0, 0xdf, 0, 0, 0, 2, 0xa4, 'S', 'i', 'z', 'e', 0xcc, 9}, uint16(100), false)
	f.Add([]byte{0xa0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 3}, uint16(100), true)
	f.Fuzz(func(t *testing.T, b []byte, max uint16, responses bool) {
		frames := newRaftFrames
		if responses {
			frames = newRaftResponseFrames
		}
		whole, single := frames(int64(max)), frames(int64(max))
		errWhole := whole.feed(b)
		var errSingle error
		for i := range b {
			if errSingle = single.feed(b[i : i+1]); errSingle != nil {
				break
			}
			if len(single.stack) > raftMaxDepth {
				t.Fatalf("%d containers open", len(single.stack))
			}
		}
		if (errWhole == nil) != (errSingle == nil) {
			t.Fatalf("whole: %v, a byte at a time: %v", errWhole, errSingle)
		}
		if errWhole == nil && (whole.inMessage != single.inMessage || whole.size != single.size || whole.snapshot != single.snapshot || len(whole.stack) != len(single.stack)) {
			t.Fatalf("whole and a byte at a time differ: %+v, %+v", whole, single)
		}
	})
}

func TestRaftFramesFollowRaftsOwnAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
	s := newRaftStream(t)
	header := raft.RPCHeader{ProtocolVersion: 3, ID: []byte("2"), Addr: []byte("127.0.0.1:9093")}
	for _, answer := range []struct {
		err  string
		resp any
	}{
		{"", &raft.AppendEntriesResponse{RPCHeader: header, Term: 2, LastLog: 12, Success: true}},
		{"", &raft.RequestVoteResponse{RPCHeader: header, Term: 3, Granted: true}},
		{"", &raft.RequestPreVoteResponse{RPCHeader: header, Term: 3}},
		{"unknown rpc type 9", &raft.InstallSnapshotResponse{RPCHeader: header, Term: 3, Success: false}},
		{"", &raft.TimeoutNowResponse{RPCHeader: header}},
	} {
		if err := s.enc.Encode(answer.err); err != nil {
			t.Fatal(err)
		}
		if err := s.enc.Encode(answer.resp); err != nil {
			t.Fatal(err)
		}
	}
	f := newRaftResponseFrames(raftMaxResponse)
	if err := feedChunks(f, s.buf.Bytes(), rng); err != nil {
		t.Fatalf("raft's own answers refused: %v", err)
	}
	if f.inMessage || len(f.stack) != 0 {
		t.Fatalf("after the last answer: in one %v, open containers %v", f.inMessage, f.stack)
	}
	if err := newRaftResponseFrames(raftMaxResponse).feed([]byte{0xdb, 0xc0, 0, 0, 0}); !errors.Is(err, errRaftMessage) {
		t.Fatalf("an error string of 3 GiB: %v, want errRaftMessage", err)
	}
}

// TestRaftAnswerOutOfBoundsClosesTheConnection: a node whose other voter
// answers its RequestVote with an error string announcing 3 GiB closes
// the connection at that header and logs it.
func TestRaftAnswerOutOfBoundsClosesTheConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a raft node over TCP")
	}
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	closed := make(chan error, 1)
	go func() {
		for {
			conn, err := fake.Accept()
			if err != nil {
				return
			}
			var kind [1]byte
			if _, err := io.ReadFull(conn, kind[:]); err != nil || (kind[0] != connRaft && kind[0] != connRaftCluster) {
				conn.Close() // the controller's RPCs: not this test's
				continue
			}
			// The rest of the greeting and the request, whatever they
			// hold; then the answer's first value announces 3 GiB.
			buf := make([]byte, 4096)
			if _, err := conn.Read(buf); err != nil {
				closed <- err
				return
			}
			if _, err := conn.Write([]byte{0xdb, 0xc0, 0, 0, 0}); err != nil {
				closed <- err
				return
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = errors.New("the node kept the connection open")
			} else {
				err = nil
			}
			conn.Close()
			closed <- err
			return
		}
	}()
	self, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	logs := newLogBuffer()
	c, err := Open(Config{NodeID: 1, Dir: t.TempDir(), RaftAddr: self, raftTimeout: testRaftTimeout,
		Voters: []Voter{{ID: 1, Addr: self}, {ID: 2, Addr: fake.Addr().String()}}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node never dialed its other voter")
	}
	mqtest.WaitFor(t, "the refusal logged", func() (bool, string) {
		l := logs.String()
		return strings.Contains(l, "closing a raft connection whose peer answered out of bounds") && strings.Contains(l, "remote="+fake.Addr().String()), l
	})
}

// TestLargestCommandsFitMaxCommand: a registration reporting 150,000
// replicas that lost committed records (more than any node hosts under
// the default max.partitions spread over three brokers) fits in one
// command, and so do an election and a reassignment naming 100,000
// partitions one by one.
func TestLargestCommandsFitMaxCommand(t *testing.T) {
	reg := &registerBrokerV4{registerBrokerV3: registerBrokerV3{ID: 1, Host: "broker-1.example.com", Port: 9092, RaftAddr: "broker-1.example.com:9093"}}
	elect := &electLeadersV1{Type: 0}
	move := &alterReassignmentsV1{}
	for i := range 150_000 {
		topic := fmt.Sprintf("orders-eu-west-%03d", i%1000)
		reg.LostCommitted = append(reg.LostCommitted, lostReplicaV4{Topic: topic, Partition: int32(i / 1000), EndOffset: 1 << 40, HighWatermark: 1<<40 + 12345})
		if i < 100_000 {
			elect.Partitions = append(elect.Partitions, topicPartitionV1{Topic: topic, Partition: int32(i / 1000)})
			move.Partitions = append(move.Partitions, reassignmentV1{Topic: topic, Partition: int32(i / 1000), Replicas: []int32{1, 2, 3}})
		}
	}
	for _, c := range []struct {
		t    commandType
		body any
	}{{cmdRegisterBroker, reg}, {cmdElectLeaders, elect}, {cmdAlterReassignments, move}} {
		data, err := encodeCommand(c.t, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > maxCommand {
			t.Errorf("%v: %d bytes, over maxCommand (%d)", c.t, len(data), maxCommand)
		}
		t.Logf("%v: %d bytes", c.t, len(data))
	}
}
