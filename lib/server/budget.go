package server

import (
	"math"
	"sync"
)

// budget is the allowance of request bytes the server holds in memory
// across all its connections (Config.QueuedMaxRequestBytes, Kafka's
// queued.max.request.bytes). A reader reserves a frame's whole cost once
// it has read the size prefix, before it allocates anything, and the
// reservation is given back once the server no longer references the
// frame: when the response has been written or dropped, or at once when
// the frame is refused or cut off.
//
// Reserving the whole frame up front, rather than charging bytes as they
// arrive, is what keeps the bound free of deadlock: frames charged piece by
// piece could fill the budget half read, each waiting for room that only
// another one's completion would free. A reserved frame can always be
// completed. The price is that a peer holds its reservation while it
// dawdles over the body; the body deadline (Config.RequestBodyTimeout)
// bounds that.
//
// Small frames (at most smallFrame bytes) are granted as soon as they
// fit, passing large ones that wait, so heartbeats, metadata and ordinary
// produce batches never queue behind a large frame. Large frames are
// granted in arrival order, and together hold at most largeLimit, which
// keeps an eighth of the budget for small ones: large frames that hold
// their reservations (or trickle) cannot stop the small requests of other
// clients. (Small frames may take the whole budget, so a flood of them can
// keep a large frame waiting; they are answered quickly and give it back.)
//
// Large frames of one source (a peer IP address, or one Unix socket
// connection) together hold at most shareLimit: half of largeLimit, but
// room for one frame of the largest size always. A large frame over its
// source's share waits without holding up the large frames of other
// sources behind it, so a peer that announces large frames on many
// connections and sends nothing holds one share at most, and the other
// clients' large requests are served meanwhile.
//
// Its methods are safe for concurrent use.
type budget struct {
	limit      int64 // bytes that may be reserved at once
	largeLimit int64 // of which by large frames
	shareLimit int64 // of which by the large frames of one source

	mu      sync.Mutex
	used    int64 // bytes reserved
	large   int64 // of used, by large frames
	peak    int64 // the most ever reserved at once (tests)
	waits   int64 // reservations that had to wait (tests)
	waiters []*budgetWaiter
}

// budgetSource is where frames come from: the connections of one peer
// IP address, or one Unix socket connection. Its large field is guarded by
// the budget's mutex.
type budgetSource struct {
	large int64 // bytes its large frames hold
}

// budgetWaiter is a reservation waiting for room, in arrival order.
type budgetWaiter struct {
	n       int64
	src     *budgetSource
	granted bool          // set under budget.mu
	ready   chan struct{} // closed once granted
}

// newBudget returns a budget of limit bytes (negative: no bound) for frames
// of at most maxFrame bytes; limit is at least maxFrame.
func newBudget(limit int64, maxFrame int32) *budget {
	if limit < 0 {
		limit = math.MaxInt64
	}
	// At least one frame of the largest size must fit among large ones.
	largeLimit := max(limit-limit/8, min(limit, int64(maxFrame)))
	shareLimit := max(largeLimit/2, min(largeLimit, int64(maxFrame)))
	return &budget{limit: limit, largeLimit: largeLimit, shareLimit: shareLimit}
}

// frameCost is what a frame of size bytes is charged: a small frame its
// pool class (what a pooled buffer holds; a frame read into an exact buffer
// is charged the same, which costs at most 1 KiB or a factor of two), a
// large one its size (a pooled buffer holds less than 1 MiB more: its
// charge never exceeds the budget a frame of the largest size must fit).
func frameCost(size int) int64 {
	if i := frameClass(size); i >= 0 {
		return 1 << (10 + i)
	}
	return int64(size)
}

func isLarge(n int64) bool { return n > smallFrame }

// fits reports whether n bytes may be reserved now as far as the whole
// budget goes; b.mu is held.
func (b *budget) fits(n int64) bool {
	if n > b.limit-b.used {
		return false
	}
	return !isLarge(n) || n <= b.largeLimit-b.large
}

// overShare reports whether n bytes would take src over its share; b.mu
// is held.
func (b *budget) overShare(n int64, src *budgetSource) bool {
	return isLarge(n) && src != nil && n > b.shareLimit-src.large
}

// take reserves n bytes for src; b.mu is held, fits(n) and not overShare.
func (b *budget) take(n int64, src *budgetSource) {
	b.used += n
	if isLarge(n) {
		b.large += n
		if src != nil {
			src.large += n
		}
	}
	b.peak = max(b.peak, b.used)
}

// acquire reserves n bytes for src (nil: no share to keep to), waiting
// for room until stop or abort is closed. It reports whether the bytes
// were reserved; the caller gives them back with release.
func (b *budget) acquire(n int64, src *budgetSource, stop, abort <-chan struct{}) bool {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) && !b.overShare(n, src) {
		b.take(n, src)
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, src: src, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.grant()
	if w.granted {
		b.mu.Unlock()
		return true
	}
	b.waits++
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-stop:
	case <-abort:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		// Granted as we gave up: hand the bytes on.
		b.give(n, src)
		return false
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	// A large waiter leaving may let later large ones in.
	b.grant()
	return false
}

// release gives back n bytes reserved by acquire for src.
func (b *budget) release(n int64, src *budgetSource) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.give(n, src)
	b.mu.Unlock()
}

// give returns n bytes of src and grants what now fits; b.mu is held.
func (b *budget) give(n int64, src *budgetSource) {
	b.used -= n
	if isLarge(n) {
		b.large -= n
		if src != nil {
			src.large -= n
		}
	}
	if len(b.waiters) > 0 {
		b.grant()
	}
}

// grant reserves room for the waiters that fit, in order: every small one
// that fits, and large ones until the first that does not fit the budget
// (large frames go in arrival order), passing over those whose source has
// used its share. b.mu is held.
func (b *budget) grant() {
	largeBlocked := false
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		switch {
		case isLarge(w.n) && largeBlocked:
		case b.overShare(w.n, w.src):
		case b.fits(w.n):
			b.take(w.n, w.src)
			w.granted = true
			close(w.ready)
			continue
		case isLarge(w.n):
			largeBlocked = true
		}
		kept = append(kept, w)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}

// budgetStats is what tests and metrics see of a budget.
type budgetStats struct {
	used         int64 // bytes reserved now
	peak         int64 // the most ever reserved at once
	waits        int64 // reservations that had to wait
	waiting      int   // reservations waiting now
	waitingBytes int64 // their bytes
}

func (b *budget) stats() budgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := budgetStats{used: b.used, peak: b.peak, waits: b.waits, waiting: len(b.waiters)}
	for _, w := range b.waiters {
		st.waitingBytes += w.n
	}
	return st
}
