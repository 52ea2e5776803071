package peer

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/probe"
)

// Tracked connections (Track): each is kept from idling out on the
// broker (connections.max.idle.ms, 10 min by default) by an ApiVersions
// request every trackKeepalive, and redialed trackRedial after it ended.
const (
	trackKeepalive = time.Minute
	trackRedial    = 250 * time.Millisecond
	trackTimeout   = 10 * time.Second
)

// Watch is what a node knows, from its own connections, of the other
// brokers' processes: a broker whose connection broke and whose listener
// then refused or reset a probe (lib/probe) has no process any more. A follower's
// connection to its leader tells first (Lost, Reached): the kernel resets
// the connections of a process that dies, so its followers learn of it at
// once, well before the controller has fenced it and moved its
// leaderships. The Metadata handler asks (Gone) so that it does not hand
// a client a leader it knows is gone while the controller is about to
// elect another.
//
// A follower learns of its leader's death only when it next reads from
// or writes to it, which a busy follower may do a few milliseconds after
// a client has already asked for metadata. So the Watch also keeps one
// idle connection to every other broker (Track), with a goroutine
// blocked reading it: woken by the kernel's reset the moment the
// process dies.
//
// A frozen or cut-off broker is not gone: a dial to it connects or times
// out, and only the controller's session timeout decides about it.
// Safe for concurrent use; the zero value is not usable, build it with
// NewWatch.
type Watch struct {
	clock clock.Clock
	log   *slog.Logger
	// probe reports whether the process at a broker's address is gone:
	// probe.Gone in production.
	probe func(ctx context.Context, addr string) bool
	// tls, when set, returns the TLS config of each tracked connection
	// (NewWatchTLS); nil: plain TCP.
	tls func() *tls.Config

	// suspects counts the brokers probing or gone, so that Gone on a
	// healthy cluster is one atomic load.
	suspects atomic.Int32
	// losses counts the calls of Lost that made a broker suspect: the
	// marks of exchanges (Mark, Reached).
	losses atomic.Uint64

	mu      sync.Mutex
	brokers map[int32]*watched
	changed chan struct{} // closed and replaced at every state change

	trackMu sync.Mutex
	tracked map[int32]*tracker
}

// tracker is the goroutine keeping one idle connection to a broker.
type tracker struct {
	addr string
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	conn *Conn // the connection open now, to interrupt at stop
}

type watched struct {
	probing bool
	// since is when the connection that led to the probe broke; zero
	// while not probing and not gone.
	since time.Time
	gone  bool
	// mark is losses counting the loss that made it suspect: an exchange
	// marked before it began before the loss, and proves nothing of the
	// process since (Reached).
	mark uint64
}

// NewWatch returns a Watch that times suspicion on clk (nil: real time)
// and logs what it concludes of each broker to log (nil: nowhere).
func NewWatch(clk clock.Clock, log *slog.Logger) *Watch {
	if clk == nil {
		clk = clock.Real()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watch{clock: clk, log: log, probe: probe.Gone, brokers: map[int32]*watched{}, changed: make(chan struct{}),
		tracked: map[int32]*tracker{}}
}

// NewWatchTLS is NewWatch whose tracked connections are TLS with the
// config cfg returns at each dial: Track it the other brokers' ssl://
// listeners (security.inter.broker.protocol SSL), as a Pool of
// NewPoolTLS.
func NewWatchTLS(clk clock.Clock, log *slog.Logger, cfg func() *tls.Config) *Watch {
	w := NewWatch(clk, log)
	w.tls = cfg
	return w
}

// TLS reports whether the tracked connections are TLS (NewWatchTLS).
func (w *Watch) TLS() bool { return w.tls != nil }

// Lost reports that a connection to broker id at addr broke or could not
// be made. Unless a probe of it already runs or it is known gone, the
// broker is suspect from now until a probe of addr tells (probe.Gone):
// gone, or cleared.
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
	b.probing, b.since, b.mark = true, w.clock.Now(), w.losses.Add(1)
	w.suspects.Add(1)
	w.changedLocked()
	w.log.Info("a connection to a broker broke; probing whether its process is gone", "broker", id, "addr", addr)
	go w.runProbe(id, addr)
}

func (w *Watch) runProbe(id int32, addr string) {
	gone := w.probe(context.Background(), addr)
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.changedLocked() // a probe's end is news even when it changed nothing
	b := w.brokers[id]
	if b == nil || !b.probing {
		return // Reached in the meantime
	}
	b.probing = false
	if gone {
		b.gone = true
		w.log.Info("a broker's process is gone: its listener refused or reset the probe", "broker", id, "addr", addr)
	} else {
		b.since = time.Time{}
		w.suspects.Add(-1)
		w.log.Info("a broker's listener holds a connection: not gone", "broker", id, "addr", addr)
	}
}

// Mark is the mark of an exchange beginning now, for Reached.
func (w *Watch) Mark() uint64 { return w.losses.Load() }

// Reached reports an exchange with broker id that succeeded, begun at
// mark (Mark): it is not gone (any more). An exchange begun before the
// loss that made the broker suspect tells nothing: a response the dead
// process sent just before it died may be read after its other
// connections broke, by a goroutine scheduled late on a busy machine.
func (w *Watch) Reached(id int32, mark uint64) {
	if w.suspects.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.brokers[id]
	if b == nil || (!b.probing && !b.gone) || mark < b.mark {
		return
	}
	w.log.Info("a broker suspected gone answered again", "broker", id)
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

// CheckHangups looks, without waiting, at every tracked connection for a
// close or reset the kernel has already received (Conn.HungUp) and makes
// its broker Lost. A reader goroutine learns of a dead process the
// moment it is scheduled, which on a loaded machine may be after a
// client that saw the same death has already asked for metadata; the
// handler answering it calls this first, so its answer holds all the
// same. It costs a poll per tracked broker.
func (w *Watch) CheckHangups() {
	w.trackMu.Lock()
	defer w.trackMu.Unlock()
	for id, t := range w.tracked {
		t.mu.Lock()
		c := t.conn
		t.mu.Unlock()
		if c != nil && c.HungUp() { // a poll that does not wait
			w.Lost(id, t.addr)
		}
	}
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

// Track keeps one idle connection to each broker of addrs (broker id →
// Kafka listener, host:port: an ssl:// one for a Watch of NewWatchTLS), and stops those to brokers no longer in
// it or whose address changed; Track(nil) stops them all, waiting for
// their goroutines. A tracked connection sends an ApiVersions request at
// once, so the other broker knows it for a peer's (its client id); one
// that ends is Lost; a dial whose request is answered is Reached.
func (w *Watch) Track(addrs map[int32]string, clientID string) {
	w.trackMu.Lock()
	defer w.trackMu.Unlock()
	for id, t := range w.tracked {
		if addr, ok := addrs[id]; !ok || addr != t.addr {
			t.end()
			delete(w.tracked, id)
		}
	}
	for id, addr := range addrs {
		if _, ok := w.tracked[id]; !ok {
			t := &tracker{addr: addr, stop: make(chan struct{}), done: make(chan struct{})}
			w.tracked[id] = t
			go w.track(id, t, clientID)
		}
	}
}

func (t *tracker) end() {
	close(t.stop)
	t.mu.Lock()
	if t.conn != nil {
		t.conn.Interrupt()
	}
	t.mu.Unlock()
	<-t.done
}

func (t *tracker) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// track dials id, waits on the connection until it ends, reports the
// end, and dials again, until stopped.
func (w *Watch) track(id int32, t *tracker, clientID string) {
	defer close(t.done)
	for !t.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), trackTimeout)
		go func() {
			select {
			case <-t.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		mark := w.Mark()
		var cfg *tls.Config
		if w.tls != nil {
			cfg = w.tls()
		}
		c, err := DialTLS(ctx, t.addr, clientID, cfg)
		if err == nil {
			// A request at once tells the other broker who this is
			// (its client id): the connections of other brokers end
			// first when it dies (lib/server, Config.ExitFirst).
			if _, err = c.Do(ctx, kmsg.NewPtrApiVersionsRequest(), trackTimeout); err != nil {
				c.Close()
			}
		}
		cancel()
		if err == nil {
			t.mu.Lock()
			t.conn = c
			t.mu.Unlock()
			if t.stopped() {
				c.Close()
				return
			}
			w.Reached(id, mark)
			err = t.awaitEnd(c)
			t.mu.Lock()
			t.conn = nil
			t.mu.Unlock()
			c.Close()
		}
		if t.stopped() {
			return
		}
		w.Lost(id, t.addr)
		timer := time.NewTimer(trackRedial)
		select {
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
			return
		}
	}
}

// awaitEnd waits on an idle connection until it ends or t stops, with
// a keepalive request each trackKeepalive.
func (t *tracker) awaitEnd(c *Conn) error {
	for {
		if err := c.AwaitEnd(trackKeepalive); err != nil || t.stopped() {
			return err
		}
		if _, err := c.Do(context.Background(), kmsg.NewPtrApiVersionsRequest(), trackTimeout); err != nil {
			return err
		}
	}
}
