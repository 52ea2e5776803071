package controller

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// probeSeen is one probe of a broker's process, as Config.probed reports it.
type probeSeen struct {
	node, broker int32
	gone         bool
}

// probes collects the probes of a cluster's nodes.
type probes chan probeSeen

func (p probes) hook(node int32) func(int32, bool) {
	return func(broker int32, gone bool) { p <- probeSeen{node, broker, gone} }
}

// next waits for the next probe by node.
func (p probes) next(t *testing.T, node int32) probeSeen {
	t.Helper()
	ctx := ctxFor(t, 20*time.Second)
	for {
		select {
		case got := <-p:
			if got.node == node {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("no probe by node %d", node)
		}
	}
}

// brokerOnNonVoter is an active controller (node 1, the only voter, on a
// manual clock that the test does not move unless it says so) and a
// non-voter, node 2, on wall time, whose broker 2 registered and
// heartbeats through its own node, leading led-by-2/0 with broker 1 in
// the ISR.
type brokerOnNonVoter struct {
	tc     *testCluster
	active *Controller
	clock  *clock.Manual
	probes probes
	epoch  int64
}

func startBrokerOnNonVoter(t *testing.T, session time.Duration) *brokerOnNonVoter {
	t.Helper()
	s := registerBrokerOnNonVoter(t, session)
	s.heartbeat(t)
	return s
}

// registerBrokerOnNonVoter is startBrokerOnNonVoter before broker 2's
// first heartbeat.
func registerBrokerOnNonVoter(t *testing.T, session time.Duration) *brokerOnNonVoter {
	t.Helper()
	s := &brokerOnNonVoter{clock: clock.NewManual(manualStart), probes: make(probes, 64)}
	s.tc = newCluster(t, 1, 1, func(c *Config) {
		c.BrokerSessionTimeout = session
		if c.NodeID == 1 {
			c.Clock = s.clock
			c.probed = s.probes.hook(1)
		}
	})
	// Node 1 first: the retries of a join it gets before it leads
	// would wait for its manual clock.
	s.tc.Start(1)
	s.tc.Start(2)
	s.active = s.tc.leader()
	ctx := ctxFor(t, 20*time.Second)
	if _, err := s.active.RegisterBroker(ctx, Broker{ID: 1, Host: "127.0.0.1", Port: 9091}); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.epoch, err = s.tc.Get(2).RegisterBroker(ctx, Broker{ID: 2, Host: "127.0.0.1", Port: 9092}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.active.Image().Brokers[2].RaftAddr, s.tc.Member(2).RaftAddr; got != want {
		t.Fatalf("broker 2 registered with raft address %q, want its node's %q", got, want)
	}
	if _, err := s.active.CreateTopic(ctx, CreateTopic{Name: "led-by-2", Assignments: [][]int32{{2, 1}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// heartbeat sends broker 2's heartbeat through node 2.
func (s *brokerOnNonVoter) heartbeat(t *testing.T) {
	t.Helper()
	n := s.tc.Get(2)
	if _, err := n.Heartbeat(ctxFor(t, 20*time.Second), Heartbeat{BrokerID: 2, BrokerEpoch: s.epoch, AppliedVersion: n.Image().Version}); err != nil {
		t.Fatalf("heartbeat of broker 2: %v", err)
	}
}

// fencings checks the active controller's fencing counts.
func (s *brokerOnNonVoter) fencings(t *testing.T, sessionTimeout, processGone uint64) {
	t.Helper()
	want := map[string]uint64{FencedSessionTimeout: sessionTimeout, FencedProcessGone: processGone}
	if got := s.active.BrokerFencings(); !maps.Equal(got, want) {
		t.Fatalf("fencings %v, want %v", got, want)
	}
}

// TestBrokerWhoseProcessIsGoneIsFencedAtOnce: the connection that
// carried broker 2's heartbeats, or only its registration, ends and
// nothing listens on its node's Raft address any more: the active
// controller fences it without waiting for its session, on a clock that
// has not moved at all.
func TestBrokerWhoseProcessIsGoneIsFencedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	for _, heartbeated := range []bool{true, false} {
		t.Run(fmt.Sprintf("heartbeated=%v", heartbeated), func(t *testing.T) {
			s := registerBrokerOnNonVoter(t, 9*time.Second)
			if heartbeated {
				s.heartbeat(t)
			}
			s.tc.Stop(2) // its listener closes, then its connections
			if p := s.probes.next(t, 1); p.broker != 2 || !p.gone {
				t.Fatalf("probe %+v, want broker 2 found gone", p)
			}
			img := s.active.Image()
			if !img.Brokers[2].Fenced {
				t.Fatalf("broker 2, its process gone, not fenced: %+v", img.Brokers[2])
			}
			if p := img.Partition("led-by-2", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
				t.Fatalf("led-by-2/0 after broker 2 was fenced: %+v, want broker 1 leading alone", p)
			}
			if now := s.clock.Now(); !now.Equal(manualStart) {
				t.Fatalf("the controller's clock moved to %v", now)
			}
			s.fencings(t, 0, 1)
		})
	}
}

// TestBrokerWhoseConnectionDropsButWhoseNodeAnswersIsNotFenced: the
// connection ends, but the broker's node still accepts connections: a
// broken connection is no proof of a dead process, and the broker keeps
// its session, and heartbeats again on a new connection.
func TestBrokerWhoseConnectionDropsButWhoseNodeAnswersIsNotFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	s := startBrokerOnNonVoter(t, 9*time.Second)
	dropIdleRPCConns(s.tc.Get(2))
	if p := s.probes.next(t, 1); p.broker != 2 || p.gone {
		t.Fatalf("probe %+v, want broker 2 found listening", p)
	}
	if b := s.active.Image().Brokers[2]; b.Fenced {
		t.Fatalf("broker 2, whose node answers, fenced: %+v", b)
	}
	s.heartbeat(t)
	s.fencings(t, 0, 0)
}

// TestSilentBrokerWithAnOpenConnectionIsFencedAtItsSessionTimeout: a
// broker that stops heartbeating but whose connection stays open (a
// frozen process, a hung node) is not probed; its session times out.
func TestSilentBrokerWithAnOpenConnectionIsFencedAtItsSessionTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	const session = 4 * time.Second
	s := startBrokerOnNonVoter(t, session)
	start := s.clock.Now()
	interval := s.active.sessionCheckInterval()
	for {
		s.clock.Advance(interval)
		silence := s.clock.Now().Sub(start)
		fenced := s.active.Image().Brokers[2].Fenced
		if fenced != (silence > session) {
			t.Fatalf("broker 2 after %v of silence (session timeout %v): fenced=%v", silence, session, fenced)
		}
		if fenced {
			break
		}
	}
	select {
	case p := <-s.probes:
		t.Fatalf("probe %+v while every connection stayed open", p)
	default:
	}
	s.fencings(t, 1, 0)
}

// dropIdleRPCConns closes c's idle RPC connections, as a network that
// resets them would, and keeps the pool working.
func dropIdleRPCConns(c *Controller) {
	c.rpcPool.mu.Lock()
	defer c.rpcPool.mu.Unlock()
	for _, conns := range c.rpcPool.idle {
		for _, conn := range conns {
			conn.Close()
		}
	}
	c.rpcPool.idle = nil
}

// TestNewActiveControllerFencesTheBrokersWhoseProcessIsGone: the active
// controller's node dies; the new one probes every broker when it
// becomes active and fences at once those whose process is gone (the
// former controller's, and one that died earlier), not the live one,
// on clocks that never move.
func TestNewActiveControllerFencesTheBrokersWhoseProcessIsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	found := make(probes, 64)
	var clocksMu sync.Mutex // the nodes open at once
	var clocks []*clock.Manual
	tc := startCluster(t, 3, 0, func(c *Config) {
		m := clock.NewManual(manualStart)
		clocksMu.Lock()
		clocks = append(clocks, m)
		clocksMu.Unlock()
		c.Clock = m
		c.probed = found.hook(c.NodeID)
	})
	old := tc.leader()
	ctx := ctxFor(t, 20*time.Second)
	dead := freeAddrs(t, 1)[0] // nothing listens there
	for id := int32(1); id <= 4; id++ {
		raftAddr := dead
		if id <= 3 {
			raftAddr = tc.Member(id).RaftAddr
		}
		if _, err := old.RegisterBroker(ctx, Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id, RaftAddr: raftAddr}); err != nil {
			t.Fatal(err)
		}
	}
	tc.Stop(old.cfg.NodeID)
	leader := tc.leader()
	got := map[int32]bool{}
	for len(got) < 3 {
		p := found.next(t, leader.cfg.NodeID)
		got[p.broker] = p.gone
	}
	var live int32
	for id := int32(1); id <= 3; id++ {
		if id != old.cfg.NodeID && id != leader.cfg.NodeID {
			live = id
		}
	}
	want := map[int32]bool{old.cfg.NodeID: true, 4: true, live: false}
	if !maps.Equal(got, want) {
		t.Fatalf("the new controller's probes (broker: gone) %v, want %v", got, want)
	}
	img := leader.Image()
	for id := int32(1); id <= 4; id++ {
		if fenced := img.Brokers[id].Fenced; fenced != want[id] {
			t.Errorf("broker %d fenced=%v, want %v", id, fenced, want[id])
		}
	}
	if f := leader.BrokerFencings(); f[FencedProcessGone] != 2 || f[FencedSessionTimeout] != 0 {
		t.Errorf("fencings %v, want 2 for process_gone", f)
	}
	clocksMu.Lock()
	defer clocksMu.Unlock()
	for _, m := range clocks {
		if !m.Now().Equal(manualStart) {
			t.Errorf("a node's clock moved to %v", m.Now())
		}
	}
}

// TestProbeTellsAGoneProcessFromALiveOne: a probe finds a process gone
// when nothing listens on its port, or when the connection it made is
// closed right after (a dying process's listener, closed after the
// connection that made the controller look); not when the connection
// stays open, as a live node's port keeps it until the dialer speaks.
func TestProbeTellsAGoneProcessFromALiveOne(t *testing.T) {
	c := &Controller{closing: context.Background()}
	dead := freeAddrs(t, 1)[0]
	if !c.processGone(dead) {
		t.Errorf("probe of %s, where nothing listens: not gone", dead)
	}
	for _, tc := range []struct {
		name      string
		closeConn bool
		want      bool
	}{
		{"connection closed", true, true},
		{"connection kept", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			defer close(done)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				if !tc.closeConn {
					<-done
				}
				conn.Close()
			}()
			if got := c.processGone(ln.Addr().String()); got != tc.want {
				t.Errorf("gone = %v, want %v", got, tc.want)
			}
		})
	}
}
