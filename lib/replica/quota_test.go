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
			q.Settle(0, n)
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
	q.Settle(0, 1<<30)
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
			q.Settle(0, 1000)
		} else {
			q.Hold()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per use", allocs)
	}
}

// TestSharesInFlightNeverSpendTheSameBytes: two requests served at once
// (two followers' fetches on a leader) do not both get the allowance:
// the second finds the bucket empty until the first settles and gives
// back what it did not move; a request moves at most its allowance and
// one batch, the first whole.
func TestSharesInFlightNeverSpendTheSameBytes(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	q := NewQuota(c)
	q.SetRate(100_000)
	c.Advance(100 * time.Millisecond) // 10 kB

	a, b := q.Share(), q.Share()
	if n := a.Limit(1 << 20); n != 10_000 {
		t.Fatalf("first request may read %d, want the 10 kB allowance", n)
	}
	if n := b.Limit(1 << 20); n != 0 || b.Held() <= 0 {
		t.Fatalf("second request, while the first is in flight, may read %d (held %v), want nothing", n, b.Held())
	}
	a.Moved(4_000)
	if n := a.Limit(1 << 20); n != 6_000 {
		t.Fatalf("after 4 kB the first request may read %d more, want 6 kB", n)
	}
	a.Moved(7_000) // a whole batch past the allowance
	if n := a.Limit(1 << 20); n != 0 {
		t.Fatalf("past its allowance the first request may read %d more", n)
	}
	a.Settle()
	b.Settle()
	if debt := -tokensOf(q); debt != 1_000 {
		t.Fatalf("the quota owes %v, want the 1 kB past the allowance", debt)
	}
	if c := q.Counts(); c.Bytes != 11_000 {
		t.Fatalf("counted %d bytes, want 11000", c.Bytes)
	}

	// What a request reserved and did not move goes back.
	c.Advance(time.Second)
	s := q.Share()
	got := s.Limit(1 << 20)
	s.Moved(2_000)
	s.Settle()
	if left := tokensOf(q); left != float64(got-2_000) {
		t.Fatalf("after moving 2 kB of %d the bucket holds %v", got, left)
	}
	q.Return(2_000) // not sent after all
	if left := tokensOf(q); left != float64(got) {
		t.Fatalf("after giving the 2 kB back the bucket holds %v, want %d", left, got)
	}
}

func tokensOf(q *Quota) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tokens
}
