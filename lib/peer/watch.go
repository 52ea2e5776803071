package peer

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// probeTimeout bounds the dial that tells a gone broker from one whose
// connection merely broke.
const probeTimeout = 500 * time.Millisecond

// Watch is what a node knows, from its own connections, of the other
// brokers' processes: a broker whose connection broke and whose listener
// then refused a dial has no process listening any more. A follower's
// connection to its leader tells first (Lost, Reached): the kernel resets
// the connections of a process that dies, so its followers learn of it at
// once, well before the controller has fenced it and moved its
// leaderships. The Metadata handler asks (Gone) so that it does not hand
// a client a leader it knows is gone while the controller is about to
// elect another.
//
// A frozen or cut-off broker is not gone: a dial to it connects or times
// out, and only the controller's session timeout decides about it.
// Safe for concurrent use; the zero value is not usable, build it with
// NewWatch.
type Watch struct {
	clock clock.Clock
	// probe dials a broker's address; only a refused dial (nothing
	// listens) makes the broker gone. net.Dialer in production.
	probe func(ctx context.Context, addr string) error

	// suspects counts the brokers probing or gone, so that Gone on a
	// healthy cluster is one atomic load.
	suspects atomic.Int32

	mu      sync.Mutex
	brokers map[int32]*watched
	changed chan struct{} // closed and replaced at every state change
}

type watched struct {
	probing bool
	// since is when the connection that led to the probe broke; zero
	// while not probing and not gone.
	since time.Time
	gone  bool
}

// NewWatch returns a Watch that times suspicion on clk (nil: real time).
func NewWatch(clk clock.Clock) *Watch {
	if clk == nil {
		clk = clock.Real()
	}
	return &Watch{clock: clk, probe: dialProbe, brokers: map[int32]*watched{}, changed: make(chan struct{})}
}

func dialProbe(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Lost reports that a connection to broker id at addr broke or could not
// be made. Unless a probe of it already runs or it is known gone, the
// broker is suspect from now until a probe dial of addr tells: refused
// makes it gone, anything else clears it.
func (w *Watch) Lost(id int32, addr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.brokers[id]
	if b != nil && (b.probing || b.gone) {
		return
	}
	if b == nil {
		b = &watched{}
		w.brokers[id] = b
	}
	b.probing, b.since = true, w.clock.Now()
	w.suspects.Add(1)
	w.changedLocked()
	go w.runProbe(id, addr)
}

func (w *Watch) runProbe(id int32, addr string) {
	// A dial's timeout is wall time.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	err := w.probe(ctx, addr)
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.changedLocked() // a probe's end is news even when it changed nothing
	b := w.brokers[id]
	if b == nil || !b.probing {
		return // Reached in the meantime
	}
	b.probing = false
	if errors.Is(err, syscall.ECONNREFUSED) {
		b.gone = true
	} else {
		b.since = time.Time{}
		w.suspects.Add(-1)
	}
}

// Reached reports an exchange with broker id that succeeded: it is not
// gone (any more).
func (w *Watch) Reached(id int32) {
	if w.suspects.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.brokers[id]
	if b == nil || (!b.probing && !b.gone) {
		return
	}
	*b = watched{}
	w.suspects.Add(-1)
	w.changedLocked()
}

// Any reports whether some broker is suspect or gone.
func (w *Watch) Any() bool { return w.suspects.Load() > 0 }

// Gone reports whether broker id is suspect (its probe runs) or gone,
// and since when: when its connection broke.
func (w *Watch) Gone(id int32) (time.Time, bool) {
	if w.suspects.Load() == 0 {
		return time.Time{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.brokers[id]
	if b == nil || (!b.probing && !b.gone) {
		return time.Time{}, false
	}
	return b.since, true
}

// Changed returns a channel closed at the next change of what the Watch
// knows.
func (w *Watch) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *Watch) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}
