package controller

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every sentinel error of the package keeps its identity across the wire:
// wrapped on one node, errors.Is the same sentinel on the other, with the
// message unchanged.
func TestErrorsCrossTheWireAsTheirSentinels(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, s := range wireErrors {
		named["Err"+s.name] = true
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") && !named[n.Name] {
							t.Errorf("%s is not in wireErrors", n.Name)
						}
					}
				}
			}
		}
	}
	for _, s := range wireErrors {
		sent := fmt.Errorf("topic %q: %w", "x", s.err)
		var buf bytes.Buffer
		if err := writeMessage(&buf, encodeError(sent)); err != nil {
			t.Fatal(err)
		}
		var w wireError
		if err := readMessage(&buf, &w); err != nil {
			t.Fatal(err)
		}
		got := decodeError(&w)
		if !errors.Is(got, s.err) || got.Error() != sent.Error() {
			t.Errorf("%s: sent %q, got %q (is %v)", s.name, sent, got, errors.Is(got, s.err))
		}
	}
	if got := decodeError(encodeError(errors.New("something else"))); got == nil || got.Error() != "something else" {
		t.Errorf("plain error came back as %v", got)
	}
	if decodeError(encodeError(nil)) != nil {
		t.Error("nil error came back non-nil")
	}
}

// TestRPCsBeforeRaftStartsAreRetried: the RPC listener runs before Raft
// is started; a peer's request in between (one that took this node for
// the leader before it restarted) is told to retry elsewhere, not served
// by a Raft that is not there yet (mqd crashed on a nil *raft.Raft).
func TestRPCsBeforeRaftStartsAreRetried(t *testing.T) {
	c := &Controller{raftStarted: make(chan struct{}), voterList: []string{"1@a"}, closing: context.Background(), fsm: newFSM(nil)}
	for _, op := range []string{opPropose, opHeartbeat, opElect, opJoin, opQuorum} {
		if _, err := c.handleRPC(&rpcRequest{Op: op, From: 2, Voters: []string{"1@a"}, TimeoutMillis: 1000}, nil, ""); !errors.Is(err, errRetry) {
			t.Errorf("%s before Raft starts: %v, want errRetry", op, err)
		}
	}
	if _, err := c.handleRPC(&rpcRequest{Op: opHello, From: 2, Voters: []string{"1@a"}}, nil, ""); err != nil {
		t.Errorf("hello before Raft starts: %v", err)
	}
}

// TestHeartbeatsShareOneConnection: a node's RPCs to the active
// controller reuse one connection rather than dialing one each (every
// heartbeat of every broker used to take a descriptor on both sides).
func TestHeartbeatsShareOneConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts raft nodes over TCP")
	}
	tc := startCluster(t, 1, 1, nil)
	leader := tc.leader()
	ctx := ctxFor(t, 20*time.Second)
	epoch, err := leader.RegisterBroker(ctx, Broker{ID: 2, Host: "127.0.0.1", Port: 9092})
	if err != nil {
		t.Fatal(err)
	}
	nonVoter := tc.Get(2)
	heartbeat := func() {
		t.Helper()
		if _, err := nonVoter.Heartbeat(ctx, Heartbeat{BrokerID: 2, BrokerEpoch: epoch, AppliedVersion: nonVoter.Image().Version}); err != nil {
			t.Fatalf("heartbeat through node 2: %v", err)
		}
	}
	heartbeat()
	before := leader.mux.rpcAccepted.Load()
	const n = 50
	for range n {
		heartbeat()
	}
	if got := leader.mux.rpcAccepted.Load() - before; got != 0 {
		t.Fatalf("%d heartbeats opened %d connections to the active controller, want none beyond the one open", n, got)
	}

	// The active controller restarts: the pooled connection to it is
	// stale, and the next heartbeat reaches it on a new one.
	tc.Stop(1)
	tc.Start(1)
	leader = tc.leader()
	heartbeat()
	if got := leader.mux.rpcAccepted.Load(); got == 0 {
		t.Fatalf("restarted controller accepted no RPC connection")
	}
}

// fakePeer is an RPC server on a real TCP listener that answers the
// first request of each connection and drops the connection on the
// second, after reading it: a peer that went away with a request of a
// reused connection in hand.
type fakePeer struct {
	ln       net.Listener
	mu       sync.Mutex
	received []string // ops, in order
}

func startFakePeer(t *testing.T) *fakePeer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePeer{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				var kind [1]byte
				if _, err := io.ReadFull(r, kind[:]); err != nil {
					return
				}
				for i := 0; ; i++ {
					var req rpcRequest
					if err := readMessage(r, &req); err != nil {
						return
					}
					p.mu.Lock()
					p.received = append(p.received, req.Op)
					p.mu.Unlock()
					if i > 0 {
						return
					}
					if err := writeMessage(conn, &rpcResponse{}); err != nil {
						return
					}
				}
			})
		}
	})
	return p
}

func (p *fakePeer) ops() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.received)
}

// TestRequestOnAStaleConnection: a request whose reused connection fails
// before any answer is sent once more, on a new connection, only when
// sending it twice is harmless; a propose fails with its outcome unknown
// and is never sent twice.
func TestRequestOnAStaleConnection(t *testing.T) {
	for _, tc := range []struct {
		op   string
		want []string
	}{
		{opHeartbeat, []string{opHeartbeat, opHeartbeat, opHeartbeat}},
		{opPropose, []string{opPropose, opPropose}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			p := startFakePeer(t)
			c := &Controller{cfg: Config{NodeID: 2}, voterList: []string{"1@a"}, fatal: make(chan error, 1), fsm: newFSM(nil)}
			defer c.rpcPool.close()
			ctx := ctxFor(t, 10*time.Second)
			address := p.ln.Addr().String()
			if err := c.call(ctx, address, tc.op, nil, nil); err != nil {
				t.Fatalf("first %s: %v", tc.op, err)
			}
			err := c.call(ctx, address, tc.op, nil, nil)
			if tc.op == opPropose {
				if !errors.Is(err, ErrNotController) || !strings.Contains(err.Error(), "outcome unknown") {
					t.Fatalf("propose on a connection dropped after it was sent: %v, want ErrNotController, outcome unknown", err)
				}
			} else if err != nil {
				t.Fatalf("%s on a connection dropped after it was sent: %v, want it answered on a new connection", tc.op, err)
			}
			if got := p.ops(); !slices.Equal(got, tc.want) {
				t.Fatalf("the peer received %v, want %v", got, tc.want)
			}
		})
	}
}
