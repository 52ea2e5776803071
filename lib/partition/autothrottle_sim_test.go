package partition

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/replica"
)

// autoSim plays the auto throttle against a synthetic node, on a manual
// clock: a catch-up that moves all the leader quota allows, and
// acks=all produces that share a resource (the disk, the CPUs) with it.
// The resource serves capacity bytes a second; what the catch-up moves
// beyond that queues (backlog), and a produce waits
//
//	base + smooth*min(moved/(capacity*step), 1) + backlog/capacity
//
// so its latency rises with the rate up to the capacity, and past it
// grows for as long as the rate stays above it. Time goes in steps of
// simStep (the quota hands out its allowance in chunks of that much of
// the rate, replica.quotaQuantum), each with simProducesPerStep produces;
// the controller ticks every autoInterval, whatever that is.
type autoSim struct {
	t                *testing.T
	clock            *clock.Manual
	leader, follower *replica.Quota
	latency          *replica.LatencyWindow
	auto             *autoThrottle

	capacity     float64 // bytes per second
	base, smooth time.Duration

	backlog  float64         // bytes queued ahead of the produces
	waits    []time.Duration // the produces of the current window
	lastTick time.Time
	moved    int64         // bytes moved since the last tick
	windows  []simWindow   // one per tick
	stall    time.Duration // while above 0, no produce is answered (they all wait)
}

const (
	simStep            = 50 * time.Millisecond
	simProducesPerStep = 10
)

// simWindow is one window as the produces saw it.
type simWindow struct {
	p99  time.Duration // of the produces of the window; 0: none answered
	rate int64         // the leader quota's rate during the window
	used float64       // bytes per second moved during it
}

func newAutoSim(t *testing.T, capacity float64, base, smooth time.Duration) *autoSim {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	s := &autoSim{t: t, clock: clk, leader: replica.NewQuota(clk), follower: replica.NewQuota(clk),
		latency: new(replica.LatencyWindow), capacity: capacity, base: base, smooth: smooth, lastTick: clk.Now()}
	s.auto = newAutoThrottle(clk, nil, s.leader, s.follower, s.latency)
	return s
}

// run plays d.
func (s *autoSim) run(d time.Duration) {
	for end := s.clock.Now().Add(d); s.clock.Now().Before(end); {
		s.clock.Advance(simStep)
		// The catch-up takes all it is allowed and asks again at once:
		// held back until the next step.
		moved := s.leader.Reserve()
		s.leader.Settle(moved, moved)
		s.leader.Hold()
		s.moved += moved
		served := s.capacity * simStep.Seconds()
		s.backlog = max(0, s.backlog+float64(moved)-served)
		wait := s.base + time.Duration(float64(s.smooth)*min(float64(moved)/served, 1)) +
			time.Duration(s.backlog/s.capacity*float64(time.Second))
		if s.stall > 0 {
			s.stall -= simStep
		} else {
			for range simProducesPerStep {
				s.latency.Observe(wait)
				s.waits = append(s.waits, wait)
			}
		}
		if now := s.clock.Now(); now.Sub(s.lastTick) >= autoInterval {
			w := simWindow{rate: s.leader.Rate(), used: float64(s.moved) / now.Sub(s.lastTick).Seconds()}
			if len(s.waits) > 0 {
				slices.Sort(s.waits)
				w.p99 = s.waits[(len(s.waits)*99+99)/100-1] // the smallest with 99 % at or below it
			}
			s.windows = append(s.windows, w)
			s.waits, s.moved, s.lastTick = s.waits[:0], 0, now
			s.auto.tick()
		}
	}
}

// TestAutoThrottleKeepsItsBound: a catch-up that wants all it can get,
// on a node whose produces wait longer with the rate and queue past a
// capacity. After a first climb the throttle settles: most windows under
// the target and the catch-up moving at least a third of the capacity;
// and from the start, no window's p99 is above the bound the law states
// (autoBound: the target plus autoInterval/autoGrowth, the queue one
// step of an eighth past a tolerated rate builds in one window), nor two
// windows in a row above the target. The law before this one (500 ms
// windows, a quarter more a window, half of what was used at a cut) let a
// window reach 13 times the target here, and the one after it over the
// target too.
func TestAutoThrottleKeepsItsBound(t *testing.T) {
	const target = 10 * time.Millisecond
	for _, mib := range []float64{8, 40, 200} {
		capacity := mib * (1 << 20)
		t.Run(fmt.Sprintf("%.0fMiB/s", mib), func(t *testing.T) {
			// At the capacity a produce waits 7 ms: under 3/4 of the target,
			// so the throttle keeps raising the rate past it.
			s := newAutoSim(t, capacity, 2*time.Millisecond, 5*time.Millisecond)
			s.auto.configure(target, replica.Unlimited, replica.Unlimited)
			s.run(60 * time.Second)
			checkAutoBound(t, s, target)
			settled := s.windows[len(s.windows)/2:]
			var p99s []time.Duration
			var moved float64
			for _, w := range settled {
				p99s = append(p99s, w.p99)
				moved += w.used
			}
			slices.Sort(p99s)
			mean := moved / float64(len(settled))
			t.Logf("capacity %.0f MiB/s: settled at %.1f MiB/s on average, median window p99 %v, worst %v",
				capacity/(1<<20), mean/(1<<20), p99s[len(p99s)/2], p99s[len(p99s)-1])
			if median := p99s[len(p99s)/2]; median > target {
				t.Errorf("settled: median window p99 %v, over the target %v", median, target)
			}
			if mean < capacity/3 {
				t.Errorf("settled: the catch-up moved %.1f MiB/s, under a third of the capacity %.1f MiB/s", mean/(1<<20), capacity/(1<<20))
			}
		})
	}
}

// autoBound is the most a window's p99 may reach in the simulation: the
// target, and the queue that one window at an eighth past the capacity
// builds.
func autoBound(target time.Duration) time.Duration {
	return target + autoInterval/autoGrowth
}

// checkAutoBound fails t when a window of s went over autoBound, or two
// windows in a row over the target.
func checkAutoBound(t *testing.T, s *autoSim, target time.Duration) {
	t.Helper()
	bound, over := autoBound(target), 0
	for i, w := range s.windows {
		if w.p99 > bound {
			t.Errorf("window %d (%v): p99 %v over the bound %v at rate %.1f MiB/s (moved %.1f MiB/s)",
				i, time.Duration(i+1)*autoInterval, w.p99, bound, float64(w.rate)/(1<<20), w.used/(1<<20))
		}
		if w.p99 > target {
			over++
		} else {
			over = 0
		}
		if over > 1 {
			t.Errorf("window %d (%v): p99 %v, the %d. window in a row over the target %v", i, time.Duration(i+1)*autoInterval, w.p99, over, target)
		}
	}
}

// TestAutoThrottleCutsAtAStall: at a stall (produces were being answered,
// then none is: they all wait, which their p99 cannot show until they are
// answered) the rate drops to the floor at once, instead of rising as in a
// window with no produce at all.
func TestAutoThrottleCutsAtAStall(t *testing.T) {
	const target = 10 * time.Millisecond
	s := newAutoSim(t, 1<<30, time.Millisecond, time.Millisecond)
	s.auto.configure(target, replica.Unlimited, replica.Unlimited)
	s.run(3 * time.Second)
	high := s.leader.Rate()
	if high < 32<<20 {
		t.Fatalf("after 3 s with room to spare: rate %d", high)
	}
	s.stall = autoInterval
	s.run(autoInterval)
	if got := s.leader.Rate(); got != autoFloor {
		t.Errorf("after a window with no produce answered: rate %d (was %d), want the floor %d", got, high, autoFloor)
	}
}
