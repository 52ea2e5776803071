package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrIsBelowTheEphemeralRange: the address binds, and its port is
// one no outgoing connection takes.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if host != "127.0.0.1" || (low > lowest+1000 && (port < lowest || port >= low)) {
			t.Fatalf("FreeAddr %s; want 127.0.0.1 and a port in [%d, %d)", addr, lowest, low)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr %s does not bind: %v", addr, err)
		}
		l.Close()
	}
	if port, err := FreePort(); err != nil || port <= 0 {
		t.Fatalf("FreePort: %d, %v", port, err)
	}
}

// TestPickedPortsAreNotPickedAgain: a port FreeAddr gave stays this
// process's, even once nothing listens on it (a node that is down):
// another pick, here or in another process, skips it.
func TestPickedPortsAreNotPickedAgain(t *testing.T) {
	if ephemeralLow() <= lowest+1000 {
		t.Skip("no room below the ephemeral range")
	}
	seen := map[string]bool{}
	for range 200 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("FreeAddr gave %s twice", addr)
		}
		seen[addr] = true
	}
	for addr := range seen {
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if reserve(port) {
			t.Fatalf("port %d, picked already, reserved again", port)
		}
		break
	}
}
