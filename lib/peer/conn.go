package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponse bounds a response from another broker, so that a confused
// peer cannot make this one allocate without limit.
const maxResponse = 256 << 20

// Conn is a connection to another broker's Kafka listener, for the
// requests a broker sends itself (a follower's fetches, a share-state
// write, a scrape's lag lookup). It sends one request at a time and is
// not safe for concurrent use.
//
// Its input buffer is reused: a response decoded by Do refers into it
// (kmsg decodes byte fields as sub-slices), so the caller must be done
// with one response before the next Do.
type Conn struct {
	addr string
	conn net.Conn
	raw  net.Conn // the TCP connection under conn (conn itself without TLS)
	r    *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
	out  []byte
	in   []byte
}

// The client ids of the connections a broker makes to the others, each
// followed by its node id: its Pool's (replica fetches, forwarding) and
// its Watch's. The other broker's server ends these first when it dies
// (IsPeer, lib/server's Config.ExitFirst).
const (
	PoolClientID  = "mq-broker-"
	WatchClientID = "mq-watch-"
)

// IsPeer reports whether clientID is one a broker gives its connections
// to the others (PoolClientID, WatchClientID).
func IsPeer(clientID string) bool {
	return strings.HasPrefix(clientID, PoolClientID) || strings.HasPrefix(clientID, WatchClientID)
}

// Dial connects to a broker at addr (host:port); clientID names this
// node's part in the broker's logs (PoolClientID + "1").
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	return DialTLS(ctx, addr, clientID, nil)
}

// DialTLS is Dial to an ssl:// listener when cfg is not nil: the TLS
// handshake, bounded by ctx, completes before it returns.
func DialTLS(ctx context.Context, addr, clientID string, cfg *tls.Config) (*Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	raw := conn
	if cfg != nil {
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	return &Conn{
		addr: addr,
		conn: conn,
		raw:  raw,
		r:    bufio.NewReaderSize(conn, 64<<10),
		f:    kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
	}, nil
}

// ErrProtocol is a response that does not parse or does not answer the
// request sent: the connection is unusable.
var ErrProtocol = errors.New("peer: bad response")

// Do sends req and decodes its response. The whole exchange is bounded by
// timeout and by ctx; on any error the connection must be closed.
func (c *Conn) Do(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	c.out = c.f.AppendRequest(c.out[:0], req, c.corr)
	if _, err := c.conn.Write(c.out); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > maxResponse {
		return nil, fmt.Errorf("%w: response of %d bytes", ErrProtocol, n)
	}
	if cap(c.in) < n {
		c.in = make([]byte, n)
	}
	body := c.in[:n]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("%w: correlation id %d, sent %d", ErrProtocol, corr, c.corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return resp, nil
}

// ctxErr prefers ctx's error to the I/O error its cancellation caused.
// AwaitEnd waits, with no request outstanding, until the connection
// ends (its error: EOF, a reset) or d has passed (nil). Bytes the broker
// sends unasked are ErrProtocol.
func (c *Conn) AwaitEnd(d time.Duration) error {
	if err := c.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	_, err := c.r.Peek(1)
	var ne net.Error
	switch {
	case err == nil:
		return fmt.Errorf("%w: bytes sent unasked", ErrProtocol)
	case errors.As(err, &ne) && ne.Timeout():
		return nil
	}
	return err
}

// HungUp reports whether the broker closed or reset the connection, as
// the kernel knows it now, without reading: true before a goroutine
// blocked in AwaitEnd has been scheduled to see it (hungUp). It looks
// at the TCP connection, under TLS too.
func (c *Conn) HungUp() bool {
	sc, ok := c.raw.(syscall.Conn)
	return ok && hungUp(sc)
}

// Interrupt makes a Do or AwaitEnd in progress return at once; the
// connection is unusable after it. Safe to call from another goroutine.
func (c *Conn) Interrupt() { c.conn.SetDeadline(time.Unix(1, 0)) }

func (c *Conn) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// skipTags skips the tagged fields of a flexible response header.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("%w: response header tags", ErrProtocol)
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b) // tag
		if k <= 0 {
			return nil, fmt.Errorf("%w: response header tag", ErrProtocol)
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, fmt.Errorf("%w: response header tag size", ErrProtocol)
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// Addr is the address the connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }
