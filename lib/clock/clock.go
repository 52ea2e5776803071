// Package clock is the time source of mq's server packages for what they
// time themselves, so that tests drive time with a Manual clock instead of
// sleeping:
//
//	c := clock.NewManual(start)
//	l, err := log.Open(dir, cfg, log.Options{Clock: c})
//	c.Advance(8 * 24 * time.Hour) // retention now sees week-old segments
//
// A Clock is passed in (nil means Real) at:
//
//   - log.Options: segment roll times and age, retention, the flush
//     interval, damage and health times; log.NewThrottle paces the
//     scrubber on one;
//   - replica.Config: follower lag, ISR changes, resignation retries;
//   - group.Config: sessions, rebalances, offset expiry;
//   - node.Config: one clock for the whole node, which it gives to the
//     controller, the partitions, the coordinators and the broker, and its
//     own heartbeats and controlled shutdown run on;
//   - partition.Config: the logs and replicas it opens (segment age,
//     retention, flushes, follower lag), the replica fetchers' backoffs,
//     the ISR checks, high-water mark checkpoints, and the log tasks
//     (retention runs, the cleaner, the scrubber's pace);
//   - broker.Config: fetch long-polls and sessions;
//   - coordinator.SetConfig: the coordinators of one node: the group and
//     transaction coordinators, the share-partitions (lib/queue's Leader;
//     its pure state machines take the time as an argument);
//   - controller.Config: broker liveness (heartbeat times, session expiry
//     and fencing, the wait before an unclean election), the active
//     controller's periodic checks including the leader-imbalance check,
//     its retry backoffs, and Open's wait for its election.
//
// Wall time stays where the time is not mq's to move, or is measured
// rather than waited for:
//
//   - network I/O deadlines, which net.Conn takes as wall time: lib/server's
//     idle timeouts, the brokers' peer connections, the controller's RPC and
//     Raft connections;
//   - hashicorp/raft's own timers (elections, heartbeats, leases), and the
//     controller's CatchUp, which polls how far Raft has applied;
//   - context deadlines (how long a request or command may take), which
//     the context package keeps on wall time and which end in network I/O
//     or in Raft;
//   - durations measured for logs and metrics (request latency, fsync and
//     load times);
//   - lib/server's pause after a failed accept, which waits out the
//     operating system (lib/server takes no clock);
//
// Implementations are safe for concurrent use.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that delivers the time on its channel once
	// d has passed, like time.NewTimer.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker delivering the time every d, like
	// time.NewTicker (a slow receiver misses ticks; none pile up).
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f once d has passed: in its own goroutine (Real) or
	// in the goroutine advancing the time (Manual).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending timer or AfterFunc call.
type Timer interface {
	// C is the channel a NewTimer timer delivers on (nil for AfterFunc).
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it did.
	Stop() bool
	// Reset makes the timer fire d from now, and reports whether it had
	// been pending.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks like time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// Manual is a Clock for tests: time moves only when Advance or Set is
// called. Timers and tickers due by then fire in order of their due time
// (then of their creation): a channel timer or ticker delivers (at most one
// pending value, like the time package's), an AfterFunc runs in the
// goroutine that moved the time.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	pending []*manualTimer
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing at Now()+d.
func (c *Manual) NewTimer(d time.Duration) Timer {
	return c.add(&manualTimer{c: c, ch: make(chan time.Time, 1)}, d)
}

// NewTicker returns a ticker firing every d of the clock's time.
func (c *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker interval")
	}
	return manualTicker{c.add(&manualTimer{c: c, ch: make(chan time.Time, 1), every: d}, d)}
}

// manualTicker is a repeating manualTimer with time.Ticker's Stop.
type manualTicker struct{ t *manualTimer }

func (t manualTicker) C() <-chan time.Time { return t.t.ch }
func (t manualTicker) Stop()               { t.t.Stop() }

// AfterFunc schedules f at Now()+d.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	return c.add(&manualTimer{c: c, f: f}, d)
}

func (c *Manual) add(t *manualTimer, d time.Duration) *manualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.schedule(t, d)
	return t
}

// schedule makes t pending at now+d. Called with mu held.
func (c *Manual) schedule(t *manualTimer, d time.Duration) {
	c.seq++
	t.when, t.seq = c.now.Add(d), c.seq
	if !t.pending {
		t.pending = true
		c.pending = append(c.pending, t)
	}
}

// Advance moves the time forward by d, firing every timer that falls due on
// the way, at its due time.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the time to t (back too; nothing fires going back), firing
// every timer due by then.
func (c *Manual) Set(t time.Time) {
	for {
		c.mu.Lock()
		sort.Slice(c.pending, func(i, j int) bool {
			a, b := c.pending[i], c.pending[j]
			if !a.when.Equal(b.when) {
				return a.when.Before(b.when)
			}
			return a.seq < b.seq
		})
		if len(c.pending) == 0 || c.pending[0].when.After(t) {
			c.now = t
			c.mu.Unlock()
			return
		}
		tm := c.pending[0]
		c.pending = c.pending[1:]
		tm.pending = false
		if tm.when.After(c.now) {
			c.now = tm.when
		}
		now := c.now
		if tm.every > 0 {
			c.schedule(tm, tm.every)
		}
		c.mu.Unlock()
		if tm.f != nil {
			tm.f()
			continue
		}
		select {
		case tm.ch <- now:
		default:
		}
	}
}

// Pending returns how many timers, tickers and AfterFuncs wait: for a test
// to know that the code under test is waiting before it moves the time.
func (c *Manual) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

type manualTimer struct {
	c       *Manual
	ch      chan time.Time // nil for AfterFunc
	f       func()
	every   time.Duration // > 0 for a ticker
	when    time.Time
	seq     int
	pending bool // guarded by c.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if !t.pending {
		return false
	}
	for i, o := range t.c.pending {
		if o == t {
			t.c.pending = append(t.c.pending[:i], t.c.pending[i+1:]...)
			break
		}
	}
	t.pending = false
	return true
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.pending
	t.c.schedule(t, d)
	return was
}
