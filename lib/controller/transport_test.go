package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/loopback"
)

// TestRaftConnectionsCarryTheVoterSet: Raft's RPCs name no cluster, so a
// node of another cluster that reaches this node's Raft port is told apart
// by its voter set and refused before Raft sees a byte; a node with the
// same voters is handed to Raft.
func TestRaftConnectionsCarryTheVoterSet(t *testing.T) {
	bind, perr := loopback.FreeAddr()
	if perr != nil {
		t.Fatal(perr)
	}
	ours := []string{"1@" + bind, "2@127.0.0.1:1", "3@127.0.0.1:2"}
	m, err := listenMux(bind, bind, ours, func(c net.Conn, _ string) {}, nil, func() string { return "ours" }, clock.Real(), slog.New(slog.DiscardHandler), raftLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := m.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()

	for _, tc := range []struct {
		name   string
		dial   func(ctx context.Context) (net.Conn, error)
		refuse bool
	}{
		{name: "same voters", dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaft, strings.Join(ours, ","), nil)
		}},
		{name: "same voters and cluster", dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaftCluster, strings.Join(ours, ",")+"\x00ours", nil)
		}},
		{name: "same voters, no cluster id yet", dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaftCluster, strings.Join(ours, ",")+"\x00", nil)
		}},
		{name: "same voters, another cluster", refuse: true, dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaftCluster, strings.Join(ours, ",")+"\x00theirs", nil)
		}},
		{name: "other voters", refuse: true, dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaft, "1@127.0.0.1:9,2@127.0.0.1:10", nil)
		}},
		{name: "no voters (an older build)", refuse: true, dial: func(ctx context.Context) (net.Conn, error) {
			return dialKind(ctx, bind, connRaftUnchecked, "", nil)
		}},
		{name: "voters cut short", refuse: true, dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", bind)
			if err != nil {
				return nil, err
			}
			c.Write([]byte{connRaft, 0, 40, '1', '@'})
			c.(*net.TCPConn).CloseWrite()
			return c, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := tc.dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if !tc.refuse {
				select {
				case c := <-accepted:
					c.Close()
				case <-ctx.Done():
					t.Fatal("a connection with the same voters never reached Raft")
				}
				return
			}
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("refused connection read: %v, want EOF (closed by the node)", err)
			}
			select {
			case c := <-accepted:
				c.Close()
				t.Fatal("Raft was handed a connection of another voter set")
			default:
			}
		})
	}
}
