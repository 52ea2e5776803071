package replica

import (
	"testing"
	"time"

	"github.com/mqproject/mq/lib/clock"
)

// drain plays a throttled replica against q for d, in steps of tick:
// whenever there is an allowance it moves min(allowance, chunk) bytes,
// or a whole batch of size batch when that is larger. It returns the
// bytes moved.
func drain(q *Quota, c *clock.Manual, d, tick time.Duration, chunk, batch int64) int64 {
	var moved int64
	for end := c.Now().Add(d); c.Now().Before(end); c.Advance(tick) {
		for {
			a := q.Allowance()
			if a == 0 {
				q.Hold()
				break
			}
			n := max(min(a, chunk), batch)
			q.Take(n)
			moved += n
			if a == Unlimited {
				break
			}
		}
	}
	return moved
}

func TestQuotaHoldsTheRateWhateverTheBatchSize(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rate         int64
		chunk, batch int64
	}{
		{"small batches", 2 << 20, 1 << 20, 16 << 10},
		{"batches larger than the allowance", 2 << 20, 1 << 20, 1 << 20},
		{"batches larger than the burst", 1 << 20, 4 << 20, 3 << 20},
		{"slow", 1000, 1 << 20, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clock.NewManual(time.Unix(0, 0))
			q := NewQuota(c)
			q.SetRate(tc.rate)
			const secs = 20
			moved := drain(q, c, secs*time.Second, 10*time.Millisecond, tc.chunk, tc.batch)
			want := float64(tc.rate * secs)
			// One batch of debt at the end and the rounding of the
			// steps are all it may be off by.
			if got := float64(moved); got < want*0.97 || got > want*1.03+float64(tc.batch) {
				t.Fatalf("moved %d bytes in %d s at %d B/s: want about %.0f", moved, secs, tc.rate, want)
			}
			if c := q.Counts(); c.Bytes != uint64(moved) || c.Holds == 0 {
				t.Fatalf("counts %+v after moving %d bytes", c, moved)
			}
		})
	}
}

func TestQuotaUnlimitedGivesEverythingAndCountsNothing(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	q := NewQuota(c)
	if q.Limited() || q.Allowance() != Unlimited {
		t.Fatalf("a new Quota: limited %v, allowance %d", q.Limited(), q.Allowance())
	}
	q.Take(1 << 30)
	if got := q.Counts().Bytes; got != 0 {
		t.Fatalf("counted %d bytes without a limit", got)
	}
	q.SetRate(100)
	q.SetRate(-1)
	if q.Rate() != Unlimited {
		t.Fatalf("rate -1 is %d, want Unlimited", q.Rate())
	}
}

func TestQuotaStartsEmptyAndBurstsAtMostASecond(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	q := NewQuota(c)
	q.SetRate(1000)
	if a := q.Allowance(); a != 0 {
		t.Fatalf("allowance %d right after the limit was set, want 0", a)
	}
	if d := q.Hold(); d != quotaQuantum {
		t.Fatalf("hold %v, want the time to earn a quantum, %v", d, quotaQuantum)
	}
	c.Advance(time.Hour)
	if a := q.Allowance(); a != 1000 {
		t.Fatalf("allowance %d after an hour idle, want one second's worth (1000)", a)
	}
}

func TestQuotaRateChangeAppliesAtOnce(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	q := NewQuota(c)
	q.SetRate(1 << 20)
	first := drain(q, c, 5*time.Second, 10*time.Millisecond, 1<<20, 64<<10)
	q.SetRate(4 << 20)
	second := drain(q, c, 5*time.Second, 10*time.Millisecond, 1<<20, 64<<10)
	ratio := float64(second) / float64(first)
	if ratio < 3.6 || ratio > 4.4 {
		t.Fatalf("moved %d bytes at 1 MiB/s, then %d at 4 MiB/s: ratio %.2f, want about 4", first, second, ratio)
	}
	// Down to nothing: the debt is kept, no allowance comes, and holders
	// look again every quotaRecheck.
	q.SetRate(0)
	if a := q.Allowance(); a != 0 {
		t.Fatalf("allowance %d at rate 0", a)
	}
	if d := q.Hold(); d != quotaRecheck {
		t.Fatalf("hold %v at rate 0, want %v", d, quotaRecheck)
	}
	c.Advance(time.Minute)
	if a := q.Allowance(); a != 0 {
		t.Fatalf("allowance %d at rate 0 a minute later", a)
	}
}

func TestQuotaAllocatesNothing(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	q := NewQuota(c)
	q.SetRate(1 << 20)
	allocs := testing.AllocsPerRun(100, func() {
		c.Advance(time.Millisecond)
		if q.Allowance() > 0 {
			q.Take(1000)
		} else {
			q.Hold()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per use", allocs)
	}
}
