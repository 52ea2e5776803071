// Package probe tells whether the process that listened at an address
// is gone, from one dial: the rule the active controller fences a broker
// by (lib/controller) and a node holds answers naming a broker by
// (lib/peer's Watch), written once.
package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Timeout bounds each of a probe's dials, and then how long a
// connection it made is watched for a reset. A refusal comes at once; a
// dial still pending at the timeout proves nothing. Two seconds: a dial
// that lost its first SYN is answered by the retransmission a second
// later, and a busy host may run the prober late. An I/O deadline: wall
// time.
const Timeout = 2 * time.Second

// Gone dials addr, within Timeout and ctx, and reports whether the
// process that listened there is gone: the dial is refused (the host says
// nothing listens there) or reset, or it connects but the connection is
// reset or closed before the watch ends, or it stays quiet and a second
// dial is refused or reset. All but the first are a dying process: the
// kernel may release its connections (the one whose end started the
// probe) before its listener, and closing the listener resets the
// connections it had queued, a handshake under way included (the dial's
// reset). Seen too under load: a connection to a killed process's
// listener that stays quiet, as one to a live process's port does
// (Kafka's and mq's Raft port send nothing until the dialer speaks); the
// second dial, to a listener closed by then, tells them apart. A dial that times out or fails otherwise (a frozen process, a cut
// network, a vanished machine) is no proof.
func Gone(ctx context.Context, addr string) bool {
	gone, _ := probe(ctx, addr)
	return gone
}

// probe is Gone, with what the last dial or read ended with.
func probe(ctx context.Context, addr string) (bool, error) {
	conn, gone, err := dial(ctx, addr)
	if conn == nil {
		return gone, err
	}
	defer conn.Close()
	watch, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	stop := context.AfterFunc(watch, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	if _, err = conn.Read(b[:]); errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return true, err
	}
	if ctx.Err() != nil {
		return false, err
	}
	again, gone, err := dial(ctx, addr)
	if again != nil {
		again.Close()
	}
	return gone, err
}

// dial connects to addr within Timeout: the connection, or nil and
// whether the error proves nothing listens there (refused, or reset while
// connecting).
func dial(ctx context.Context, addr string) (net.Conn, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET), err
	}
	return conn, false, nil
}
