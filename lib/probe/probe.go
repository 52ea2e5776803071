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

// Timeout bounds a probe: its dial, and then how long a connection it
// made is watched for a reset. A refusal comes at once; a dial still
// pending at the timeout proves nothing. An I/O deadline: wall time.
const Timeout = time.Second

// Gone dials addr once, within Timeout and ctx, and reports whether the
// process that listened there is gone: the dial is refused (the host
// says nothing listens there), or it connects but the connection is
// reset or closed before the probe ends. The second case is a dying
// process: the kernel may release its connections (the one whose end
// started the probe) before its listener, and closing the listener then
// resets the connections it had not accepted. A live process's port
// (Kafka's, mq's Raft port) sends nothing until the dialer speaks, so
// its connection stays quiet, which is no proof. Neither is a dial that
// times out or fails otherwise (a frozen process, a cut network, a
// vanished machine).
func Gone(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	_, err = conn.Read(b[:])
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
