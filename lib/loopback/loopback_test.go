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
