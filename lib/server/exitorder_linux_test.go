package server

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// lateSockets counts this process's socket descriptors numbered at or
// above lateBase: the late descriptors of the server's connections.
func lateSockets(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < lateBase() {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// TestClientConnectionsEndAfterThePeersAtExit: every connection holds a
// descriptor in the upper half of the limit from its accept, which a
// process's exit closes after the lower ones; a connection whose first
// client id ExitFirst names (another broker's) gives it up, so that it
// ends first; a connection that closes closes both.
func TestClientConnectionsEndAfterThePeersAtExit(t *testing.T) {
	if lateBase() == 0 {
		t.Skip("the descriptor limit is too low for late descriptors")
	}
	s := startServer(t, Config{ExitFirst: func(id string) bool { return strings.HasPrefix(id, "peer-") }}, newFake(echoReply))
	addr := s.Addrs()[0]
	client, peer := dial(t, addr), dial(t, addr)
	mqtest.WaitFor(t, "a late descriptor for each connection", func() (bool, string) {
		n := lateSockets(t)
		return n == 2, strconv.Itoa(n) + " late descriptors"
	})
	for i, c := range []struct {
		conn net.Conn
		id   string
	}{{client, "kcat"}, {peer, "peer-2"}} {
		if _, err := c.conn.Write(appendRequest(nil, metadataRequest(4), int32(i), &c.id)); err != nil {
			t.Fatal(err)
		}
		recv(t, c.conn, kmsg.NewPtrMetadataResponse())
	}
	if n := lateSockets(t); n != 1 {
		t.Fatalf("after both clients' first request: %d late descriptors, want 1 (the client's; the peer gave its up)", n)
	}
	client.Close()
	mqtest.WaitFor(t, "the closed connection's late descriptor closed", func() (bool, string) {
		n := lateSockets(t)
		return n == 0, strconv.Itoa(n) + " late descriptors"
	})
}
