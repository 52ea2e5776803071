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
// throttled replicas moved in the last autoUseWindows windows (used, per
// second). The law is additive-increase, multiplicative-decrease in the
// manner of TCP's congestion control, with a threshold (thresh)
// remembered per side:
//
//   - p99 above the target, or no acks=all produce answered in a window
//     that follows one of autoBusy or more (a stall: they are all
//     waiting): thresh becomes half of used, or of the rate when that is
//     less, and the rate drops to the floor. A window over the target while the
//     rate is already at the floor (the backlog of the window before
//     draining, or a load that is not replication's) changes nothing.
//   - p99 at most autoHeadroom of the target, or no acks=all produce in
//     a window that is no stall: while the replicas used at least
//     half the rate, or were held back by it (they want more: a large
//     batch's debt may keep them from moving anything for a while), the
//     rate doubles while under thresh (up to it: half of what was too
//     much, which the produces bore), and above thresh grows by an eighth
//     (autoGrowth), at least autoFloor; otherwise it sinks to twice used,
//     but at least half the rate, so that a rate nobody uses sinks back
//     within a few windows rather than wait, high, for the next catch-up
//     to burst at it;
//   - in between: unchanged.
//
// So a rate is never more than an eighth above one under which the
// produces met autoHeadroom of the target (or above thresh, half a rate
// they did not meet), and a window over the target is followed by the
// floor: the extra load that reaches the produces is at most an eighth of
// a tolerated rate, for one window. The rate stays between autoFloor (or
// the ceiling, when lower) and the ceiling: the configured
// *.replication.throttled.rate of the side, or none when that is unset.
// It starts at the floor with no thresh: a catch-up begins gently (from
// 1 MiB/s to 100 MiB/s in about 29 windows, 3 s).
const (
	autoInterval = 100 * time.Millisecond
	// autoFloor is the least rate: a catch-up always makes progress.
	autoFloor = 1 << 20
	// autoHeadroom: the rate grows only while p99 is at most this share
	// of the target.
	autoHeadroom = 0.75
	// autoGrowth: above thresh, the rate grows by 1/autoGrowth a window.
	autoGrowth = 8
	// autoBusy is the least acks=all produces in a window for the next
	// one, empty, to count as a stall: a producer that sends a few a
	// second leaves windows empty without any stall.
	autoBusy = 8
	// autoUseWindows: used and held are counted over this many windows
	// (500 ms), not one: a follower's fetch may take longer than a
	// window, so that a catch-up held by the rate would seem, in the
	// windows between its fetches, to use nothing.
	autoUseWindows = 5
	// autoLogFactor: a rate that moved this many times up or down since
	// the rate last logged is logged, at most once every autoLogEvery: a
	// throttle that cuts to the floor and climbs back every second or so
	// would otherwise log twice a second.
	autoLogFactor = 4
	autoLogEvery  = 5 * time.Second
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
	busy   bool          // the previous window counted autoBusy acks=all produces or more
	sides  [2]autoSide
}

// autoSide is one quota the controller sets: its ceiling, its thresh,
// what its quota had counted at each of the last autoUseWindows ticks,
// and the rate last logged.
type autoSide struct {
	name     string
	quota    *replica.Quota
	ceiling  int64 // replica.Unlimited: none
	thresh   int64 // 0: none yet
	past     [autoUseWindows]autoCounts
	next     int // past[next] is the oldest
	logged   int64
	loggedAt time.Time
}

// autoCounts is what a quota had counted at a tick.
type autoCounts struct {
	replica.QuotaCounts
	at time.Time
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
			s.past = [autoUseWindows]autoCounts{}
			for j := range s.past {
				s.past[j] = autoCounts{s.quota.Counts(), now}
			}
			s.logged, s.thresh = start, 0
		case s.quota.Rate() > rate:
			s.quota.SetRate(rate)
		}
	}
	if target > 0 && !wasOn {
		a.latency.Drain() // what came before is no measure of the new rates
		a.last, a.busy = now, false
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
	stalled := window.Count == 0 && a.busy
	a.busy = window.Count >= autoBusy
	for i := range a.sides {
		s := &a.sides[i]
		counts, oldest := s.quota.Counts(), s.past[s.next]
		s.past[s.next] = autoCounts{counts, now}
		s.next = (s.next + 1) % autoUseWindows
		used := int64(float64(counts.Bytes-oldest.Bytes) / now.Sub(oldest.at).Seconds())
		held := counts.Holds > oldest.Holds
		old := s.quota.Rate()
		rate, thresh := autoNextRate(autoStep{rate: old, thresh: s.thresh, ceiling: s.ceiling, used: used, held: held,
			window: window, stalled: stalled, target: a.target})
		s.thresh = thresh
		if rate == old {
			continue
		}
		s.quota.SetRate(rate)
		if (rate >= s.logged*autoLogFactor || rate <= s.logged/autoLogFactor) && now.Sub(s.loggedAt) >= autoLogEvery {
			a.log.Info("auto replication throttle", "side", s.name, "rate", rate, "last_logged_rate", s.logged,
				"used", used, "thresh", thresh, "produce_p99", window.P99, "stalled", stalled, "target", a.target)
			s.logged, s.loggedAt = rate, now
		}
	}
}

// autoStep is what one step of the controller's law reads for one side.
type autoStep struct {
	rate, thresh, ceiling int64 // thresh 0: none yet
	used                  int64 // bytes per second the throttled replicas moved
	held                  bool  // the quota held one of them back
	window                replica.LatencySummary
	stalled               bool // no produce answered, some were in the window before
	target                time.Duration
}

// autoNextRate is the controller's law (see autoInterval): the rate and
// thresh after one step.
func autoNextRate(st autoStep) (rate, thresh int64) {
	rate, thresh = st.rate, st.thresh
	floor := min(int64(autoFloor), st.ceiling)
	switch {
	case st.stalled || st.window.Count > 0 && st.window.P99 > st.target:
		if rate > floor {
			thresh = max(min(rate, st.used)/2, floor)
			rate = floor
		}
	case st.window.Count == 0 || float64(st.window.P99) <= autoHeadroom*float64(st.target):
		switch {
		case st.used < rate/2 && !st.held:
			rate = max(2*st.used, rate/2)
		case rate < thresh:
			rate = min(2*rate, thresh)
		default:
			step := max(rate/autoGrowth, autoFloor)
			rate = min(rate, st.ceiling-step) + step // min(rate+step, ceiling), without overflow
		}
	}
	return min(max(rate, floor), st.ceiling), thresh
}
