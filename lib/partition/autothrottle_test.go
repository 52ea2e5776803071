package partition

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
	"github.com/mqproject/mq/lib/replica"
)

// TestAutoNextRateRule: one step of the auto throttle's law.
func TestAutoNextRateRule(t *testing.T) {
	const target = 20 * time.Millisecond
	slow := replica.LatencySummary{Count: 100, P99: 30 * time.Millisecond}
	fast := replica.LatencySummary{Count: 100, P99: 5 * time.Millisecond}
	near := replica.LatencySummary{Count: 100, P99: 18 * time.Millisecond}
	none := replica.LatencySummary{}
	const unl = replica.Unlimited
	for _, tc := range []struct {
		name                        string
		rate, thresh, ceiling, used int64
		held, stalled               bool
		window                      replica.LatencySummary
		want, wantThresh            int64
	}{
		{"slow: the floor, thresh half of what was used", 64 << 20, 0, 100 << 20, 40 << 20, false, false, slow, autoFloor, 20 << 20},
		{"slow, using less than the rate: thresh half of what was used", 1 << 30, 0, unl, 8 << 20, false, false, slow, autoFloor, 4 << 20},
		{"slow, using more than the rate (a batch's debt): thresh half the rate", 8 << 20, 0, 100 << 20, 9 << 20, false, false, slow, autoFloor, 4 << 20},
		{"slow, little used: thresh never below the floor", 3 << 20, 0, 100 << 20, 1 << 20, false, false, slow, autoFloor, autoFloor},
		{"slow at the floor (the window before draining): thresh kept", autoFloor, 20 << 20, 100 << 20, autoFloor, false, false, slow, autoFloor, 20 << 20},
		{"slow, ceiling below the floor: the ceiling", 512 << 10, 0, 512 << 10, 512 << 10, false, false, slow, 512 << 10, 0},
		{"a stall (none answered after a busy window): the floor", 64 << 20, 0, 100 << 20, 64 << 20, false, true, none, autoFloor, 32 << 20},
		{"fast and used, no thresh: an eighth more", 16 << 20, 0, 100 << 20, 16 << 20, false, false, fast, 18 << 20, 0},
		{"fast and used, above thresh: an eighth more", 16 << 20, 8 << 20, 100 << 20, 16 << 20, false, false, fast, 18 << 20, 8 << 20},
		{"fast and used, under thresh: twice", 4 << 20, 20 << 20, 100 << 20, 4 << 20, false, false, fast, 8 << 20, 20 << 20},
		{"fast and used, under thresh: twice, up to thresh", 12 << 20, 20 << 20, 100 << 20, 12 << 20, false, false, fast, 20 << 20, 20 << 20},
		{"fast and used, small: the floor more", 2 << 20, 0, 100 << 20, 2 << 20, false, false, fast, 3 << 20, 0},
		{"fast and used: never above the ceiling", 96 << 20, 0, 100 << 20, 96 << 20, false, false, fast, 100 << 20, 0},
		{"fast, under thresh: never above the ceiling", 40 << 20, 90 << 20, 50 << 20, 40 << 20, false, false, fast, 50 << 20, 90 << 20},
		{"fast, no ceiling: an eighth more", 16 << 20, 0, unl, 16 << 20, false, false, fast, 18 << 20, 0},
		{"fast, near the top of an unlimited ceiling: no overflow", unl - 1, 0, unl, unl, false, false, fast, unl, 0},
		{"fast and little used: twice what was used", 8 << 20, 0, 100 << 20, 3 << 20, false, false, fast, 6 << 20, 0},
		{"fast and idle: half the rate", 8 << 20, 0, 100 << 20, 0, false, false, fast, 4 << 20, 0},
		{"fast and idle, low: the floor", 3 << 19, 0, 100 << 20, 0, false, false, fast, autoFloor, 0},
		{"fast, nothing moved, held back (a debt): an eighth more", 16 << 20, 0, 100 << 20, 0, true, false, fast, 18 << 20, 0},
		{"slow, held back: the floor", 8 << 20, 0, 100 << 20, 2 << 20, true, false, slow, autoFloor, autoFloor},
		{"no acks=all produce, no stall, used: an eighth more", 16 << 20, 0, 100 << 20, 16 << 20, false, false, none, 18 << 20, 0},
		{"near the target: unchanged", 8 << 20, 0, 100 << 20, 8 << 20, false, false, near, 8 << 20, 0},
		{"a ceiling lowered below the rate: the ceiling", 80 << 20, 0, 50 << 20, 80 << 20, false, false, near, 50 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := autoStep{rate: tc.rate, thresh: tc.thresh, ceiling: tc.ceiling, used: tc.used, held: tc.held,
				window: tc.window, stalled: tc.stalled, target: target}
			if got, gotThresh := autoNextRate(st); got != tc.want || gotThresh != tc.wantThresh {
				t.Errorf("autoNextRate(%+v) = %d, thresh %d; want %d, thresh %d", st, got, gotThresh, tc.want, tc.wantThresh)
			}
		})
	}
}

// autoRig is an autoThrottle on a manual clock, its quotas and latency
// window, with replicas that move all the leader quota lets them.
type autoRig struct {
	t                *testing.T
	clock            *clock.Manual
	leader, follower *replica.Quota
	latency          *replica.LatencyWindow
	auto             *autoThrottle
}

func newAutoRig(t *testing.T) *autoRig {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	r := &autoRig{t: t, clock: clk, leader: replica.NewQuota(clk), follower: replica.NewQuota(clk), latency: new(replica.LatencyWindow)}
	r.auto = newAutoThrottle(clk, nil, r.leader, r.follower, r.latency)
	return r
}

// window plays one autoInterval: the leader side's throttled replicas
// move all their quota allows and ask for more (the follower side's
// nothing), acks=all
// produces take p99, then the controller ticks. It returns the leader
// side's rate after the tick.
func (r *autoRig) window(p99 time.Duration) int64 {
	for range 10 {
		r.clock.Advance(autoInterval / 10)
		if n := r.leader.Allowance(); n > 0 {
			r.leader.Settle(0, n)
		}
		r.leader.Hold() // they want more
	}
	for range 99 {
		r.latency.Observe(p99 / 10)
	}
	r.latency.Observe(p99)
	r.latency.Observe(p99)
	r.auto.tick()
	return r.leader.Rate()
}

// TestAutoThrottleYieldsToSlowProducesAndRecovers: turned on, the rates
// start at the floor; with a low commit latency the leader side (whose
// replicas move all it allows) climbs to the ceiling and never above,
// while the idle follower side stays at the floor; under a latency above
// the target it falls to the floor and never below, and recovers to the
// ceiling when the latency is low again; turned off, the configured
// rates are back. A window over the target drops the rate to the floor
// at once; the ones after it leave it there.
func TestAutoThrottleYieldsToSlowProducesAndRecovers(t *testing.T) {
	r := newAutoRig(t)
	var logged bytes.Buffer
	r.auto.log = slog.New(slog.NewTextHandler(&logged, nil))
	const target, ceiling = 20 * time.Millisecond, 64 << 20
	r.auto.configure(target, ceiling, replica.Unlimited)
	if got, gotF := r.leader.Rate(), r.follower.Rate(); got != autoFloor || gotF != autoFloor {
		t.Fatalf("turned on: rates %d and %d, want the floor %d", got, gotF, autoFloor)
	}

	prev, changes := r.leader.Rate(), 0
	climb := func(what string) {
		t.Helper()
		ticks := 0
		for prev < ceiling {
			rate := r.window(target / 4)
			if rate <= prev || rate > ceiling {
				t.Fatalf("%s, fast window %d: rate %d after %d (ceiling %d)", what, ticks, rate, prev, ceiling)
			}
			prev = rate
			ticks++
			changes++
			if ticks > 40 {
				t.Fatalf("%s: still at %d after 40 fast windows", what, prev)
			}
		}
		t.Logf("%s: from the floor to the ceiling in %d windows", what, ticks)
		for range 5 {
			if rate := r.window(target / 4); rate != ceiling {
				t.Fatalf("%s, fast windows at the ceiling: rate %d, want %d", what, rate, ceiling)
			}
		}
		// The follower side stayed idle: nothing used, nothing gained.
		if got := r.follower.Rate(); got != autoFloor {
			t.Errorf("%s: the idle follower side at %d, want the floor", what, got)
		}
	}
	climb("turned on")

	fell := 0
	for i := range 20 {
		rate := r.window(4 * target)
		if rate < autoFloor || rate > prev {
			t.Fatalf("slow window %d: rate %d after %d (floor %d)", i, rate, prev, autoFloor)
		}
		if rate < prev {
			fell++
			changes++
		}
		prev = rate
	}
	if prev != autoFloor || fell != 1 {
		t.Fatalf("after 20 slow windows: rate %d after %d cuts, want one cut to the floor %d", prev, fell, autoFloor)
	}
	// Near the target: held.
	if rate := r.window(target * 9 / 10); rate != prev {
		t.Fatalf("a window near the target moved the rate from %d to %d", prev, rate)
	}
	climb("latency low again")

	// Logged when the rate moved by a lot, not at every change.
	lines := strings.Count(logged.String(), "auto replication throttle")
	if lines == 0 || lines >= changes/2 {
		t.Errorf("%d log lines for %d changes of the rate:\n%s", lines, changes, logged.String())
	}

	// A lower ceiling applies at once.
	r.auto.configure(target, 8<<20, replica.Unlimited)
	if got := r.leader.Rate(); got != 8<<20 {
		t.Errorf("ceiling lowered to 8 MiB/s: rate %d", got)
	}
	// Off: the configured rates.
	r.auto.configure(0, 5<<20, replica.Unlimited)
	if got, gotF := r.leader.Rate(), r.follower.Rate(); got != 5<<20 || gotF != replica.Unlimited {
		t.Errorf("turned off: rates %d and %d, want the configured %d and unlimited", got, gotF, 5<<20)
	}
	if rate := r.window(4 * target); rate != 5<<20 {
		t.Errorf("turned off, a slow window changed the rate to %d", rate)
	}
}
