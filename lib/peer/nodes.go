package peer

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Nodes reaches the other brokers by node id: Addr gives a broker's
// address for the Pool's connections (its ssl:// listener when the Pool
// is TLS), the Pool holds them. It is safe for concurrent use.
type Nodes struct {
	Pool *Pool
	// Addr returns node's address, or an error when it has none (not
	// registered, no ssl:// listener for a TLS pool).
	Addr func(node int32) (string, error)
}

// Do sends req to node on a connection of the Pool, given back after.
func (n *Nodes) Do(ctx context.Context, node int32, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	addr, err := n.Addr(node)
	if err != nil {
		return nil, err
	}
	c, err := n.Pool.Get(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(ctx, req, timeout)
	n.Pool.Put(c, err)
	return resp, err
}
