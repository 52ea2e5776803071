package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/auth"
)

// minRequestHeader is the smallest possible request: api key, api version,
// correlation id and the client id's length.
const minRequestHeader = 2 + 2 + 4 + 2

// errStop ends a connection's reader after the reason has been logged.
var errStop = errors.New("server: connection stopped")

// errDraining ends a reader because the server is shutting down gracefully.
var errDraining = errors.New("server: draining")

// conn is one client connection: a reader goroutine (readLoop) that decodes
// requests and calls Handle, and a writer goroutine (writeLoop) that calls the
// Replies and writes the responses, joined by an ordered queue.
type conn struct {
	s    *Server
	nc   net.Conn
	info ConnInfo
	log  *slog.Logger

	// ctx is passed to Handle; cancelled when the connection closes.
	ctx    context.Context
	cancel context.CancelFunc

	// slots holds one token per request read and not yet answered; the
	// reader takes one before reading a frame, the writer returns it after
	// writing the response, so at most MaxInFlight requests are in flight.
	slots chan struct{}
	// queue carries requests from reader to writer, in request order. It
	// never blocks: slots bounds its length.
	queue chan pending
	// queued counts the requests handed to the writer and not yet done
	// with (written or dropped). The reader writes a ready response itself
	// only when it is zero: then nothing is ahead of it and the writer is
	// idle, so the writer-owned fields below are free.
	queued atomic.Int32

	closeOnce sync.Once

	// sock is the accepted socket (under TLS), for sortForExit. late is
	// the duplicate of it a peer's connection holds (exitorder.go) and
	// closed whether close ran, under lateMu; exitSorted is the
	// reader's, set once ExitFirst was asked.
	sock       syscall.Conn
	lateMu     sync.Mutex
	late       lateRef
	closed     bool
	exitSorted bool

	// Set once before the goroutines start: the budget share the
	// connection's frames count toward, and its peer's IP address (tcp
	// false: a Unix socket connection).
	src *budgetSource
	ip  netip.Addr
	tcp bool

	// Reader-owned. br batches socket reads: a frame's size and body, and
	// the frames a client pipelines, arrive with one read system call.
	br       *bufio.Reader
	sizeBuf  [4]byte
	clientID *string // last client id seen, reused while it does not change
	// tls and saslListener say what the connection's listener is;
	// saslPending is true on a SASL listener until SaslAuthenticate
	// succeeds, and session is the SASL exchange under way.
	tls, saslListener bool
	saslPending       bool
	session           *auth.Session

	// Writer-owned, and the reader's while queued is zero.
	vec [][]byte
}

// pending is a request waiting for its response.
type pending struct {
	correlationID int32
	key, version  int16
	reply         Reply
	// fixed, used when reply is nil, is a response the server made itself
	// (ApiVersions).
	fixed Response
	// frame is the request's buffer and req the Request (and its Body),
	// returned to their pools once the response is done with (nil: not
	// recycled).
	frame *[]byte
	req   *Request
	// charge is what the frame holds of the server's budget.
	charge int64
	// start is when the request's frame had been read (set only when the
	// server has an Observer).
	start time.Time
}

// finish releases what a pending holds once its response has been written
// or dropped: the response's resources (Done), the request's frame and
// the Request, and the frame's share of the budget.
func (c *conn) finish(p *pending, resp Response) {
	if o := c.s.cfg.Observer; o != nil {
		o.Answered(p.key, time.Since(p.start), resp)
	}
	resp.done()
	if p.frame != nil {
		putFrame(p.frame)
		p.frame = nil
	}
	if p.req != nil {
		putBody(p.req.Body)
		*p.req = Request{}
		requestPool.Put(p.req)
		p.req = nil
	}
	c.s.budget.release(p.charge, c.src)
	p.charge = 0
}

// requestPool holds the Requests of recycled requests (Request.Recycle).
var requestPool = sync.Pool{New: func() any { return new(Request) }}

func newConn(s *Server, nc net.Conn, l *listener, sock syscall.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	network := l.network
	c := &conn{
		s:    s,
		nc:   nc,
		late: noLate,
		sock: sock,
		info: ConnInfo{
			ID:       s.nextID.Add(1),
			Network:  network,
			Local:    nc.LocalAddr(),
			Remote:   nc.RemoteAddr(),
			Listener: l.addr,
		},
		ctx:    ctx,
		cancel: cancel,
		br:     bufio.NewReaderSize(nc, readBufferSize),
		slots:  make(chan struct{}, MaxInFlight),
		queue:  make(chan pending, MaxInFlight),

		tls:          l.tls,
		saslListener: l.sasl,
		saslPending:  l.sasl,
	}
	if network == "unix" {
		// Read once: the kernel recorded the peer's uid when it
		// connected, and no request can change it.
		if uid, ok := peerUID(nc); ok {
			c.info.Principal = auth.UnixUser(uid)
		}
	}
	c.log = s.log.With("conn", c.info.ID, "remote", remoteString(c.info.Remote, network))
	return c
}

func remoteString(a net.Addr, network string) string {
	if a == nil || a.String() == "" {
		return network
	}
	return a.String()
}

// close closes the socket and cancels the handler context. Safe to call
// from any goroutine, any number of times.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.nc.Close()
		c.lateMu.Lock()
		c.closed = true
		late := c.late
		c.late = noLate
		c.lateMu.Unlock()
		closeLate(late)
		c.cancel()
	})
}

// stopReading interrupts a reader waiting for the next frame; it sees the
// server draining and stops. The writer then answers what was read.
func (c *conn) stopReading() {
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) recovered(where string, r any) {
	c.s.panics.Add(1)
	c.log.Error("panic on connection; closing it", "in", where, "panic", r, "stack", string(debug.Stack()))
	c.close()
}

func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.queue)
	defer func() {
		if r := recover(); r != nil {
			c.recovered("reader", r)
		}
	}()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc) {
		c.close()
		return
	}
	for {
		select {
		case c.slots <- struct{}{}:
		case <-c.ctx.Done():
			return
		case <-c.s.draining:
			return
		}
		p, err := c.readRequest()
		if err != nil {
			<-c.slots
			if err != errDraining {
				if err != errStop {
					c.logReadError(err)
				}
				c.close()
			}
			return
		}
		if p.reply == nil && c.queued.Load() == 0 {
			if !c.writeNow(&p) {
				return
			}
			continue
		}
		c.queued.Add(1)
		c.queue <- p
	}
}

// handshake runs the TLS handshake of a connection on an ssl:// listener,
// within Config.HandshakeTimeout, and records its state and principal in
// the ConnInfo before the first request is read. A failed handshake (a
// plaintext client, a client certificate that does not verify, a peer
// that stays silent) is logged, at most one line a second for the whole
// server, and ends the connection.
func (c *conn) handshake(tc *tls.Conn) bool {
	c.nc.SetDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	// Checked after setting the deadline, as readSize does: a drain that
	// began before has its past deadline overwritten.
	select {
	case <-c.s.draining:
		return false
	default:
	}
	err := tc.HandshakeContext(c.ctx)
	if err != nil {
		select {
		case <-c.s.draining:
			return false // cut short by the shutdown: not the peer's failure
		default:
		}
		if errors.Is(err, io.EOF) {
			// Connected and closed without a word: a port check.
			c.log.Debug("connection closed before its TLS handshake")
			return false
		}
		if ok, held := c.s.handshakeLog.allow(time.Now()); ok {
			args := []any{"err", err}
			if held > 0 {
				args = append(args, "more_failed_since_last_logged", held)
			}
			c.log.Info("TLS handshake failed; closing connection", args...)
		}
		return false
	}
	c.nc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	c.info.TLS = &st
	c.info.Principal = Principal(&st)
	if c.info.Principal != "" {
		c.log.Debug("TLS client authenticated", "principal", c.info.Principal)
	}
	return true
}

// writeNow writes a response that was complete when its request was
// handled (p.fixed) from the reader goroutine, the writer being idle and
// nothing queued ahead of it. It reports whether the reader may go on.
func (c *conn) writeNow(p *pending) bool {
	defer func() { <-c.slots }()
	resp := p.fixed
	defer c.finish(p, resp)
	if c.ctx.Err() != nil {
		return false
	}
	if err := c.writeResponse(p, resp); err != nil {
		if !errors.Is(err, net.ErrClosed) {
			c.log.Info("write failed; closing connection", "api", kmsg.NameForKey(p.key), "err", err)
		}
		c.close()
		return false
	}
	if resp.CloseAfter {
		c.close()
		return false
	}
	return true
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF):
		c.log.Debug("connection closed by peer")
	case errors.Is(err, net.ErrClosed):
		// Closed by us: the writer failed or the server is closing.
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Info("connection closed in the middle of a request")
	default:
		c.log.Info("read failed; closing connection", "err", err)
	}
}

// readSize reads the next frame's size prefix. An idle timeout at a frame
// boundary is forgiven while responses are outstanding (a long poll is not
// idleness); a shutdown interrupts it with errDraining.
func (c *conn) readSize() error {
	for {
		if c.br.Buffered() >= len(c.sizeBuf) {
			// The size is here already (pipelined requests): no wait, so
			// no deadline to arm.
			select {
			case <-c.s.draining:
				return errDraining
			default:
			}
			_, err := io.ReadFull(c.br, c.sizeBuf[:])
			return err
		}
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		// Checked after setting the deadline: stopReading sets a past
		// deadline after draining is closed, so either we see draining
		// here or our deadline is overwritten and the read returns.
		select {
		case <-c.s.draining:
			return errDraining
		default:
		}
		n, err := io.ReadFull(c.br, c.sizeBuf[:])
		if err == nil {
			return nil
		}
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			select {
			case <-c.s.draining:
				return errDraining
			default:
			}
			if len(c.slots) > 1 { // our own slot is one of them
				continue
			}
			c.log.Info("closing idle connection", "idle_timeout", c.s.cfg.IdleTimeout)
			return errStop
		}
		if n > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
}

// readRequest reads, decodes and dispatches one request. Errors other than
// I/O errors are logged here and returned as errStop.
func (c *conn) readRequest() (_ pending, err error) {
	if err := c.readSize(); err != nil {
		return pending{}, err
	}
	size := int32(binary.BigEndian.Uint32(c.sizeBuf[:]))
	if c.saslPending && size > c.s.cfg.SASL.MaxReceiveSize {
		// Before the body is read or reserved: a stranger gets no memory.
		c.logAuth("request frame before SASL authentication above sasl.server.max.receive.size; closing connection",
			"size", size, "max", c.s.cfg.SASL.MaxReceiveSize)
		return pending{}, errStop
	}
	if size < minRequestHeader || size > c.s.cfg.MaxRequestBytes {
		c.log.Warn("request frame size out of range; closing connection",
			"size", size, "min", minRequestHeader, "max", c.s.cfg.MaxRequestBytes)
		return pending{}, errStop
	}
	// Nothing is allocated for the frame before its bytes are reserved;
	// while there is no room, the connection is not read.
	charge := frameCost(int(size))
	if !c.s.budget.acquire(charge, c.src, c.ctx.Done(), c.s.draining) {
		select {
		case <-c.s.draining:
			return pending{}, errDraining
		default:
			return pending{}, errStop // closed meanwhile
		}
	}
	defer func() {
		if err != nil {
			c.s.budget.release(charge, c.src)
		}
	}()
	fp, pooled, err := c.readFrame(int(size))
	if err != nil {
		putFrame(fp)
		if err == errBodyTooSlow {
			c.log.Info("request frame arriving too slowly; closing connection", "size", size,
				"body_timeout", c.s.cfg.RequestBodyTimeout, "min_body_rate", c.s.cfg.MinRequestBodyRate)
			return pending{}, errStop
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return pending{}, err
	}
	frame := *fp
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	p := pending{
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
		key:           key,
		version:       version,
		charge:        charge,
	}
	if c.s.cfg.Observer != nil {
		p.start = time.Now()
	}
	if c.saslPending && key != apiVersionsKey && key != saslHandshakeKey && key != saslAuthenticateKey {
		// Kafka's answer too: nothing but ApiVersions and SASL before
		// authentication, and no response to the rest.
		c.logAuth("request before SASL authentication; closing connection", "api", kmsg.NameForKey(key))
		return pending{}, errStop
	}
	if key == apiVersionsKey && !c.s.api.supports(key, version) {
		// A version we do not know: its header and body may be laid out
		// in ways we cannot parse, so answer from the fixed part alone.
		p.fixed = c.s.api.unsupported
		return p, nil
	}
	if !c.s.api.supports(key, version) {
		// Produce below the served minimum comes here too, though
		// advertised (produceAdvertisedMin), as in Kafka 4.
		c.log.Warn("unsupported request; closing connection",
			"api_key", key, "api", kmsg.NameForKey(key), "api_version", version)
		return pending{}, errStop
	}
	// A pooled frame means the handler recycled the last request of this
	// key, and will likely recycle this one: its body may come from a pool
	// and keep its strings in the frame. Should the handler keep this
	// request after all, the frame is not reused, so they stay valid.
	body := newBody(key, version, pooled, c.s.newRequest)
	clientID, rest, err := c.parseHeader(frame[8:], key, version, body.IsFlexible())
	if err == nil {
		err = decodeBody(body, rest, pooled)
	}
	if err != nil {
		c.log.Warn("malformed request; closing connection",
			"api", kmsg.NameForKey(key), "api_version", version, "size", size, "err", err)
		return pending{}, errStop
	}
	if key == apiVersionsKey {
		p.fixed = c.s.api.response(version)
		return p, nil
	}
	if c.s.cfg.SASL != nil && (key == saslHandshakeKey || key == saslAuthenticateKey) {
		p.fixed = c.saslRequest(body)
		return p, nil
	}
	req := requestPool.Get().(*Request)
	*req = Request{
		Key:           key,
		Version:       version,
		CorrelationID: p.correlationID,
		ClientID:      clientID,
		Body:          body,
	}
	p.reply = c.handle(req)
	if p.reply != nil && req.readySet {
		p.reply, p.fixed = nil, req.ready
	}
	if req.recycle {
		p.frame, p.req = fp, req
	}
	if key >= 0 && int(key) < len(c.s.recycles) && c.s.recycles[key].Load() != req.recycle {
		c.s.recycles[key].Store(req.recycle)
	}
	return p, nil
}

// readBufferSize is the size of a connection's read buffer. Frames larger
// than what is buffered are read straight into their own buffer.
const readBufferSize = 16 << 10

// Frames of up to maxPooledFrame bytes are read into reused buffers: the
// small ones (up to smallFrame, which the budget calls small) from pools
// by power-of-two class from 1 KiB, the large ones from a cache of at most
// largeFrameCache bytes, by whole MiB. A client that sends produce
// requests of several MiB (a batch for each of thousands of partitions)
// then allocates nothing per request; when each was allocated, the
// garbage collections it caused, each scanning the state of 10,000
// partitions, were a quarter of mqd's CPU. The cache is bounded, unlike a
// sync.Pool between collections, so that the memory it keeps is small
// beside queued.max.request.bytes.
const (
	smallFrame      = 1 << 20
	maxPooledFrame  = 32 << 20
	largeFrameCache = 16 << 20
)

// errBodyTooSlow means a frame's bytes did not arrive in time (see
// Config.RequestBodyTimeout).
var errBodyTooSlow = errors.New("server: request body arriving too slowly")

// readFrame reads the frame of size bytes whose size prefix was just read
// and whose bytes are reserved. It is read into a pooled buffer when the
// handler recycled the last request of its API key (kmsg's decoded byte
// fields alias the frame, and handlers may keep them, so a frame goes back
// to the pool only when its handler says so: Request.Recycle) and the
// frame is small, else into a buffer of its exact size, allocated once.
// While the frame has to be waited for, the read deadline keeps to the
// schedule of Config.RequestBodyTimeout.
func (c *conn) readFrame(size int) (_ *[]byte, pooled bool, err error) {
	if c.br.Buffered() >= size {
		// All here (pipelined requests): no wait, no deadline.
		pooled = c.recycled(c.br.Peek(2))
		bp := c.newFrame(size, pooled)
		_, err := io.ReadFull(c.br, *bp)
		return bp, pooled, err
	}
	start := time.Now()
	if c.br.Buffered() < 2 {
		if err := c.bodyDeadline(start, 0); err != nil {
			return nil, false, err
		}
	}
	hdr, err := c.br.Peek(2)
	if err != nil {
		return nil, false, c.bodyError(err)
	}
	pooled = c.recycled(hdr, nil)
	bp := c.newFrame(size, pooled)
	buf := *bp
	for n := 0; n < len(buf); {
		if c.br.Buffered() == 0 {
			if err := c.bodyDeadline(start, n); err != nil {
				return bp, pooled, err
			}
		}
		m, err := c.br.Read(buf[n:])
		n += m
		if err != nil && n < len(buf) {
			return bp, pooled, c.bodyError(err)
		}
	}
	return bp, pooled, nil
}

// recycled reports whether the handler recycled the last request of the
// API key that hdr (a frame's first bytes, from Peek) starts with.
func (c *conn) recycled(hdr []byte, err error) bool {
	if err != nil || len(hdr) < 2 {
		return false
	}
	k := binary.BigEndian.Uint16(hdr)
	return int(k) < len(c.s.recycles) && c.s.recycles[k].Load()
}

// newFrame returns a buffer for a frame of size bytes: pooled when asked
// and small, else its own.
func (c *conn) newFrame(size int, pooled bool) *[]byte {
	if pooled && size <= maxPooledFrame {
		return getFrame(size)
	}
	b := make([]byte, size)
	return &b
}

// bodyDeadline arms the read deadline for byte n of a frame begun at
// start: RequestBodyTimeout, plus the time n bytes take at
// MinRequestBodyRate. A shutdown that began meanwhile returns errDraining
// (stopReading's deadline may have been overwritten).
func (c *conn) bodyDeadline(start time.Time, n int) error {
	allowed := c.s.cfg.RequestBodyTimeout + time.Duration(int64(n)*int64(time.Second)/c.s.cfg.MinRequestBodyRate)
	c.nc.SetReadDeadline(start.Add(allowed))
	select {
	case <-c.s.draining:
		return errDraining
	default:
		return nil
	}
}

// bodyError turns a timeout while reading a frame into errBodyTooSlow,
// unless the server is draining (stopReading's deadline).
func (c *conn) bodyError(err error) error {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	select {
	case <-c.s.draining:
		return errDraining
	default:
		return errBodyTooSlow
	}
}

// framePools hold small request buffers by capacity class: 1 KiB << i, up
// to smallFrame.
var framePools [framePoolClasses]sync.Pool

const framePoolClasses = 11 // 1 KiB … 1 MiB

// largeFrames is the cache of large request buffers, by capacity: free[i]
// holds buffers of i+1 MiB, bytes their total (at most largeFrameCache).
// A buffer given back to a full cache evicts buffers of other sizes.
var largeFrames struct {
	mu    sync.Mutex
	free  [maxPooledFrame >> 20][]*[]byte
	bytes int
}

// frameClass is the smallest small class holding size bytes, or -1 when
// none.
func frameClass(size int) int {
	for i := range framePoolClasses {
		if size <= 1<<(10+i) {
			return i
		}
	}
	return -1
}

// getFrame returns a reused buffer of len size, or a new one of its class's
// capacity; size <= maxPooledFrame.
func getFrame(size int) *[]byte {
	if i := frameClass(size); i >= 0 {
		if bp, ok := framePools[i].Get().(*[]byte); ok {
			*bp = (*bp)[:size]
			return bp
		}
		b := make([]byte, size, 1<<(10+i))
		return &b
	}
	mib := (size + 1<<20 - 1) >> 20
	lf := &largeFrames
	lf.mu.Lock()
	if free := lf.free[mib-1]; len(free) > 0 {
		bp := free[len(free)-1]
		free[len(free)-1] = nil
		lf.free[mib-1] = free[:len(free)-1]
		lf.bytes -= cap(*bp)
		lf.mu.Unlock()
		*bp = (*bp)[:size]
		return bp
	}
	lf.mu.Unlock()
	b := make([]byte, size, mib<<20)
	return &b
}

// putFrame gives back a buffer from getFrame, kept for reuse while its
// pool or the cache has room.
func putFrame(bp *[]byte) {
	if bp == nil {
		return
	}
	c := cap(*bp)
	if i := frameClass(c); i >= 0 {
		if c == 1<<(10+i) {
			framePools[i].Put(bp)
		}
		return
	}
	if c > maxPooledFrame || c%(1<<20) != 0 {
		return
	}
	lf := &largeFrames
	lf.mu.Lock()
	defer lf.mu.Unlock()
	// The buffers given back last are the sizes in use: older ones of
	// other sizes make room for them.
	for i := range lf.free {
		for lf.bytes+c > largeFrameCache && len(lf.free[i]) > 0 && i != c>>20-1 {
			n := len(lf.free[i]) - 1
			lf.bytes -= cap(*lf.free[i][n])
			lf.free[i][n] = nil
			lf.free[i] = lf.free[i][:n]
		}
	}
	if lf.bytes+c <= largeFrameCache {
		lf.free[c>>20-1] = append(lf.free[c>>20-1], bp)
		lf.bytes += c
	}
}

var errBadHeader = errors.New("malformed request header")

// parseHeader reads the request header after the correlation id: the
// nullable client id (absent only in ControlledShutdown v0's header v0) and,
// for flexible versions, the header's tagged fields, which are skipped.
func (c *conn) parseHeader(b []byte, key, version int16, flexible bool) (*string, []byte, error) {
	var clientID *string
	if key != 7 || version != 0 {
		if len(b) < 2 {
			return nil, nil, errBadHeader
		}
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		switch {
		case n == -1:
		case n < 0 || int(n) > len(b):
			return nil, nil, errBadHeader
		default:
			id := b[:n]
			if c.clientID == nil || *c.clientID != string(id) {
				s := string(id)
				c.clientID = &s
				c.sortForExit(s)
			}
			clientID = c.clientID
			b = b[n:]
		}
	}
	if flexible {
		tags, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, nil, errBadHeader
		}
		b = b[n:]
		for range tags {
			if _, n = binary.Uvarint(b); n <= 0 {
				return nil, nil, errBadHeader
			}
			b = b[n:]
			size, n := binary.Uvarint(b)
			if n <= 0 || size > uint64(len(b)-n) {
				return nil, nil, errBadHeader
			}
			b = b[n+int(size):]
		}
	}
	return clientID, b, nil
}

// handle calls the handler, turning a panic into a closed connection.
func (c *conn) handle(req *Request) (reply Reply) {
	defer func() {
		if r := recover(); r != nil {
			c.recovered(fmt.Sprintf("Handle(%s)", kmsg.NameForKey(req.Key)), r)
			reply = nil
			req.recycle = false // what it left behind may still use the frame
		}
	}()
	return c.s.handler.Handle(c.ctx, &c.info, req)
}

// respond calls p's Reply, turning a panic into a closed connection.
func (c *conn) respond(p *pending) (resp Response, ok bool) {
	if p.reply == nil {
		return p.fixed, true
	}
	defer func() {
		if r := recover(); r != nil {
			c.recovered(fmt.Sprintf("Reply(%s)", kmsg.NameForKey(p.key)), r)
			ok = false
		}
	}()
	return p.reply(), true
}

func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.s.removeConn(c)
	defer c.close()
	defer func() {
		if r := recover(); r != nil {
			c.recovered("writer", r)
			// Every Reply is called once, even now.
			for p := range c.queue {
				resp, _ := c.respond(&p)
				resp.done()
				c.s.budget.release(p.charge, c.src)
				<-c.slots
				c.queued.Add(-1)
			}
		}
	}()
	broken := false // nothing more is written once true
	for p := range c.queue {
		resp, ok := c.respond(&p)
		if !ok {
			broken = true
			p.frame, p.req = nil, nil // a Reply that panicked may not be done with them
		}
		if !broken && c.ctx.Err() == nil {
			if err := c.writeResponse(&p, resp); err != nil {
				if !errors.Is(err, net.ErrClosed) {
					c.log.Info("write failed; closing connection", "api", kmsg.NameForKey(p.key), "err", err)
				}
				broken = true
				c.close()
			} else if resp.CloseAfter {
				broken = true
				c.close()
			}
		}
		c.finish(&p, resp)
		<-c.slots
		c.queued.Add(-1)
	}
}

// done calls the Response's Done hook, if any.
func (r Response) done() {
	if r.Done != nil {
		r.Done()
	}
}

var encodePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledEncode keeps one huge response from pinning its buffer forever.
const maxPooledEncode = 1 << 20

func (c *conn) writeResponse(p *pending, resp Response) error {
	if resp.Empty() {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
	if resp.Msg == nil {
		return c.writeParts(p, resp)
	}
	msg := resp.Msg
	if msg.Key() != p.key {
		return fmt.Errorf("handler answered %s with a %s response", kmsg.NameForKey(p.key), kmsg.NameForKey(msg.Key()))
	}
	msg.SetVersion(p.version)
	bp := encodePool.Get().(*[]byte)
	buf := append((*bp)[:0], 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(p.correlationID))
	if msg.IsFlexible() && p.key != apiVersionsKey {
		buf = append(buf, 0) // no header tagged fields
	}
	buf = msg.AppendTo(buf)
	var err error
	if len(buf)-4 > math.MaxInt32 {
		err = fmt.Errorf("%s response of %d bytes is too large", kmsg.NameForKey(p.key), len(buf)-4)
	} else {
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		_, err = c.nc.Write(buf)
	}
	if cap(buf) <= maxPooledEncode {
		*bp = buf[:0]
		encodePool.Put(bp)
	}
	return err
}

// writeParts writes a pre-encoded body. Byte parts and small file regions
// (read with pread) are gathered in a staging buffer that goes out with
// one write each time it fills; a large region goes out with sendfile.
//
// A fetch over many partitions is a few header bytes and one small region
// per partition: sent one by one, each region took a writev of its header
// and a sendfile, two system calls (and a write deadline, and the
// allocations of reaching the descriptors) per partition. Gathered, it
// takes one pread, and the response one write per maxStaged bytes.
func (c *conn) writeParts(p *pending, resp Response) error {
	total := int64(4) // correlation id
	if resp.Flexible {
		total++
	}
	for _, part := range resp.Parts {
		if part.isFile() && (part.Offset < 0 || part.Len < 0) {
			return fmt.Errorf("%s response: invalid file region offset %d len %d", kmsg.NameForKey(p.key), part.Offset, part.Len)
		}
		total += part.size()
		if total > math.MaxInt32 {
			return fmt.Errorf("%s response is too large", kmsg.NameForKey(p.key))
		}
	}
	sp := stagePool.Get().(*[]byte)
	stage := binary.BigEndian.AppendUint32((*sp)[:0], uint32(total))
	stage = binary.BigEndian.AppendUint32(stage, uint32(p.correlationID))
	if resp.Flexible {
		stage = append(stage, 0)
	}
	defer func() {
		if cap(stage) <= maxStaged+maxStagedRegion {
			*sp = stage[:0]
			stagePool.Put(sp)
		}
	}()
	// flush writes what is staged, with more after it when given.
	flush := func(more []byte) error {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		vec := c.vec[:0]
		if len(stage) > 0 {
			vec = append(vec, stage)
		}
		if len(more) > 0 {
			vec = append(vec, more)
		}
		err := c.writeVec(vec)
		clear(vec)
		c.vec = vec[:0]
		stage = stage[:0]
		return err
	}
	for _, part := range resp.Parts {
		switch {
		case !part.isFile() && len(part.Bytes) > maxStagedRegion:
			if err := flush(part.Bytes); err != nil {
				return err
			}
			continue
		case !part.isFile():
			stage = append(stage, part.Bytes...)
		case part.Len == 0:
			continue
		case part.Len <= maxStagedRegion:
			var err error
			if stage, err = readRegion(stage, part); err != nil {
				return err
			}
		default:
			if err := flush(nil); err != nil {
				return err
			}
			if err := c.writeFile(part); err != nil {
				return err
			}
			continue
		}
		if len(stage) >= maxStaged {
			if err := flush(nil); err != nil {
				return err
			}
		}
	}
	if len(stage) == 0 {
		return nil
	}
	return flush(nil)
}

// Gathering a response (writeParts): file regions up to maxStagedRegion
// bytes are read into the staging buffer, which is written once it holds
// maxStaged bytes or more. A staging buffer per writing connection, from
// a pool.
const (
	maxStaged       = 256 << 10
	maxStagedRegion = 64 << 10
)

var stagePool = sync.Pool{New: func() any { b := make([]byte, 0, maxStaged+maxStagedRegion); return &b }}

// readRegion appends the bytes of a file part to buf, with one pread.
func readRegion(buf []byte, part Part) ([]byte, error) {
	f, err := part.acquire()
	if err != nil {
		return buf, err
	}
	defer part.release()
	n := len(buf)
	buf = slices.Grow(buf, int(part.Len))[:n+int(part.Len)]
	m, err := f.ReadAt(buf[n:], part.Offset)
	if m < int(part.Len) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errFileShort
		}
		return buf[:n], err
	}
	return buf, nil
}

func (c *conn) writeVec(vec [][]byte) error {
	switch len(vec) {
	case 0:
		return nil
	case 1:
		_, err := c.nc.Write(vec[0])
		return err
	}
	bufs := net.Buffers(vec)
	_, err := bufs.WriteTo(c.nc)
	return err
}

// errFileShort means a file region reached past the end of its file, which
// was truncated after the response was built. The frame cannot be completed.
var errFileShort = errors.New("file region past end of file")

// writeFile sends a file region: sendfile when the connection is a socket
// that allows it, else positional reads through a pooled buffer.
func (c *conn) writeFile(part Part) error {
	f, err := part.acquire()
	if err != nil {
		return err
	}
	defer part.release()
	var sc syscall.Conn
	switch nc := c.nc.(type) {
	case *net.TCPConn:
		sc = nc
	case *net.UnixConn:
		sc = nc
	}
	if sc != nil {
		sent, err := sendFile(sc, f, part.Offset, part.Len)
		if !errors.Is(err, errSendfileUnsupported) {
			return err
		}
		part.Offset += sent
		part.Len -= sent
	}
	return copyFileRegion(c.nc, f, part.Offset, part.Len)
}

var copyPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func copyFileRegion(w io.Writer, f *os.File, off, n int64) error {
	bp := copyPool.Get().(*[]byte)
	defer copyPool.Put(bp)
	buf := *bp
	for n > 0 {
		chunk := buf[:min(int64(len(buf)), n)]
		m, err := f.ReadAt(chunk, off)
		if m > 0 {
			if _, werr := w.Write(chunk[:m]); werr != nil {
				return werr
			}
			off += int64(m)
			n -= int64(m)
		}
		if n == 0 {
			return nil
		}
		if errors.Is(err, io.EOF) {
			return errFileShort
		}
		if err != nil {
			return err
		}
	}
	return nil
}
