package controller

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/mqproject/mq/lib/clock"
)

// The first byte a dialer writes on a connection to a node's Raft port
// says what the connection carries.
const (
	// connRaft is hashicorp/raft's NetworkTransport. The kind byte is
	// followed by the dialer's voter set (a big-endian uint16 length, then
	// the set as the voters' ID@addr strings joined by commas): Raft's own
	// RPCs name no cluster, so without it a node of another cluster that
	// reached this port (a stale address, a reused port) would have its
	// log replicated here.
	connRaft byte = 'V'
	// connRaftCluster is connRaft whose voter set is followed by the
	// dialer's cluster ID (one byte of length, then the ID; empty before
	// its image has one): a node of another cluster that has the same
	// voter list (the same addresses reused) is refused too. Nodes dial
	// with it; connRaft is still accepted.
	connRaftCluster byte = 'C'
	// connRaftUnchecked is a Raft connection without a voter set: it is
	// refused, with a log line saying why.
	connRaftUnchecked byte = 'R'
	connRPC           byte = 'M' // the controller RPCs (rpc.go)
)

// handshakeTimeout bounds how long an accepted connection may take to
// send its greeting (its kind, and a Raft connection's voter set; with
// TLS, the handshake too). It is a read deadline, so wall time.
const handshakeTimeout = 10 * time.Second

// raftIdleTimeout bounds how long a Raft connection accepted here may
// send nothing before it is closed (a read deadline renewed by every
// read: wall time). hashicorp/raft sets no deadline on the connections
// it serves; the dialer redials one closed for it.
const raftIdleTimeout = 2 * time.Minute

// maxGreeting is how many accepted connections may be sending their
// greeting at once; more are closed as they are accepted, so silent
// connections cannot exhaust the node's descriptors for longer than
// handshakeTimeout.
const maxGreeting = 128

// mux is the raft.StreamLayer of a node: one TCP listener whose
// connections are Raft's ('V') or the controller RPCs' ('M'). Raft takes
// its connections with Accept; RPC connections go to serveRPC.
// All methods are safe for concurrent use.
type mux struct {
	ln        net.Listener
	advertise addr
	// voters is this node's voter set as a Raft connection carries it:
	// a connection carrying another is refused.
	voters string
	logger *slog.Logger
	// serveRPC serves an RPC connection; principal is the peer's
	// certificate principal (CertPrincipal), empty without TLS.
	serveRPC func(conn net.Conn, principal string)
	// tls, when set, makes every connection mutual TLS: the handshake,
	// with a certificate of the cluster CA required, comes before any
	// byte is routed. Nil: plain TCP.
	tls *TLS
	// refusals rate-limits the log lines of refused handshakes.
	refusals logLimiter
	// clusterID is this node's cluster ID ("" before its image has one),
	// which its Raft connections carry and check.
	clusterID func() string
	// clock times the pause after a failed Accept.
	clock clock.Clock

	raftConns chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open RPC connections, closed by Close

	// greeting counts the accepted connections whose greeting is not
	// read yet (at most maxGreeting).
	greeting atomic.Int32

	// rpcAccepted counts the RPC connections accepted.
	rpcAccepted atomic.Uint64

	// limits bound what a Raft connection served here may send.
	limits raftLimits
}

// raftLimits bound the Raft connections a node serves: the largest
// message (raftMaxMessage when zero) and how long one may send nothing
// (raftIdleTimeout when zero).
type raftLimits struct {
	maxMessage int64
	idle       time.Duration
}

var _ raft.StreamLayer = (*mux)(nil)

// addr is a net.Addr holding an address as configured (a host name stays
// a host name), so Raft advertises exactly the --voters entry.
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// listenMux listens on bind and routes connections; advertise is the
// address the other nodes dial, voters the voter set (ID@addr strings
// sorted by ID) that Raft connections must carry both ways, clk the
// controller's clock.
func listenMux(bind, advertise string, voters []string, serveRPC func(net.Conn, string), tlsID *TLS, clusterID func() string, clk clock.Clock, logger *slog.Logger, limits raftLimits) (*mux, error) {
	if clusterID == nil {
		clusterID = func() string { return "" }
	}
	if limits.maxMessage <= 0 {
		limits.maxMessage = raftMaxMessage
	}
	if limits.idle <= 0 {
		limits.idle = raftIdleTimeout
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("controller: raft listener on %s: %w", bind, err)
	}
	m := &mux{
		ln:        ln,
		advertise: addr(advertise),
		voters:    strings.Join(voters, ","),
		logger:    logger,
		serveRPC:  serveRPC,
		tls:       tlsID,
		clusterID: clusterID,
		clock:     clk,
		raftConns: make(chan net.Conn),
		done:      make(chan struct{}),
		conns:     map[net.Conn]struct{}{},
		limits:    limits,
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.logger.Warn("controller: accept on raft listener", "err", err)
			pause := m.clock.NewTimer(50 * time.Millisecond)
			select {
			case <-m.done:
				pause.Stop()
				return
			case <-pause.C():
			}
			continue
		}
		if m.greeting.Add(1) > maxGreeting {
			m.greeting.Add(-1)
			m.logger.Debug("controller: too many connections greeting at once, closing one", "remote", conn.RemoteAddr())
			conn.Close()
			continue
		}
		if !m.track(conn) {
			m.greeting.Add(-1)
			conn.Close()
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(conn)
		}()
	}
}

// track records an open connection so that Close can close it; false
// once the mux is closed.
func (m *mux) track(conn net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[conn] = struct{}{}
	return true
}

func (m *mux) untrack(conn net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, conn)
}

// route reads the greeting of raw and hands the connection on; with
// TLS, after a handshake that proved the peer holds a certificate of
// the cluster CA.
func (m *mux) route(raw net.Conn) {
	greeted := false
	greet := func() {
		if !greeted {
			greeted = true
			m.greeting.Add(-1)
		}
	}
	defer greet()
	conn := raw
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	principal := ""
	if m.tls != nil {
		tc := tls.Server(raw, m.tls.ServerConfig())
		if err := tc.Handshake(); err != nil {
			if ok, held := m.refusals.allow(time.Now()); ok {
				m.logger.Warn("controller: refusing a connection that did not authenticate as a node of this cluster",
					"remote", raw.RemoteAddr(), "err", err, "refused_since_last_line", held)
			}
			m.untrack(raw)
			raw.Close()
			return
		}
		st := tc.ConnectionState()
		principal = CertPrincipal(&st)
		conn = tc
	}
	raw.SetWriteDeadline(time.Time{})
	var kind [1]byte
	if _, err := io.ReadFull(conn, kind[:]); err != nil {
		m.untrack(raw)
		conn.Close()
		return
	}
	switch kind[0] {
	case connRaft, connRaftCluster:
		theirs, err := readVoters(conn)
		cluster := ""
		if err == nil && kind[0] == connRaftCluster {
			cluster, err = readClusterID(conn)
		}
		greet()
		if ours := m.clusterID(); err == nil && cluster != "" && ours != "" && cluster != ours {
			m.logger.Warn("controller: refusing a raft connection from a node of another cluster", "remote", conn.RemoteAddr(), "its_cluster_id", cluster)
			m.untrack(raw)
			conn.Close()
			return
		}
		if err != nil || theirs != m.voters {
			m.logger.Warn("controller: refusing a raft connection from a node whose voters differ", "remote", conn.RemoteAddr(), "its_voters", theirs, "voters", m.voters, "err", err)
			m.untrack(raw)
			conn.Close()
			return
		}
		// Raft owns the connection from here; it closes it itself.
		m.untrack(raw)
		select {
		case m.raftConns <- &raftServedConn{Conn: conn, idle: m.limits.idle, frames: newRaftFrames(m.limits.maxMessage), logger: m.logger}:
		case <-m.done:
			conn.Close()
		}
	case connRaftUnchecked:
		m.logger.Warn("controller: refusing a raft connection from a build without the voter-set check: upgrade every node", "remote", conn.RemoteAddr())
		m.untrack(raw)
		conn.Close()
	case connRPC:
		m.rpcAccepted.Add(1)
		greet()
		m.serveRPC(conn, principal)
		m.untrack(raw)
		conn.Close()
	default:
		m.logger.Debug("controller: refusing connection of unknown kind", "remote", conn.RemoteAddr(), "kind", kind[0])
		m.untrack(raw)
		conn.Close()
	}
}

// Accept implements net.Listener for Raft: its connections only.
func (m *mux) Accept() (net.Conn, error) {
	select {
	case conn := <-m.raftConns:
		return conn, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops the listener and closes every open RPC connection. Raft's
// own connections are closed by Raft.
func (m *mux) Close() error {
	m.closeOnce.Do(func() {
		close(m.done)
		m.ln.Close()
		m.mu.Lock()
		for conn := range m.conns {
			conn.Close()
		}
		m.conns = nil
		m.mu.Unlock()
		m.wg.Wait()
	})
	return nil
}

// Addr is the advertised address.
func (m *mux) Addr() net.Addr { return m.advertise }

// Dial implements raft.StreamLayer: a Raft connection to address. Raft's
// timeout bounds the dial and the greeting on wall time, as I/O deadlines.
func (m *mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := dialKind(ctx, string(address), connRaftCluster, m.voters+"\x00"+m.clusterID(), m.tls)
	if err != nil {
		return nil, err
	}
	return &raftDialedConn{Conn: conn, frames: newRaftResponseFrames(raftMaxResponse), logger: m.logger}, nil
}

// readClusterID reads the cluster ID a connRaftCluster dialer sent.
func readClusterID(conn net.Conn) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return "", fmt.Errorf("read cluster id: %w", err)
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(conn, b); err != nil {
		return "", fmt.Errorf("read cluster id: %w", err)
	}
	return string(b), nil
}

// readVoters reads the voter set a Raft connection's dialer sent.
func readVoters(conn net.Conn) (string, error) {
	var n [2]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return "", fmt.Errorf("read voters: %w", err)
	}
	size := int(binary.BigEndian.Uint16(n[:]))
	b := make([]byte, size)
	if _, err := io.ReadFull(conn, b); err != nil {
		return "", fmt.Errorf("read voters: %w", err)
	}
	return string(b), nil
}

// dialKind connects to a node's Raft port for connections of kind; a Raft
// connection carries voters after its kind, and a connRaftCluster one
// the cluster ID after them (voters is then "VOTERS\x00CLUSTERID"). With tlsID the connection is
// mutual TLS: the handshake, presenting this node's certificate and
// checking the other's against the cluster CA, comes first.
func dialKind(ctx context.Context, address string, kind byte, voters string, tlsID *TLS) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if tlsID != nil {
		tc := tls.Client(conn, tlsID.ClientConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("controller: TLS handshake with %s: %w", address, err)
		}
		conn = tc
	}
	greeting := []byte{kind}
	if kind == connRaft || kind == connRaftCluster {
		voters, cluster, _ := strings.Cut(voters, "\x00")
		if len(voters) > math.MaxUint16 || len(cluster) > math.MaxUint8 {
			conn.Close()
			return nil, fmt.Errorf("controller: voter set of %d bytes or cluster id of %d is too long", len(voters), len(cluster))
		}
		greeting = binary.BigEndian.AppendUint16(greeting, uint16(len(voters)))
		greeting = append(greeting, voters...)
		if kind == connRaftCluster {
			greeting = append(greeting, byte(len(cluster)))
			greeting = append(greeting, cluster...)
		}
	}
	if _, err := conn.Write(greeting); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// logLimiter lets one log line through per second and counts the lines
// it held back, so that a flood of refused handshakes costs a line a
// second. Safe for concurrent use.
type logLimiter struct {
	mu   sync.Mutex
	last time.Time
	held int
}

func (l *logLimiter) allow(now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) < time.Second {
		l.held++
		return false, 0
	}
	held, l.last, l.held = l.held, now, 0
	return true, held
}
