// Package loopback picks loopback addresses for the listeners tests start:
// a port that nobody listens on now and that no outgoing connection will
// take before the test binds it.
//
// A port from 127.0.0.1:0 comes from the kernel's ephemeral range, the
// same range every outgoing connection's local port comes from: between
// the probe closing it and the daemon binding it, or while a test has a
// node stopped, any client connection of any process on the machine may
// take it, and the bind fails with "address already in use" (CI saw it,
// with every package's tests running at once). FreeAddr picks below that
// range instead, where only listeners ever bind.
//
// Test processes of several packages run at once and pick from the same
// range: one whose node is down for a while (its address kept for the
// restart) must not see another process bind that port, and its peers
// talk to a stranger (CI saw one cluster's Raft replicate another's log).
// So a port, once picked, is reserved for the life of the process that
// picked it: FreeAddr holds an exclusive flock on a file named for it in
// $TMPDIR/mq-test-ports, which the kernel releases when the process ends,
// however it ends.
package loopback

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port FreeAddr picks: above the well-known and most
// registered services' ports.
const lowest = 10000

// FreeAddr returns a 127.0.0.1 address whose port nobody listens on, below
// the ephemeral range where that range leaves room, else one the kernel
// picks.
func FreeAddr() (string, error) {
	if low := ephemeralLow(); low > lowest+1000 {
		for range 100 {
			port := lowest + rand.IntN(low-lowest)
			if !reserve(port) {
				continue // another test process has it
			}
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				l.Close()
				return l.Addr().String(), nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
