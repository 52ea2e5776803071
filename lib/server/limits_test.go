package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/mqtest"
)

// dialFrom connects to a TCP address from the loopback address local
// (127.0.0.2 is another peer to the server than 127.0.0.1).
func dialFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	_, a, err := parseListener(addr)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// waitConnections waits until s has n open connections.
func waitConnections(t testing.TB, s *Server, n int) {
	t.Helper()
	mqtest.WaitFor(t, fmt.Sprintf("%d open connections", n), func() (bool, string) {
		got := s.Connections()
		return got == n, fmt.Sprintf("%d open", got)
	})
}

// answers does an ApiVersions round trip on c and reports whether it
// was answered.
func answers(t testing.TB, c net.Conn) bool {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	id := "test"
	if _, err := c.Write(appendRequest(nil, req, 5, &id)); err != nil {
		return false
	}
	_, _, err := readFrame(c)
	return err == nil
}

func TestConnectionsOverMaxConnectionsAreClosedOthersServed(t *testing.T) {
	s := startServer(t, Config{MaxConnections: 3}, newFake(nil))
	tcp, unix := s.Addrs()[0], s.Addrs()[1]
	open := []net.Conn{dial(t, tcp), dial(t, unix), dialFrom(t, "127.0.0.2", tcp)}
	for i, c := range open {
		if !answers(t, c) {
			t.Fatalf("connection %d of 3 not served", i)
		}
	}
	// The fourth, on either listener and from any address, is closed.
	for _, c := range []net.Conn{dial(t, tcp), dial(t, unix), dialFrom(t, "127.0.0.3", tcp)} {
		expectClosed(t, c)
	}
	if total, perIP := s.ConnectionsRefused(); total != 3 || perIP != 0 {
		t.Errorf("refused %d over max.connections, %d per IP; want 3, 0", total, perIP)
	}
	for i, c := range open {
		if !answers(t, c) {
			t.Fatalf("connection %d stopped being served", i)
		}
	}
	// Once one closes, a new one is served.
	open[0].Close()
	waitConnections(t, s, 2)
	checkAlive(t, unix)
}

func TestConnectionsOverPerIPBoundAreClosedOtherAddressesServed(t *testing.T) {
	s := startServer(t, Config{
		MaxConnectionsPerIP:          2,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 3, netip.MustParseAddr("127.0.0.4"): 0},
	}, newFake(nil))
	tcp, unix := s.Addrs()[0], s.Addrs()[1]
	a1, a2 := dial(t, tcp), dial(t, tcp)
	expectClosed(t, dial(t, tcp))
	if !answers(t, a1) || !answers(t, a2) {
		t.Fatal("the first two connections of 127.0.0.1 stopped being served")
	}
	// Other addresses have their own count; an override replaces the bound.
	if !answers(t, dialFrom(t, "127.0.0.2", tcp)) {
		t.Fatal("127.0.0.2 refused")
	}
	for i := range 3 {
		if !answers(t, dialFrom(t, "127.0.0.3", tcp)) {
			t.Fatalf("127.0.0.3's connection %d refused, its override is 3", i)
		}
	}
	expectClosed(t, dialFrom(t, "127.0.0.3", tcp))
	expectClosed(t, dialFrom(t, "127.0.0.4", tcp))
	// Unix socket connections have no IP address.
	for range 3 {
		checkAlive(t, unix)
	}
	if total, perIP := s.ConnectionsRefused(); total != 0 || perIP != 3 {
		t.Errorf("refused %d over max.connections, %d per IP; want 0, 3", total, perIP)
	}
	a1.Close()
	waitConnections(t, s, 5)
	if !answers(t, dial(t, tcp)) {
		t.Fatal("127.0.0.1 refused after one of its connections closed")
	}
}

func TestOnlyOverriddenAddressesConnectWhenPerIPBoundIsNone(t *testing.T) {
	s := startServer(t, Config{
		MaxConnectionsPerIP:          -1,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.2"): 1},
	}, newFake(nil))
	tcp := s.Addrs()[0]
	expectClosed(t, dial(t, tcp))
	if !answers(t, dialFrom(t, "127.0.0.2", tcp)) {
		t.Fatal("the overridden address was refused")
	}
}

// Finding: a Unix socket's directory that another user created (or may
// write in) was used, so that user could swap in their own socket. Now
// Start refuses it with an UnsafeSocketDirError, and a missing one is
// created 0700.
func TestSocketDirectoryAnotherUserCouldWriteIsRefused(t *testing.T) {
	base, err := os.MkdirTemp("", "mqs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	start := func(dir string) error {
		s, err := New(Config{Listeners: []string{"unix://" + filepath.Join(dir, "mqd.sock")}}, newFake(nil))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start()
		s.Close()
		return err
	}

	fresh := filepath.Join(base, "fresh", "mq")
	if err := start(fresh); err != nil {
		t.Fatalf("a missing directory: %v", err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created socket directory: %v %v, want mode 0700", fi.Mode().Perm(), err)
	}

	cases := []struct {
		name  string
		mode  os.FileMode
		owner int // -1: ours
	}{
		{"group-writable", 0o770, -1},
		{"world-writable", 0o777, -1},
		{"world-writable with the sticky bit", 0o1777, -1},
		{"another user's", 0o700, 4242},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(base, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.owner >= 0 {
				if os.Geteuid() != 0 {
					t.Skip("giving a directory to another user needs root")
				}
				if err := os.Chown(dir, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			err := start(dir)
			var unsafe *UnsafeSocketDirError
			if !errors.As(err, &unsafe) || unsafe.Dir != dir {
				t.Fatalf("Start: %v, want an UnsafeSocketDirError for %s", err, dir)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of more than one line: %q", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "mqd.sock")); err == nil {
				t.Error("a socket was made in the refused directory")
			}
		})
	}
}
