package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults for Config fields left zero.
const (
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms default.
	DefaultIdleTimeout = 10 * time.Minute
	// MaxInFlight is how many requests one connection may have read but not
	// yet answered; the reader stops reading until one is answered.
	MaxInFlight = 64
	// DefaultQueuedMaxRequestBytes is mq's queued.max.request.bytes
	// default (Kafka's is no bound): two frames of the largest default size
	// at once, with room to spare for ordinary requests, in memory a small
	// machine can give.
	DefaultQueuedMaxRequestBytes = 256 << 20
	// DefaultRequestBodyTimeout and DefaultMinRequestBodyRate let a 1 MiB
	// frame take 11 s to arrive and a 100 MiB one 110 s, longer than a
	// Kafka client waits for its request (request.timeout.ms, 30 s by
	// default, sending included).
	DefaultRequestBodyTimeout = 10 * time.Second
	DefaultMinRequestBodyRate = 1 << 20
)

// Errors returned by the server.
var (
	ErrAddressInUse = errors.New("server: address in use")
	ErrStarted      = errors.New("server: already started")
	ErrClosed       = errors.New("server: closed")
)

// Config configures a Server.
type Config struct {
	// Listeners are the addresses to listen on: "unix:///path/to/sock",
	// "tcp://host:port", "ssl://host:port" (TCP with TLS, Kafka's SSL
	// listener), "sasl_plaintext://host:port" (SASL authentication
	// without TLS) or "sasl_ssl://host:port" (SASL with TLS); port 0
	// picks a free port; see Server.Addrs.
	Listeners []string
	// TLS serves the ssl:// listeners; New refuses an ssl:// listener
	// without it.
	TLS *TLS
	// ExitFirst, when set, names by client id the connections that
	// should end first when the process dies: the other brokers'. Each
	// of them then holds a second descriptor numbered in the upper half
	// of the descriptor limit, which Linux 6 releases first when the
	// process dies (exitorder.go), so a broker tracking this one hears of
	// its death before a client of it can ask that broker for metadata.
	// Nil: connections end in the order of their descriptors.
	ExitFirst func(clientID string) bool
	// SASL serves the sasl_plaintext:// and sasl_ssl:// listeners (and
	// sasl_ssl:// needs TLS too); New refuses such a listener without it.
	// With SASL, the server answers SaslHandshake and SaslAuthenticate
	// itself and advertises them in ApiVersions.
	SASL *SASL
	// HandshakeTimeout bounds a TLS handshake, from the connection's
	// accept to its end; default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxRequestBytes is the largest request frame accepted, not counting
	// the 4-byte size prefix (socket.request.max.bytes). Default 100 MiB.
	MaxRequestBytes int32
	// QueuedMaxRequestBytes bounds the request bytes held in memory across
	// all connections: frames being read, and frames read whose response
	// has not been written yet (queued.max.request.bytes). A frame reserves
	// its size once its size prefix is read; when the budget is used up,
	// connections are not read (their peers' sends block: TCP back-pressure)
	// until responses give some back. It must be at least MaxRequestBytes.
	// Default 256 MiB; negative means no bound. Bytes a handler keeps after
	// its response (a request it does not Recycle) are not counted.
	QueuedMaxRequestBytes int64
	// RequestBodyTimeout and MinRequestBodyRate bound how slowly a frame
	// may arrive once its size prefix has been read and its bytes reserved:
	// byte n of the frame must arrive within RequestBodyTimeout plus
	// n/MinRequestBodyRate seconds, or the connection is closed. A peer that
	// announces a large frame and trickles it (slowloris) thus holds its
	// reservation for RequestBodyTimeout at no cost, and longer only by
	// sending at MinRequestBodyRate. Defaults 10 s and 1 MiB/s. (Kafka has
	// no such limit.)
	RequestBodyTimeout time.Duration
	MinRequestBodyRate int64
	// MaxConnections bounds the open connections of all listeners
	// together (max.connections); 0: no bound. MaxConnectionsPerIP bounds
	// the open TCP connections from one IP address
	// (max.connections.per.ip); 0: no bound, negative: none, so that only
	// the addresses of MaxConnectionsPerIPOverrides may connect, each up
	// to its own bound (max.connections.per.ip.overrides). Unix socket
	// connections count toward MaxConnections only. A connection over a
	// bound is closed as soon as it is accepted, before anything is read
	// from it.
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// IdleTimeout closes a connection that has sent nothing and has no
	// request outstanding for this long, and one whose peer accepts no
	// response bytes for this long (connections.max.idle.ms). Default 10 min.
	IdleTimeout time.Duration
	// Logger receives connection-level events; nil means silent.
	Logger *slog.Logger
	// Observer, when set, is told of every request once its response has
	// been written or dropped (metrics); nil costs nothing.
	Observer Observer
}

// Observer watches the requests a Server answers. Answered is called on
// connection goroutines, for different connections concurrently, once per
// request read: with the request's API key, the time from its frame being
// read to its response being written (or dropped on a broken
// connection), and the response, which it must not keep or modify (its
// Done hook has not run yet). It must be quick: it delays the
// connection's next response.
type Observer interface {
	Answered(key int16, elapsed time.Duration, resp Response)
}

// Server accepts connections on its listeners and moves Kafka frames between
// them and a Handler. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	api     *apiVersions
	budget  *budget // request bytes in memory, shared by every connection

	// ctx is the parent of every connection's context; cancel is called by
	// Close and when Shutdown gives up.
	ctx    context.Context
	cancel context.CancelFunc

	// draining is closed when Shutdown or Close begins: readers stop
	// reading new requests and accept loops stop.
	draining     chan struct{}
	drainingOnce sync.Once
	// done is closed once Shutdown or Close has finished.
	done     chan struct{}
	doneOnce sync.Once

	mu        sync.Mutex
	started   bool
	listeners []*listener
	conns     map[*conn]struct{}
	// peers holds, for each IP address with open TCP connections, their
	// count and their share of the budget.
	peers map[netip.Addr]*peer
	// refused counts the connections closed at accept, by limit.
	refusedTotal, refusedPerIP atomic.Uint64
	// refusedLog limits the log lines of refused connections.
	refusedLog logLimiter

	wg     sync.WaitGroup // accept loops and connection goroutines
	nextID atomic.Uint64
	// panics counts recovered panics; tests assert it stays zero.
	panics atomic.Int64
	// handshakeLog limits the log lines of failed TLS handshakes, authLog
	// those of refused SASL authentications.
	handshakeLog logLimiter
	authLog      logLimiter
	// authFailures counts the SASL authentications refused.
	authFailures atomic.Uint64
	// recycles says, per API key, whether the handler recycled (Request.Recycle)
	// the last request of that key: only then is the next one read into a
	// pooled buffer, so requests that are kept cost no more than their size.
	recycles [128]atomic.Bool
	// newRequest makes the empty request a frame of a key is decoded into.
	newRequest func(int16) kmsg.Request
}

// peer is the open TCP connections of one IP address.
type peer struct {
	conns int // guarded by Server.mu
	src   budgetSource
}

type listener struct {
	net.Listener
	network string // "tcp" or "unix"
	tls     bool   // an ssl:// or sasl_ssl:// listener: TCP with TLS
	sasl    bool   // a sasl_plaintext:// or sasl_ssl:// listener
	addr    string // as reported by Addrs
}

// New validates cfg and the handler's advertised API versions and returns an
// unstarted Server.
func New(cfg Config, h Handler) (*Server, error) {
	if h == nil {
		return nil, errors.New("server: nil handler")
	}
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("server: no listeners")
	}
	for _, l := range cfg.Listeners {
		network, _, err := parseListener(l)
		if err != nil {
			return nil, err
		}
		if (network == "ssl" || network == "sasl_ssl") && cfg.TLS == nil {
			return nil, fmt.Errorf("server: listener %q: no TLS certificate configured", l)
		}
		if (network == "sasl_plaintext" || network == "sasl_ssl") && cfg.SASL == nil {
			return nil, fmt.Errorf("server: listener %q: no SASL configured", l)
		}
	}
	if cfg.SASL != nil {
		sasl := *cfg.SASL
		if err := sasl.check(); err != nil {
			return nil, err
		}
		cfg.SASL = &sasl
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("server: negative HandshakeTimeout %v", cfg.HandshakeTimeout)
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxRequestBytes < minRequestHeader {
		return nil, fmt.Errorf("server: MaxRequestBytes %d below the minimum request size %d", cfg.MaxRequestBytes, minRequestHeader)
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.QueuedMaxRequestBytes > 0 && cfg.QueuedMaxRequestBytes < int64(cfg.MaxRequestBytes) {
		return nil, fmt.Errorf("server: QueuedMaxRequestBytes %d below MaxRequestBytes %d: a frame of the largest size could never be read",
			cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes)
	}
	if cfg.RequestBodyTimeout == 0 {
		cfg.RequestBodyTimeout = DefaultRequestBodyTimeout
	}
	if cfg.MinRequestBodyRate == 0 {
		cfg.MinRequestBodyRate = DefaultMinRequestBodyRate
	}
	if cfg.RequestBodyTimeout < 0 || cfg.MinRequestBodyRate < 0 {
		return nil, fmt.Errorf("server: negative RequestBodyTimeout %v or MinRequestBodyRate %d", cfg.RequestBodyTimeout, cfg.MinRequestBodyRate)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConnections < 0 {
		return nil, fmt.Errorf("server: negative MaxConnections %d", cfg.MaxConnections)
	}
	for a, n := range cfg.MaxConnectionsPerIPOverrides {
		if n < 0 || !a.IsValid() {
			return nil, fmt.Errorf("server: connection bound %d for %v", n, a)
		}
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("server: negative IdleTimeout %v", cfg.IdleTimeout)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	newRequest := requestMaker(h)
	var tags kmsg.Tags
	if t, ok := h.(ApiVersionsTagger); ok {
		tags = t.ApiVersionsTags()
	}
	var features Features
	if f, ok := h.(ApiVersionsFeaturer); ok {
		features = f.ApiVersionsFeatures()
	}
	list := h.ApiVersions()
	if cfg.SASL != nil {
		list = append(slices.Clone(list), saslAPIs...)
	}
	api, err := newAPIVersions(list, tags, features, newRequest)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:          cfg,
		handler:      h,
		newRequest:   newRequest,
		handshakeLog: logLimiter{interval: time.Second},
		authLog:      logLimiter{interval: time.Second},
		refusedLog:   logLimiter{interval: time.Second},
		peers:        make(map[netip.Addr]*peer),
		log:          logger,
		api:          api,
		budget:       newBudget(cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes),
		ctx:          ctx,
		cancel:       cancel,
		draining:     make(chan struct{}),
		done:         make(chan struct{}),
		conns:        make(map[*conn]struct{}),
	}, nil
}

// parseListener splits "unix:///path", "tcp://host:port", "ssl://host:port",
// "sasl_plaintext://host:port", "sasl_ssl://host:port" or "host:port"
// (TCP, the form lib/config also takes). The network of the TCP
// listeners other than tcp:// is their scheme.
func parseListener(s string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		addr = strings.TrimPrefix(s, "unix://")
		if addr == "" || !filepath.IsAbs(addr) {
			return "", "", fmt.Errorf("server: listener %q: unix socket path must be absolute", s)
		}
		return "unix", filepath.Clean(addr), nil
	case strings.HasPrefix(s, "tcp://"):
		addr = strings.TrimPrefix(s, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("server: listener %q: %w", s, err)
		}
		return "tcp", addr, nil
	case strings.HasPrefix(s, "ssl://"), strings.HasPrefix(s, "sasl_plaintext://"), strings.HasPrefix(s, "sasl_ssl://"):
		network, addr, _ = strings.Cut(s, "://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("server: listener %q: %w", s, err)
		}
		return network, addr, nil
	case !strings.Contains(s, "://"):
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", "", fmt.Errorf("server: listener %q: %w", s, err)
		}
		return "tcp", s, nil
	}
	return "", "", fmt.Errorf("server: listener %q: want unix:///path, tcp://host:port, ssl://host:port, sasl_plaintext://host:port, sasl_ssl://host:port or host:port", s)
}

// Start listens on every configured address and starts accepting; it returns
// once all listeners are open. If one fails, those already open are closed.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	select {
	case <-s.draining:
		return ErrClosed
	default:
	}
	var ls []*listener
	for _, spec := range s.cfg.Listeners {
		network, addr, _ := parseListener(spec)
		l, err := listen(network, addr)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("server: listen %s: %w", spec, err)
		}
		ls = append(ls, l)
	}
	s.started = true
	s.listeners = ls
	for _, l := range ls {
		s.log.Debug("listening", "addr", l.addr)
		s.wg.Add(1)
		go s.acceptLoop(l)
	}
	return nil
}

// Serve starts the server (see Start) and blocks until Shutdown or Close has
// finished. It returns nil after a shutdown, or the error that kept it from
// starting.
func (s *Server) Serve() error {
	if err := s.Start(); err != nil {
		return err
	}
	<-s.done
	return nil
}

// Connections returns the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ConnectionsAccepted returns the number of connections accepted since
// the Server was made (those closed at once over a limit are not).
func (s *Server) ConnectionsAccepted() uint64 { return s.nextID.Load() }

// AuthenticationFailures returns the number of SASL authentications
// refused since the Server was made (wrong password, unknown user,
// malformed exchange).
func (s *Server) AuthenticationFailures() uint64 { return s.authFailures.Load() }

// RequestBytes returns the request bytes reserved from the budget
// (Config.QueuedMaxRequestBytes) now, and those of frames waiting for
// room.
func (s *Server) RequestBytes() (reserved, waiting int64) {
	st := s.budget.stats()
	return st.used, st.waitingBytes
}

// ConnectionsRefused returns the number of connections closed as soon as
// they were accepted since the Server was made: over MaxConnections
// (total) and over the bound of their IP address (perIP).
func (s *Server) ConnectionsRefused() (total, perIP uint64) {
	return s.refusedTotal.Load(), s.refusedPerIP.Load()
}

// Addrs returns the addresses actually listened on, in Config order, in the
// Config syntax ("tcp://127.0.0.1:40123", "unix:///run/mq/mqd.sock"). It is
// empty before Start.
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := make([]string, len(s.listeners))
	for i, l := range s.listeners {
		addrs[i] = l.addr
	}
	return addrs
}

func listen(network, addr string) (*listener, error) {
	if network == "unix" {
		return listenUnix(addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	switch network {
	case "ssl":
		return &listener{Listener: l, network: "tcp", tls: true, addr: "ssl://" + l.Addr().String()}, nil
	case "sasl_plaintext":
		return &listener{Listener: l, network: "tcp", sasl: true, addr: "sasl_plaintext://" + l.Addr().String()}, nil
	case "sasl_ssl":
		return &listener{Listener: l, network: "tcp", tls: true, sasl: true, addr: "sasl_ssl://" + l.Addr().String()}, nil
	}
	return &listener{Listener: l, network: "tcp", addr: "tcp://" + l.Addr().String()}, nil
}

// UnsafeSocketDirError is the directory of a Unix socket listener that
// another user could replace the socket in: owned by another user than
// mqd's (or root), or writable by group or others. Start refuses it.
type UnsafeSocketDirError struct {
	Dir    string
	Reason string // "is owned by uid 1001", "is writable by others (mode 0777)"
}

func (e *UnsafeSocketDirError) Error() string {
	return fmt.Sprintf("socket directory %s %s: another user could replace the socket; remove it, or give it to mqd's user with mode 0700 or 0750", e.Dir, e.Reason)
}

// checkSocketDir refuses a socket directory another user could write
// in: it must be owned by this process's user or root, and writable by
// no one else.
func checkSocketDir(dir string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return &UnsafeSocketDirError{Dir: dir, Reason: "is not a directory"}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
			return &UnsafeSocketDirError{Dir: dir, Reason: fmt.Sprintf("is owned by uid %d, not mqd's (%d)", st.Uid, uid)}
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return &UnsafeSocketDirError{Dir: dir, Reason: fmt.Sprintf("is writable by group or others (mode %04o)", perm)}
	}
	return nil
}

// listenUnix creates the socket's directory (0700) if missing, refuses
// one another user could write in (UnsafeSocketDirError), replaces a
// stale socket file nobody answers on, and makes the socket 0660. The
// listener unlinks the file when closed.
func listenUnix(path string) (*listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if err := checkSocketDir(dir, fi); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, ErrAddressInUse
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	return &listener{Listener: l, network: "unix", addr: "unix://" + path}, nil
}

func (s *Server) acceptLoop(l *listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			select {
			case <-s.draining:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait and retry rather
			// than spin or give up on the listener.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "addr", l.addr, "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.draining:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		s.startConn(nc, l)
	}
}

// startConn starts the goroutines of a connection accepted on l. The TLS
// handshake of an ssl:// listener's connection is the reader's first
// work, so a slow or silent peer holds its own goroutine, never the
// accept loop.
func (s *Server) startConn(nc net.Conn, l *listener) {
	ip, tcp := remoteIP(nc)
	s.mu.Lock()
	select {
	case <-s.draining:
		s.mu.Unlock()
		nc.Close()
		return
	default:
	}
	if reason := s.overLimit(ip, tcp); reason != "" {
		s.mu.Unlock()
		nc.Close()
		s.logRefused(nc, reason)
		return
	}
	var src *budgetSource
	if tcp {
		p := s.peers[ip]
		if p == nil {
			p = &peer{}
			s.peers[ip] = p
		}
		p.conns++
		src = &p.src
	} else {
		src = &budgetSource{} // each Unix socket connection its own
	}
	var sock syscall.Conn
	if s.cfg.ExitFirst != nil {
		sock = socketOf(nc)
	}
	if l.tls {
		nc = tls.Server(nc, s.cfg.TLS.serverConfig())
	}
	c := newConn(s, nc, l, sock)
	c.src, c.ip, c.tcp = src, ip, tcp
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	s.log.Debug("connection opened", "conn", c.info.ID, "remote", c.info.Remote)
	go c.readLoop()
	go c.writeLoop()
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if p := s.peers[c.ip]; c.tcp && p != nil {
		if p.conns--; p.conns == 0 {
			delete(s.peers, c.ip)
		}
	}
	s.mu.Unlock()
}

// remoteIP is the peer's IP address of a TCP connection; tcp is false
// for a Unix socket connection.
func remoteIP(nc net.Conn) (ip netip.Addr, tcp bool) {
	a, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return a.AddrPort().Addr().Unmap(), true
}

// overLimit says which bound a new connection from ip (tcp) would go
// over: "max.connections", "max.connections.per.ip", or "" for none.
// s.mu is held.
func (s *Server) overLimit(ip netip.Addr, tcp bool) string {
	if m := s.cfg.MaxConnections; m > 0 && len(s.conns) >= m {
		s.refusedTotal.Add(1)
		return "max.connections"
	}
	if !tcp {
		return ""
	}
	bound, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]
	if !ok {
		bound = s.cfg.MaxConnectionsPerIP
		if bound == 0 {
			return ""
		}
		bound = max(bound, 0)
	}
	if p := s.peers[ip]; p != nil && p.conns >= bound || bound == 0 {
		s.refusedPerIP.Add(1)
		return "max.connections.per.ip"
	}
	return ""
}

// logRefused logs a connection closed over a limit, at most one line a
// second for the whole server (the line counts those held back): a flood
// of connections costs a line a second.
func (s *Server) logRefused(nc net.Conn, limit string) {
	ok, held := s.refusedLog.allow(time.Now())
	if !ok {
		return
	}
	args := []any{"remote", remoteString(nc.RemoteAddr(), "unix"), "limit", limit}
	if held > 0 {
		args = append(args, "more_refused_since_last_logged", held)
	}
	s.log.Warn("connection refused: too many connections; closed", args...)
}

// beginDrain stops accepting and tells every connection to stop reading
// after the request it is on. Returns the listeners' close error.
func (s *Server) beginDrain() error {
	var err error
	s.drainingOnce.Do(func() {
		s.mu.Lock()
		close(s.draining)
		for _, l := range s.listeners {
			if cerr := l.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
				err = errors.Join(err, cerr)
			}
		}
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.stopReading()
		}
	})
	return err
}

// Shutdown stops accepting connections, stops reading new requests, lets the
// requests already read finish and their responses be written, then closes
// the connections. If ctx ends first, the remaining connections are closed
// at once (their handler contexts cancelled) and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.beginDrain()
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		s.closeAll()
		err = errors.Join(err, ctx.Err())
	}
	s.cancel()
	s.doneOnce.Do(func() { close(s.done) })
	return err
}

// Close closes the listeners and every connection at once, cancelling the
// handler contexts. Replies still pending are called by the connections'
// writer goroutines as they wind down, but nothing more is written.
func (s *Server) Close() error {
	err := s.beginDrain()
	s.closeAll()
	s.doneOnce.Do(func() { close(s.done) })
	return err
}

func (s *Server) closeAll() {
	s.cancel()
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}
