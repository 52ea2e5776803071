package peer

import (
	"context"
	"crypto/tls"
	"sync"
)

// maxIdlePerAddr bounds the idle connections a Pool keeps to one address.
const maxIdlePerAddr = 4

// Pool keeps idle connections to other brokers by address, for requests
// made now and then from many goroutines (a share-state write on another
// node): Get takes one or dials, Put gives it back. It is safe for
// concurrent use; the zero value is not usable, build it with NewPool.
type Pool struct {
	clientID string
	// tls, when set, makes every connection TLS with the config it
	// returns (a node's certificate): the addresses are then ssl:// ones.
	tls func() *tls.Config

	mu     sync.Mutex
	idle   map[string][]*Conn
	closed bool
}

// NewPool returns an empty pool whose connections name themselves
// clientID.
func NewPool(clientID string) *Pool {
	return &Pool{clientID: clientID, idle: map[string][]*Conn{}}
}

// NewPoolTLS is NewPool whose connections are TLS with the config cfg
// returns at each dial: give it the other brokers' ssl:// listeners.
func NewPoolTLS(clientID string, cfg func() *tls.Config) *Pool {
	p := NewPool(clientID)
	p.tls = cfg
	return p
}

// TLS reports whether the pool's connections are TLS (NewPoolTLS).
func (p *Pool) TLS() bool { return p.tls != nil }

// Get returns an idle connection to addr, or a new one.
func (p *Pool) Get(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if idle := p.idle[addr]; len(idle) > 0 {
		c := idle[len(idle)-1]
		p.idle[addr] = idle[:len(idle)-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	if p.tls != nil {
		return DialTLS(ctx, addr, p.clientID, p.tls())
	}
	return Dial(ctx, addr, p.clientID)
}

// Put gives c back after a request whose error was err: a connection
// whose exchange failed is closed (its stream may be mid-response), as
// is one beyond the idle bound.
func (p *Pool) Put(c *Conn, err error) {
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[c.addr]) >= maxIdlePerAddr {
		c.Close()
		return
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
}

// Close closes the idle connections; connections given back later are
// closed too.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, idle := range p.idle {
		for _, c := range idle {
			c.Close()
		}
		delete(p.idle, addr)
	}
}
