package server

import (
	"net"
	"syscall"
)

// The order in which a killed mqd's connections end.
//
// A process that dies has its descriptors closed by the kernel, and each
// socket ends (its peer reads a close or a reset) when the last
// descriptor of it is released. On a loaded machine the whole takes
// milliseconds. A client whose connection to a dying leader ended early
// asks another broker for metadata at once; when the other broker's own
// connection to the dead one (its Watch, lib/peer) ends later, the other
// broker has not heard yet, its Metadata answer still names the dead
// leader, and kgo then waits its MetadataMinAge (5 s) before asking
// again.
//
// The kernel walks the descriptor table upward and queues each file
// whose last descriptor it closed; Linux 6 runs that queue last in first
// (older kernels ran it in order): the socket whose highest descriptor
// is highest ends first. So the other brokers' connections
// (Config.ExitFirst, known by the client id of their first request) each
// take a duplicate descriptor in the upper half of the descriptor limit,
// above every other socket, and end before any client's. Closing the
// connection closes it.

// lateRef is a connection's duplicate descriptor: -1 when it has none.
type lateRef int

const noLate = lateRef(-1)

// sortForExit gives a connection whose client id ExitFirst names its
// duplicate, once, at its first request with a client id.
func (c *conn) sortForExit(clientID string) {
	if c.exitSorted {
		return
	}
	c.exitSorted = true
	if f := c.s.cfg.ExitFirst; f == nil || !f(clientID) || c.sock == nil {
		return
	}
	fd := holdLate(c.sock)
	c.lateMu.Lock()
	defer c.lateMu.Unlock()
	if c.closed {
		closeLate(fd) // close ran meanwhile: it will not
		return
	}
	c.late = fd
}

// socketOf is nc as a syscall.Conn (for its descriptor), nil when it is
// not one.
func socketOf(nc net.Conn) syscall.Conn {
	sc, _ := nc.(syscall.Conn)
	return sc
}
