package log

import (
	"sync"
	"time"
)

// Clock is the log's source of time: append timestamps (LogAppendTime),
// segment age (segment.ms), retention (retention.ms) and the background
// flusher's ticks (FlushInterval). Implementations must be safe for
// concurrent use.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks like time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// ManualClock is a Clock for tests: time moves only when Advance or Set is
// called, and tickers fire then (at most one pending tick each, like
// time.Ticker).
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*manualTicker
}

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the tickers that are due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// Set moves the clock to t (forward or back) and fires the tickers that are due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.fire()
}

func (c *ManualClock) fire() {
	live := c.tickers[:0]
	for _, t := range c.tickers {
		if t.stopped {
			continue
		}
		live = append(live, t)
		if !c.now.Before(t.next) {
			select {
			case t.c <- c.now:
			default:
			}
			for !c.now.Before(t.next) {
				t.next = t.next.Add(t.d)
			}
		}
	}
	c.tickers = live
}

// NewTicker returns a ticker firing every d of manual time.
func (c *ManualClock) NewTicker(d time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTicker{clock: c, c: make(chan time.Time, 1), d: d, next: c.now.Add(d)}
	c.tickers = append(c.tickers, t)
	return t
}

type manualTicker struct {
	clock   *ManualClock
	c       chan time.Time
	d       time.Duration
	next    time.Time
	stopped bool // guarded by clock.mu
}

func (t *manualTicker) C() <-chan time.Time { return t.c }

func (t *manualTicker) Stop() {
	t.clock.mu.Lock()
	t.stopped = true
	t.clock.mu.Unlock()
}
