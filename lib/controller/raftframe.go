package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// The bounds of what one Raft message may hold. hashicorp/raft's
// NetworkTransport reads a served connection as a stream of messages,
// each an RPC type byte and one msgpack value (InstallSnapshot's is
// followed by the snapshot's raw bytes, Size of them), and decodes each
// value whole before it acts on it. Its msgpack lengths are announced,
// not checked; raftFrames checks them as the bytes arrive.
const (
	// maxCommand bounds one encoded controller command, a Raft log
	// entry's data (KRaft bounds a metadata record batch to 8 MiB the
	// same way). A larger proposal is refused with ErrCommandTooLarge.
	// The largest commands are a registration listing the replicas that
	// lost committed records (about 105 bytes each: 16 MiB holds some
	// 160,000) and an election or reassignment naming partitions one by
	// one (TestLargestCommandsFitMaxCommand).
	maxCommand = 16 << 20
	// raftMaxAppendEntries is how many entries one AppendEntries carries
	// at most (Raft's MaxAppendEntries).
	raftMaxAppendEntries = 16
	// raftMaxMessage bounds one Raft message without a snapshot's data:
	// a full AppendEntries of the largest commands, with room for each
	// entry's fields and the request's own.
	raftMaxMessage = raftMaxAppendEntries*(maxCommand+4<<10) + 1<<20
	// raftMaxDepth bounds the nesting of msgpack containers in one
	// message; Raft's deepest (AppendEntries → entries → an entry) is 3.
	raftMaxDepth = 32
	// raftMaxResponse bounds one answer read on a Raft connection this
	// node dialed: an error string and a response, a few hundred bytes.
	raftMaxResponse = 1 << 20
)

// The RPC types of hashicorp/raft's NetworkTransport (its rpc* constants).
const (
	raftRPCAppendEntries   = 0
	raftRPCInstallSnapshot = 2
	raftRPCLast            = 4 // RequestPreVote
)

// errRaftMessage is what a served Raft connection that broke the bounds
// ends with.
var errRaftMessage = errors.New("controller: raft message out of bounds")

// raftFrames follows the messages of a Raft connection's incoming
// stream, byte by byte as they arrive, and refuses one over max bytes
// (not counting a snapshot's data), nested deeper than raftMaxDepth, or
// of an unknown RPC type, as soon as a header announces it: before
// hashicorp/raft's decoder reads the header, so nothing is allocated for
// it. An announced length is never allocated here either. Used by one
// goroutine (the connection's reader).
type raftFrames struct {
	max int64
	// responses: the stream is the answers on a connection this node
	// dialed, each two values (an error string, then the response) with
	// no RPC type byte.
	responses bool
	// inMessage: the RPC type was read and its value is being read.
	inMessage bool
	rpcType   byte
	size      int64 // bytes of the current message so far
	// snapshot is how many bytes of snapshot data are still to come.
	snapshot int64

	// The msgpack value being read: marker is the first byte of a value
	// whose header (hdr, need more bytes) is incomplete; body is how many
	// bytes of a str, bin or ext payload are still to come.
	marker byte
	hdr    [17]byte
	have   int
	need   int
	body   int64
	// stack holds, per open container, how many values it still holds
	// (stack[0] is the message's one value).
	stack []int64

	// The top-level map's key "Size" (InstallSnapshot's data length):
	// key collects a short key string, sizeNext marks its value.
	key       []byte
	keyOpen   bool
	sizeNext  bool
	snapSize  int64
	snapFound bool
}

func newRaftFrames(max int64) *raftFrames {
	return &raftFrames{max: max, stack: make([]int64, 0, 8), key: make([]byte, 0, 8)}
}

// newRaftResponseFrames is raftFrames for the answers read on a Raft
// connection this node dialed.
func newRaftResponseFrames(max int64) *raftFrames {
	f := newRaftFrames(max)
	f.responses = true
	return f
}

// feed takes the next bytes of the stream; an error means the
// connection must be closed.
func (f *raftFrames) feed(p []byte) error {
	for len(p) > 0 {
		if f.snapshot > 0 {
			k := min(int64(len(p)), f.snapshot)
			f.snapshot -= k
			p = p[k:]
			continue
		}
		if f.body > 0 {
			k := min(int64(len(p)), f.body)
			if f.keyOpen && len(f.key)+int(k) <= cap(f.key) {
				f.key = append(f.key, p[:k]...)
			} else {
				f.keyOpen = false
			}
			f.body -= k
			f.size += k
			p = p[k:]
			if f.body == 0 {
				f.valueDone(0, false)
			}
			continue
		}
		b := p[0]
		p = p[1:]
		if !f.inMessage && f.responses {
			f.inMessage, f.rpcType, f.size = true, 0xff, 0
			f.stack = append(f.stack[:0], 2)
			f.snapFound, f.snapSize = false, 0
		}
		if !f.inMessage {
			if b > raftRPCLast {
				return fmt.Errorf("%w: unknown rpc type %d", errRaftMessage, b)
			}
			f.inMessage, f.rpcType, f.size = true, b, 1
			f.stack = append(f.stack[:0], 1)
			f.snapFound, f.snapSize = false, 0
			continue
		}
		f.size++
		if f.size > f.max {
			return fmt.Errorf("%w: a message over %d bytes", errRaftMessage, f.max)
		}
		if f.need > 0 {
			f.hdr[f.have] = b
			f.have++
			if f.have == f.need {
				f.need = 0
				if err := f.header(); err != nil {
					return err
				}
			}
			continue
		}
		if err := f.start(b); err != nil {
			return err
		}
	}
	return nil
}

// start reads the first byte of a msgpack value.
func (f *raftFrames) start(b byte) error {
	keyPos := len(f.stack) == 2 && f.stack[1]%2 == 0
	switch {
	case b <= 0x7f: // positive fixint
		f.valueDone(int64(b), true)
	case b <= 0x8f: // fixmap
		return f.open(2 * int64(b&0x0f))
	case b <= 0x9f: // fixarray
		return f.open(int64(b & 0x0f))
	case b <= 0xbf: // fixstr
		f.keyOpen, f.key = keyPos, f.key[:0]
		return f.payload(int64(b & 0x1f))
	case b >= 0xe0: // negative fixint
		f.valueDone(int64(int8(b)), true)
	case b == 0xc0, b == 0xc2, b == 0xc3: // nil, false, true
		f.valueDone(0, false)
	case b == 0xc1:
		return fmt.Errorf("%w: msgpack byte 0xc1", errRaftMessage)
	default:
		f.marker, f.have, f.need = b, 0, headerLen[b-0xc4]
		if b >= 0xd9 && b <= 0xdb { // str8/16/32
			f.keyOpen, f.key = keyPos, f.key[:0]
		}
	}
	return nil
}

// headerLen is how many bytes follow the markers 0xc4…0xdf before a
// payload (or, for numbers and fixext, all of the value's bytes).
var headerLen = [...]int{
	1, 2, 4, // bin8/16/32
	2, 3, 5, // ext8/16/32: length, type
	4, 8, // float32/64
	1, 2, 4, 8, // uint8…64
	1, 2, 4, 8, // int8…64
	2, 3, 5, 9, 17, // fixext1…16: type, data
	1, 2, 4, // str8/16/32
	2, 4, // array16/32
	2, 4, // map16/32
}

// header acts on a complete header of f.marker.
func (f *raftFrames) header() error {
	h := f.hdr[:f.have]
	length := func(n int) int64 {
		switch n {
		case 1:
			return int64(h[0])
		case 2:
			return int64(binary.BigEndian.Uint16(h))
		default:
			return int64(binary.BigEndian.Uint32(h))
		}
	}
	switch m := f.marker; {
	case m <= 0xc6: // bin
		return f.payload(length(f.have))
	case m <= 0xc9: // ext: the length, then a type byte
		return f.payload(length(f.have - 1))
	case m == 0xcc:
		f.valueDone(int64(h[0]), true)
	case m == 0xcd:
		f.valueDone(int64(binary.BigEndian.Uint16(h)), true)
	case m == 0xce:
		f.valueDone(int64(binary.BigEndian.Uint32(h)), true)
	case m == 0xcf:
		f.valueDone(int64(binary.BigEndian.Uint64(h)), true)
	case m == 0xd0:
		f.valueDone(int64(int8(h[0])), true)
	case m == 0xd1:
		f.valueDone(int64(int16(binary.BigEndian.Uint16(h))), true)
	case m == 0xd2:
		f.valueDone(int64(int32(binary.BigEndian.Uint32(h))), true)
	case m == 0xd3:
		f.valueDone(int64(binary.BigEndian.Uint64(h)), true)
	case m <= 0xd8: // floats, fixext
		f.valueDone(0, false)
	case m <= 0xdb: // str
		return f.payload(length(f.have))
	case m <= 0xdd: // array
		return f.open(length(f.have))
	default: // map
		return f.open(2 * length(f.have))
	}
	return nil
}

// payload starts a str, bin or ext payload of n bytes.
func (f *raftFrames) payload(n int64) error {
	if f.size+n > f.max {
		return fmt.Errorf("%w: a value of %d bytes in a message over %d", errRaftMessage, n, f.max)
	}
	if n == 0 {
		f.valueDone(0, false)
		return nil
	}
	f.body = n
	return nil
}

// open starts a container of n values.
func (f *raftFrames) open(n int64) error {
	if f.size+n > f.max { // every value takes a byte at least
		return fmt.Errorf("%w: a container of %d values in a message over %d", errRaftMessage, n, f.max)
	}
	if len(f.stack) >= raftMaxDepth {
		return fmt.Errorf("%w: containers nested deeper than %d", errRaftMessage, raftMaxDepth)
	}
	if n == 0 {
		f.valueDone(0, false)
		return nil
	}
	f.stack = append(f.stack, n)
	return nil
}

// valueDone ends a value (v is its value when isInt): the containers it
// completes end too, and with the message's last value the message does.
func (f *raftFrames) valueDone(v int64, isInt bool) {
	if len(f.stack) == 2 {
		keyPos := f.stack[1]%2 == 0
		switch {
		case keyPos:
			f.sizeNext = f.keyOpen && string(f.key) == "Size"
		case f.sizeNext && isInt:
			f.snapSize, f.snapFound = v, true
			f.sizeNext = false
		default:
			f.sizeNext = false
		}
		f.keyOpen = false
	}
	for len(f.stack) > 0 {
		top := len(f.stack) - 1
		f.stack[top]--
		if f.stack[top] > 0 {
			return
		}
		f.stack = f.stack[:top]
	}
	// The message is complete.
	f.inMessage = false
	if f.rpcType == raftRPCInstallSnapshot && f.snapFound && f.snapSize > 0 {
		f.snapshot = f.snapSize
	}
}

// raftDialedConn is a Raft connection this node dialed: the answers
// read on it are bounded (raftFrames, responses). Raft sets its own
// deadlines on it. One that sends an answer out of bounds is closed, with
// a log line.
type raftDialedConn struct {
	net.Conn
	frames *raftFrames
	logger *slog.Logger
}

func (c *raftDialedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if ferr := c.frames.feed(p[:n]); ferr != nil {
		c.logger.Warn("controller: closing a raft connection whose peer answered out of bounds", "remote", c.RemoteAddr(), "err", ferr)
		c.Conn.Close()
		return 0, ferr
	}
	return n, err
}

// raftServedConn is a Raft connection served here: every read must end
// within idle, and the messages read are bounded (raftFrames). One that
// idles past the deadline or sends a message out of bounds is closed,
// with a log line.
type raftServedConn struct {
	net.Conn
	idle   time.Duration
	frames *raftFrames
	logger *slog.Logger
}

func (c *raftServedConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(p)
	if ferr := c.frames.feed(p[:n]); ferr != nil {
		c.logger.Warn("controller: closing a raft connection that sent a message out of bounds", "remote", c.RemoteAddr(), "err", ferr)
		c.Conn.Close()
		return 0, ferr
	}
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		c.logger.Warn("controller: closing a raft connection idle for longer than its deadline", "remote", c.RemoteAddr(), "idle", c.idle)
		c.Conn.Close()
	}
	return n, err
}
