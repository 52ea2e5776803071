package server

// The order in which a killed mqd's connections end.
//
// A process that dies has its descriptors closed by the kernel in
// descriptor order, and each socket ends (its peer reads a close or a
// reset) when its last descriptor is closed. On a loaded machine that
// loop takes milliseconds. A client whose connection to a dying leader
// ended early in it asks another broker for metadata at once; when the
// other broker's own connection to the dead one (its Watch, lib/peer)
// comes later in the loop, the other broker has not heard yet, its
// Metadata answer still names the dead leader, and kgo then waits its
// MetadataMinAge (5 s) before asking again.
//
// So each client connection holds a second descriptor, a duplicate
// numbered in the upper half of the descriptor limit (late), which the
// exit closes after every lower one: a client's socket ends after the
// sockets of the other brokers' connections (Config.ExitFirst), which
// give theirs up at their first request. A connection closed normally
// closes both.

// lateRef is a connection's late descriptor: -1 when it has none.
type lateRef int

// releaseLate closes the connection's late descriptor, if it holds one,
// exactly once. Called by the reader (a peer's first request) and by
// close, under closeOnce or on the reader goroutine.
func (c *conn) releaseLate() {
	c.lateMu.Lock()
	fd := c.late
	c.late = -1
	c.lateMu.Unlock()
	closeLate(fd)
}

// sortForExit gives up the late descriptor of a connection whose client
// id ExitFirst names, once, at its first request with a client id.
func (c *conn) sortForExit(clientID string) {
	if c.exitSorted {
		return
	}
	c.exitSorted = true
	if f := c.s.cfg.ExitFirst; f != nil && f(clientID) {
		c.releaseLate()
	}
}
