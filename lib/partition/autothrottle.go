package partition

import (
	"log/slog"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/replica"
)

// The auto replication throttle (replication.throttle.auto.target.ms, an
// mq config) sets the rates of this node's two replication quotas itself,
// so that throttled replicas move as fast as they can while the acks=all
// produces this node leads stay within a target latency.
//
// Every autoInterval it drains the node's commit-latency window (how long
// each acks=all produce waited for the high-water mark) and, for each
// side, sets the rate from the one before and from what the side's
// throttled replicas moved in the window (used, per second):
//
//   - p99 above the target: half of used, or of the rate when that is
//     less: the cut bites at once even when the rate was far above what
//     the replicas moved;
//   - p99 at most autoHeadroom of the target, or no acks=all produce
//     waited: while the replicas used at least half the rate, or were
//     held back by it (they want more: a large batch's debt may keep them
//     from moving anything for a while), a quarter more (at least
//     autoFloor), up to the ceiling; otherwise twice
//     used, but at least half the rate, so that a rate nobody uses sinks
//     back within a few seconds rather than wait, high, for the next
//     catch-up to burst at it, and one window of a replica moving little
//     (a slow disk write, a fetch held) does not undo a climb;
//   - in between: unchanged.
//
// The rate stays between autoFloor (or the ceiling, when lower) and the
// ceiling: the configured *.replication.throttled.rate of the side, or
// none when that is unset. It starts at the floor: a catch-up begins
// gently and speeds up while the produces allow it (from 1 MiB/s to
// 100 MiB/s in about 18 steps, 9 s).
const (
	autoInterval = 500 * time.Millisecond
	// autoFloor is the least rate: a catch-up always makes progress.
	autoFloor = 1 << 20
	// autoHeadroom: the rate grows only while p99 is at most this share
	// of the target.
	autoHeadroom = 0.75
	// autoLogFactor: a rate that moved this many times up or down since
	// the rate last logged is logged.
	autoLogFactor = 4
)

// autoThrottle is the controller of the auto replication throttle. Its
// methods are safe for concurrent use: configure is called by the follow
// loop on every image, tick by the maintain loop every autoInterval.
type autoThrottle struct {
	clock   clock.Clock
	log     *slog.Logger
	latency *replica.LatencyWindow // the commit latencies, drained by tick

	mu     sync.Mutex
	target time.Duration // 0: off, the quotas keep the configured rates
	last   time.Time     // the previous tick, or when it was turned on
	sides  [2]autoSide
}

// autoSide is one quota the controller sets: its ceiling, the bytes its
// throttled replicas had moved at the previous tick, and the rate last
// logged.
type autoSide struct {
	name      string
	quota     *replica.Quota
	ceiling   int64 // replica.Unlimited: none
	lastBytes uint64
	lastHolds uint64
	logged    int64
}

// newAutoThrottle returns the controller of leader and follower, off, on
// c, logging to log (nil: silent).
func newAutoThrottle(c clock.Clock, log *slog.Logger, leader, follower *replica.Quota, latency *replica.LatencyWindow) *autoThrottle {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &autoThrottle{clock: c, log: log, latency: latency,
		sides: [2]autoSide{{name: "leader", quota: leader}, {name: "follower", quota: follower}}}
}

// configure applies the settings of an image: target (0: off) and the
// configured rates. Off, the quotas get the configured rates; turned on,
// each starts at the floor; on, a lowered ceiling applies at once.
func (a *autoThrottle) configure(target time.Duration, leaderRate, followerRate int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	wasOn := a.target > 0
	a.target = target
	now := a.clock.Now()
	for i, rate := range []int64{leaderRate, followerRate} {
		s := &a.sides[i]
		if rate < 0 {
			rate = replica.Unlimited
		}
		s.ceiling = rate
		switch {
		case target <= 0:
			s.quota.SetRate(rate)
			continue
		case !wasOn:
			start := min(int64(autoFloor), rate)
			s.quota.SetRate(start)
			counts := s.quota.Counts()
			s.lastBytes, s.lastHolds, s.logged = counts.Bytes, counts.Holds, start
		case s.quota.Rate() > rate:
			s.quota.SetRate(rate)
		}
	}
	if target > 0 && !wasOn {
		a.latency.Drain() // what came before is no measure of the new rates
		a.last = now
	}
}

// tick runs one step of the controller: nothing when it is off.
func (a *autoThrottle) tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	window := a.latency.Drain()
	if a.target <= 0 {
		return
	}
	now := a.clock.Now()
	elapsed := now.Sub(a.last)
	a.last = now
	if elapsed <= 0 {
		return
	}
	for i := range a.sides {
		s := &a.sides[i]
		counts := s.quota.Counts()
		used := int64(float64(counts.Bytes-s.lastBytes) / elapsed.Seconds())
		held := counts.Holds > s.lastHolds
		s.lastBytes, s.lastHolds = counts.Bytes, counts.Holds
		old := s.quota.Rate()
		rate := autoNextRate(old, s.ceiling, used, held, window, a.target)
		if rate == old {
			continue
		}
		s.quota.SetRate(rate)
		if rate >= s.logged*autoLogFactor || rate <= s.logged/autoLogFactor {
			a.log.Info("auto replication throttle", "side", s.name, "rate", rate, "last_logged_rate", s.logged,
				"used", used, "produce_p99", window.P99, "target", a.target)
			s.logged = rate
		}
	}
}

// autoNextRate is the controller's rule (see autoInterval): the rate
// after one with ceiling, when the throttled replicas used bytes per
// second, were held back by the quota or not, and acks=all produces
// waited as window says.
func autoNextRate(rate, ceiling, used int64, held bool, window replica.LatencySummary, target time.Duration) int64 {
	floor := min(int64(autoFloor), ceiling)
	switch {
	case window.Count > 0 && window.P99 > target:
		rate = min(rate, used) / 2
	case window.Count == 0 || float64(window.P99) <= autoHeadroom*float64(target):
		if used >= rate/2 || held {
			step := max(rate/4, autoFloor)
			rate = min(rate, ceiling-step) + step // min(rate+step, ceiling), without overflow
		} else {
			rate = max(2*used, rate/2)
		}
	}
	return min(max(rate, floor), ceiling)
}
