package server

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/mqproject/mq/lib/mqtest"
)

// withExtras counts this process's sockets that have two descriptors:
// their own and the duplicate a peer's connection holds.
func withExtras(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]int{}
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			refs[target]++
		}
	}
	n := 0
	for _, r := range refs {
		if r == 2 {
			n++
		}
	}
	return n
}

func isPeer(id string) bool { return strings.HasPrefix(id, "peer-") }

// ask sends a Metadata request as clientID on c and reads the answer.
func ask(t *testing.T, c net.Conn, clientID string) {
	t.Helper()
	if _, err := c.Write(appendRequest(nil, metadataRequest(4), 1, &clientID)); err != nil {
		t.Fatal(err)
	}
	recv(t, c, kmsg.NewPtrMetadataResponse())
}

// TestPeerConnectionsHoldADuplicate: a connection whose first client id
// ExitFirst names (another broker's) takes a duplicate descriptor in the
// upper half of the limit; a client's does not; the duplicate closes with
// the connection.
func TestPeerConnectionsHoldADuplicate(t *testing.T) {
	if lateBase() == 0 {
		t.Skip("no exit order here: a kernel older than 6, or a low descriptor limit")
	}
	s := startServer(t, Config{ExitFirst: isPeer}, newFake(echoReply))
	addr := s.Addrs()[0]
	client, peer := dial(t, addr), dial(t, addr)
	ask(t, client, "kcat")
	ask(t, peer, "peer-2")
	if n := withExtras(t); n != 1 {
		t.Fatalf("after both clients' first request: %d sockets with a duplicate, want 1 (the peer's)", n)
	}
	peer.Close()
	mqtest.WaitFor(t, "the closed connection's duplicate closed", func() (bool, string) {
		n := withExtras(t)
		return n == 0, strconv.Itoa(n) + " sockets with a duplicate"
	})
}

// TestClientConnectionsEndAfterThePeersWhenTheProcessDies kills a
// process serving a peer's connection and, accepted after it, a
// client's, with fillers more peers' connections on either side, and watches
// which of the two ends first: the peer's must. Without the duplicate
// the client's ends first, as Linux 6 releases a dead process's sockets
// from the highest descriptor down.
func TestClientConnectionsEndAfterThePeersWhenTheProcessDies(t *testing.T) {
	// fillers set the time between the two ends: the releases of that
	// many sockets, long enough for this process to see them apart.
	const fillers = 1000
	if os.Getenv("MQ_EXIT_ORDER_CHILD") == "1" {
		s := startServer(t, Config{Listeners: []string{"tcp://127.0.0.1:0"}, ExitFirst: isPeer}, newFake(echoReply))
		os.Stdout.WriteString(s.Addrs()[0] + "\n")
		select {} // until killed
	}
	if lateBase() == 0 {
		t.Skip("no exit order here: a kernel older than 6, or a low descriptor limit")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClientConnectionsEndAfterThePeersWhenTheProcessDies$", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), "MQ_EXIT_ORDER_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the serving process printed no address: %v", err)
	}
	addr := strings.TrimSpace(line)
	open := func(id string) net.Conn {
		c := dial(t, addr)
		ask(t, c, id)
		return c
	}
	for i := range fillers {
		open("peer-a" + strconv.Itoa(i))
	}
	peer := open("peer-watched")
	for i := range fillers {
		open("peer-b" + strconv.Itoa(i))
	}
	client := open("kcat")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fds := map[int]string{}
	var pfds []unix.PollFd
	for name, c := range map[string]net.Conn{"peer": peer, "client": client} {
		f, err := c.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds[int(f.Fd())] = name
		pfds = append(pfds, unix.PollFd{Fd: int32(f.Fd()), Events: unix.POLLIN | unix.POLLRDHUP})
	}
	var order []string
	deadline := time.Now().Add(time.Minute)
	for len(order) < 2 && time.Now().Before(deadline) {
		n, err := unix.Poll(pfds, 1000)
		if err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		var now []string
		for i := range pfds {
			if n > 0 && pfds[i].Revents != 0 && pfds[i].Events != 0 {
				now = append(now, fds[int(pfds[i].Fd)])
				pfds[i].Events = 0
			}
			pfds[i].Revents = 0
		}
		if len(now) > 1 {
			order = append(order, "both:"+strings.Join(now, "+"))
			break
		}
		order = append(order, now...)
	}
	if len(order) == 0 || order[0] != "peer" {
		t.Fatalf("connections ended in the order %v; want the peer's first", order)
	}
}
