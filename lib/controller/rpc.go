package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// The controller RPCs run over 'M' connections of the Raft port (see mux).
// Each message is a 4-byte big-endian length and a JSON body; a client
// writes one rpcRequest and reads one rpcResponse, and may send another
// request on the same connection.
//
// Every request carries the sender's voter set: a node whose --voters
// differ refuses the request with ErrVotersMismatch (and the sender's
// Fatal fires), so a misconfigured node is found at its first RPC.
//
// Errors cross the wire as the name of the sentinel they wrap (see
// wireErrors) and their message, and come back as an error that
// errors.Is the same sentinel.

// maxRPCMessage bounds one RPC message; a longer one is refused before
// any of it is read.
const maxRPCMessage = 64 << 20

// rpcIdleTimeout bounds how long an RPC connection may stay silent, or
// take to send one whole request, before the serving node closes it.
const rpcIdleTimeout = 2 * time.Minute

// RPC operations.
const (
	opPropose   = "propose"   // body: an encoded command; answer: wireResult
	opHeartbeat = "heartbeat" // body: Heartbeat; answer: HeartbeatResult
	opJoin      = "join"      // body: joinRequest; answer: nothing
	opQuorum    = "quorum"    // answer: Quorum
	opHello     = "hello"     // the voter-set check alone
	opElect     = "elect"     // body: electRequest; answer: wireResult
	// opRemoveNonvoter removes a non-voter; body: removeRequest.
	opRemoveNonvoter = "remove_nonvoter"
)

type rpcRequest struct {
	Op     string   `json:"op"`
	From   int32    `json:"from"`
	Voters []string `json:"voters"`
	// ClusterID is the sender's, once its image has one: a node of
	// another cluster is refused like one with other voters.
	ClusterID string `json:"cluster_id,omitempty"`
	// TimeoutMillis is what is left of the caller's deadline.
	TimeoutMillis int64           `json:"timeout_ms"`
	Body          json.RawMessage `json:"body,omitempty"`
}

type rpcResponse struct {
	Err  *wireError      `json:"err,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
}

type wireError struct {
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
}

type removeRequest struct {
	ID int32 `json:"id"`
}

type joinRequest struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
}

// wireResult is an applyResult on the wire.
type wireResult struct {
	Err             *wireError        `json:"err,omitempty"`
	FirstProducerID int64             `json:"first_producer_id,omitempty"`
	BrokerEpoch     int64             `json:"broker_epoch,omitempty"`
	Partition       *Partition        `json:"partition,omitempty"`
	Elections       []wireElection    `json:"elections,omitempty"`
	Unclean         []uncleanElection `json:"unclean,omitempty"`
	Alterations     []wireAlteration  `json:"alterations,omitempty"`
	Reassignments   []wireElection    `json:"reassignments,omitempty"`
	Index           uint64            `json:"index,omitempty"`
}

type wireAlteration struct {
	Partition *Partition `json:"partition,omitempty"`
	Err       *wireError `json:"err,omitempty"`
}

type wireElection struct {
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Err       *wireError `json:"err,omitempty"`
}

func resultToWire(r applyResult) wireResult {
	w := wireResult{
		Err: encodeError(r.err), FirstProducerID: r.firstProducerID, BrokerEpoch: r.brokerEpoch,
		Partition: r.partition, Unclean: r.unclean, Index: r.index,
	}
	for _, e := range r.elections {
		w.Elections = append(w.Elections, wireElection{Topic: e.Topic, Partition: e.Partition, Err: encodeError(e.err)})
	}
	for _, a := range r.alterations {
		w.Alterations = append(w.Alterations, wireAlteration{Partition: a.partition, Err: encodeError(a.err)})
	}
	for _, e := range r.reassignments {
		w.Reassignments = append(w.Reassignments, wireElection{Topic: e.Topic, Partition: e.Partition, Err: encodeError(e.err)})
	}
	return w
}

func resultFromWire(w wireResult) applyResult {
	r := applyResult{
		err: decodeError(w.Err), firstProducerID: w.FirstProducerID, brokerEpoch: w.BrokerEpoch,
		partition: w.Partition, unclean: w.Unclean, index: w.Index,
	}
	for _, e := range w.Elections {
		r.elections = append(r.elections, electionResult{TopicPartition{e.Topic, e.Partition}, decodeError(e.Err)})
	}
	for _, a := range w.Alterations {
		r.alterations = append(r.alterations, alteration{partition: a.Partition, err: decodeError(a.Err)})
	}
	for _, e := range w.Reassignments {
		r.reassignments = append(r.reassignments, electionResult{TopicPartition{e.Topic, e.Partition}, decodeError(e.Err)})
	}
	return r
}

// errRetry is the answer of a node that is not the leader to a request it
// did not act on: the caller may safely send it again, to the leader.
var errRetry = errors.New("controller: not the leader, retry")

// wireErrors names every error that keeps its identity across the wire.
// The first entry an error matches (errors.Is) names it, so a more
// specific error comes before one it may wrap.
var wireErrors = []struct {
	name string
	err  error
}{
	{"retry", errRetry},
	{"CommandTooLarge", ErrCommandTooLarge},
	{"BrokerInUse", ErrBrokerInUse},
	{"BrokerNotRegistered", ErrBrokerNotRegistered},
	{"Voter", ErrVoter},
	{"VotersMismatch", ErrVotersMismatch},
	{"NodeNotAuthorized", ErrNodeNotAuthorized},
	{"TopicExists", ErrTopicExists},
	{"UnknownTopic", ErrUnknownTopic},
	{"UnknownPartition", ErrUnknownPartition},
	{"InvalidPartitions", ErrInvalidPartitions},
	{"InvalidReplicationFactor", ErrInvalidReplicationFactor},
	{"InvalidReplicaAssignment", ErrInvalidReplicaAssignment},
	{"InvalidPartitionState", ErrInvalidPartitionState},
	{"StaleLeaderEpoch", ErrStaleLeaderEpoch},
	{"RemoteSegmentExists", ErrRemoteSegmentExists},
	{"InvalidRemoteDelete", ErrInvalidRemoteDelete},
	{"InvalidConfig", ErrInvalidConfig},
	{"InvalidBroker", ErrInvalidBroker},
	{"InvalidProducerIDCount", ErrInvalidProducerIDCount},
	{"InvalidACL", ErrInvalidACL},
	{"UnknownTopicID", ErrUnknownTopicID},
	{"InvalidRequest", ErrInvalidRequest},
	{"InternalTopic", ErrInternalTopic},
	{"StaleBrokerEpoch", ErrStaleBrokerEpoch},
	{"FencedLeaderEpoch", ErrFencedLeaderEpoch},
	{"InvalidUpdateVersion", ErrInvalidUpdateVersion},
	{"NotLeader", ErrNotLeader},
	{"IneligibleReplica", ErrIneligibleReplica},
	{"ElectionNotNeeded", ErrElectionNotNeeded},
	{"PreferredLeaderNotAvailable", ErrPreferredLeaderNotAvailable},
	{"EligibleLeadersNotAvailable", ErrEligibleLeadersNotAvailable},
	{"NoReassignmentInProgress", ErrNoReassignmentInProgress},
	{"NotController", ErrNotController},
	{"UnknownCommand", ErrUnknownCommand},
	{"InvalidCommand", ErrInvalidCommand},
	{"InvalidSnapshot", ErrInvalidSnapshot},
	{"Closed", ErrClosed},
	{"DeadlineExceeded", context.DeadlineExceeded},
	{"Canceled", context.Canceled},
}

// remoteError is an error received from another node: its message as
// sent, wrapping the sentinel it was named by.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Message: err.Error()}
	for _, s := range wireErrors {
		if errors.Is(err, s.err) {
			w.Name = s.name
			break
		}
	}
	return w
}

func decodeError(w *wireError) error {
	if w == nil {
		return nil
	}
	for _, s := range wireErrors {
		if s.name == w.Name {
			return &remoteError{msg: w.Message, sentinel: s.err}
		}
	}
	return errors.New(w.Message)
}

func writeMessage(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > maxRPCMessage {
		return fmt.Errorf("rpc message of %d bytes", len(body))
	}
	buf := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	_, err = w.Write(append(buf, body...))
	return err
}

func readMessage(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxRPCMessage {
		return fmt.Errorf("rpc message of %d bytes", size)
	}
	// The body is read into a buffer that grows with what arrives, not
	// allocated at the announced size: a peer announcing the maximum and
	// sending nothing costs nothing.
	var body bytes.Buffer
	if _, err := io.CopyN(&body, r, int64(size)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return json.Unmarshal(body.Bytes(), v)
}

// errUnreachable marks a call that failed before the request was sent:
// nothing happened on the other side.
type errUnreachable struct{ err error }

func (e errUnreachable) Error() string { return "controller: node unreachable: " + e.err.Error() }
func (e errUnreachable) Unwrap() error { return e.err }

// repeatable reports whether op may be sent a second time when the
// first outcome is unknown: a heartbeat, a join (AddNonvoter of a member
// already there changes nothing) and the reads. A propose or an election
// may not: it could be applied twice.
func repeatable(op string) bool {
	switch op {
	case opHeartbeat, opJoin, opQuorum, opHello, opRemoveNonvoter:
		return true
	}
	return false
}

// call sends one request to the node at address and decodes its answer
// into out. It takes an idle connection to address from the pool, or
// dials one. A refused voter set fires Fatal.
//
// A pooled connection may have gone stale (the peer restarted): one the
// peer is seen to have closed is dropped before use (peerClosed), and a
// request on a reused connection that fails before any of its answer
// arrived is sent once more on a new connection, when op is repeatable.
// A propose's failure after it was written stays "outcome unknown".
func (c *Controller) call(ctx context.Context, address, op string, in, out any) error {
	req := rpcRequest{Op: op, From: c.cfg.NodeID, Voters: c.voterList, ClusterID: c.Image().ClusterID}
	if in != nil {
		body, err := json.Marshal(in)
		if err != nil {
			return err
		}
		req.Body = body
	}
	// The deadline is the connection's I/O deadline, so wall time.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultCommandTimeout)
	}
	req.TimeoutMillis = max(time.Until(deadline).Milliseconds(), 1)
	for fresh := false; ; fresh = true {
		conn := (*rpcConn)(nil)
		if !fresh {
			conn = c.rpcPool.get(address)
		}
		if conn == nil {
			dialCtx, cancel := context.WithDeadline(ctx, deadline)
			nc, err := dialKind(dialCtx, address, connRPC, "", c.cfg.TLS)
			cancel()
			if err != nil {
				return errUnreachable{err}
			}
			conn = newRPCConn(nc)
			fresh = true
		}
		resp, answered, err := conn.exchange(ctx, deadline, &req)
		if err != nil {
			conn.Close()
			var unreachable errUnreachable
			isUnreachable := errors.As(err, &unreachable)
			switch {
			case fresh && isUnreachable:
				return err
			case ctx.Err() != nil:
				return ctx.Err()
			case fresh:
				return fmt.Errorf("%w: %s to %s: outcome unknown: %v", ErrNotController, op, address, err)
			case isUnreachable, !answered && repeatable(op):
				// Nothing was sent, or only what is safe to send again.
				continue
			default:
				return fmt.Errorf("%w: %s to %s: outcome unknown: %v", ErrNotController, op, address, err)
			}
		}
		c.rpcPool.put(address, conn)
		if err := decodeError(resp.Err); err != nil {
			if errors.Is(err, ErrVotersMismatch) {
				c.fail(err)
			}
			return err
		}
		if out != nil && len(resp.Body) > 0 {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				return fmt.Errorf("controller: %s answer from %s: %w", op, address, err)
			}
		}
		return nil
	}
}

// maxIdleRPCConns is how many idle RPC connections to one address the
// pool keeps. Calls at once each take a connection of their own; all but
// this many are closed when they end.
const maxIdleRPCConns = 2

// rpcConn is an RPC connection, used by one call at a time.
type rpcConn struct {
	net.Conn
	r *bufio.Reader
	// read counts the bytes read from the connection.
	read int64
	// broken is set when a call's context ended while it used the
	// connection: the deadline it set may be in force, so the connection
	// is not pooled.
	broken bool
}

func newRPCConn(nc net.Conn) *rpcConn {
	c := &rpcConn{Conn: nc}
	c.r = bufio.NewReader(readCounter{c})
	return c
}

type readCounter struct{ c *rpcConn }

func (r readCounter) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	r.c.read += int64(n)
	return n, err
}

// exchange writes req and reads its answer, by deadline and while ctx
// lasts. A write error is errUnreachable (the request did not go out
// whole, so the peer did not act on it); answered reports whether any
// byte of the answer arrived.
func (c *rpcConn) exchange(ctx context.Context, deadline time.Time, req *rpcRequest) (resp rpcResponse, answered bool, err error) {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer func() {
		if !stop() {
			c.broken = true
		}
	}()
	c.SetDeadline(deadline)
	if err := writeMessage(c, req); err != nil {
		return rpcResponse{}, false, errUnreachable{err}
	}
	before := c.read
	err = readMessage(c.r, &resp)
	return resp, c.read > before, err
}

// rpcPool holds idle RPC connections by address. Safe for concurrent use.
type rpcPool struct {
	mu     sync.Mutex
	idle   map[string][]*rpcConn
	closed bool
}

// get returns an idle connection to address that the peer has not
// closed, or nil.
func (p *rpcPool) get(address string) *rpcConn {
	for {
		p.mu.Lock()
		conns := p.idle[address]
		if len(conns) == 0 {
			p.mu.Unlock()
			return nil
		}
		conn := conns[len(conns)-1]
		p.idle[address] = conns[:len(conns)-1]
		p.mu.Unlock()
		if !peerClosed(conn.Conn) {
			return conn
		}
		conn.Close()
	}
}

// put returns conn to the pool after a call, or closes it when the pool
// is closed, holds enough idle connections to address, or conn may not
// be reused.
func (p *rpcPool) put(address string, conn *rpcConn) {
	if !conn.broken && conn.SetDeadline(time.Time{}) == nil {
		p.mu.Lock()
		if !p.closed && len(p.idle[address]) < maxIdleRPCConns {
			if p.idle == nil {
				p.idle = map[string][]*rpcConn{}
			}
			p.idle[address] = append(p.idle[address], conn)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	conn.Close()
}

// close closes every idle connection; those in use are closed when
// their call ends.
func (p *rpcPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, conns := range p.idle {
		for _, conn := range conns {
			conn.Close()
		}
	}
	p.idle = nil
}

// serveRPC answers the requests on one RPC connection until it closes.
// It notes the brokers that register or heartbeat on it (normally the
// one of the node at the other end); when the connection ends, the
// active controller probes them (rpcConnEnded).
//
// principal is the peer's certificate principal (with Config.TLS): every
// request is checked against it (authorizeRPC).
func (c *Controller) serveRPC(conn net.Conn, principal string) {
	heartbeaters := map[int32]int64{}
	defer func() {
		conn.Close()
		c.rpcConnEnded(heartbeaters)
	}()
	r := bufio.NewReader(conn)
	for {
		var req rpcRequest
		// A request must arrive whole within rpcIdleTimeout of the last
		// answer (a deadline of the connection: wall time). The nodes'
		// pools drop a connection closed for it before they use it again.
		conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		if err := readMessage(r, &req); err != nil {
			return
		}
		body, err := c.handleRPC(&req, heartbeaters, principal)
		resp := rpcResponse{Err: encodeError(err)}
		if err == nil && body != nil {
			resp.Body, err = json.Marshal(body)
			if err != nil {
				resp = rpcResponse{Err: encodeError(err)}
			}
		}
		if err := writeMessage(conn, &resp); err != nil {
			return
		}
	}
}

// handleRPC answers one request that came on a connection authenticated
// as principal (empty without TLS); the broker and epoch of a heartbeat,
// or of a registration, go in heartbeaters (when not nil).
func (c *Controller) handleRPC(req *rpcRequest, heartbeaters map[int32]int64, principal string) (any, error) {
	if ours := c.Image().ClusterID; req.ClusterID != "" && ours != "" && req.ClusterID != ours {
		c.logger.Warn("controller: refusing a node of another cluster", "node", req.From, "its_cluster_id", req.ClusterID)
		return nil, fmt.Errorf("%w: node %d is of another cluster", ErrVotersMismatch, req.From)
	}
	if !slices.Equal(req.Voters, c.voterList) {
		c.logger.Warn("controller: refusing a node whose voters differ", "node", req.From, "its_voters", req.Voters, "voters", c.voterList)
		// The answer names neither set: the voter list is what a Raft
		// connection must carry, and an outsider is not told it.
		return nil, fmt.Errorf("%w: node %d refused the voter set of node %d", ErrVotersMismatch, c.cfg.NodeID, req.From)
	}
	if req.Op != opHello {
		select {
		case <-c.raftStarted:
		default:
			// Still starting: this node leads nothing yet. A peer that
			// took it for the leader before it restarted asks another.
			return nil, errRetry
		}
	}
	// What is left of the caller's deadline, on wall time like it: it
	// bounds Raft's apply and the RPCs this request makes.
	timeout := min(time.Duration(req.TimeoutMillis)*time.Millisecond, defaultCommandTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel)
	defer stop()
	if c.cfg.TLS != nil {
		if err := c.authorizeRPC(req, principal); err != nil {
			if ok, held := c.rpcRefusals.allow(time.Now()); ok {
				c.logger.Warn("controller: refusing a request", "node", req.From, "principal", principal, "op", req.Op, "err", err, "refused_since_last_line", held)
			}
			return nil, err
		}
	}
	switch req.Op {
	case opHello:
		return nil, nil
	case opPropose:
		var data []byte
		if err := json.Unmarshal(req.Body, &data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		// Only a record this build writes goes into the log: one that does
		// not decode, or of a version kept only to replay old logs, is
		// refused here rather than committed and refused by every FSM.
		if _, _, err := decodeCommand(data); err != nil {
			return nil, err
		}
		if retired(commandType(data[0]), data[1]) {
			return nil, fmt.Errorf("%w: %v version %d is no longer written", ErrUnknownCommand, commandType(data[0]), data[1])
		}
		res, err := c.applyLocal(ctx, data)
		if err != nil {
			return nil, err
		}
		if heartbeaters != nil && res.err == nil && res.brokerEpoch > 0 {
			// A registration: the broker heartbeats on this connection
			// from now on, and may die before its first heartbeat.
			if typ, body, err := decodeCommand(data); err == nil && typ == cmdRegisterBroker {
				if id, ok := registeredBroker(body); ok {
					heartbeaters[id] = res.brokerEpoch
				}
			}
		}
		return resultToWire(res), nil
	case opHeartbeat:
		var hb Heartbeat
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return nil, err
		}
		if heartbeaters != nil {
			heartbeaters[hb.BrokerID] = hb.BrokerEpoch
		}
		return c.heartbeatLocal(ctx, hb)
	case opElect:
		var e electRequest
		if err := json.Unmarshal(req.Body, &e); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		res, err := c.electLocal(ctx, e)
		if err != nil {
			return nil, err
		}
		return resultToWire(res), nil
	case opJoin:
		var j joinRequest
		if err := json.Unmarshal(req.Body, &j); err != nil {
			return nil, err
		}
		return nil, c.join(ctx, j)
	case opQuorum:
		return c.quorumLocal()
	case opRemoveNonvoter:
		var r removeRequest
		if err := json.Unmarshal(req.Body, &r); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
		return nil, c.RemoveNonvoter(ctx, r.ID)
	}
	return nil, fmt.Errorf("controller: unknown rpc %q", req.Op)
}
