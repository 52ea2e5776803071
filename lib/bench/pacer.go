package bench

import (
	"context"
	"time"
)

// Pacer keeps a target rate: message i (from 0) is due at
// start + i/rate. A sender asks Due how many messages it owes now and
// Wait for the next one; falling behind is made up in a burst (bounded by
// the caller), so the average rate holds over the run. A zero or negative
// rate means no limit. A Pacer is used by one goroutine.
type Pacer struct {
	rate  float64
	start time.Time
	sent  int64
}

// NewPacer starts a pacer at start for rate messages per second.
func NewPacer(rate float64, start time.Time) *Pacer {
	return &Pacer{rate: rate, start: start}
}

// Unlimited reports whether the pacer lets everything through.
func (p *Pacer) Unlimited() bool { return p.rate <= 0 }

// dueAt is when message i is due.
func (p *Pacer) dueAt(i int64) time.Time {
	return p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
}

// Due returns how many messages are due at now and not yet sent (at most
// limit when limit > 0). Unlimited pacers always owe limit (or 1).
func (p *Pacer) Due(now time.Time, limit int64) int64 {
	if p.Unlimited() {
		return max(limit, 1)
	}
	elapsed := now.Sub(p.start)
	if elapsed < 0 {
		return 0
	}
	owed := int64(elapsed.Seconds()*p.rate) + 1 - p.sent
	if owed < 0 {
		owed = 0
	}
	if limit > 0 {
		owed = min(owed, limit)
	}
	return owed
}

// Sent records that n messages were sent.
func (p *Pacer) Sent(n int64) { p.sent += n }

// Next is when the next unsent message is due (the start time for an
// unlimited pacer).
func (p *Pacer) Next() time.Time {
	if p.Unlimited() {
		return p.start
	}
	return p.dueAt(p.sent)
}

// Wait blocks until at least one message is due and returns how many are
// (at most limit when limit > 0), or ctx's error.
func (p *Pacer) Wait(ctx context.Context, limit int64) (int64, error) {
	for {
		now := time.Now()
		if n := p.Due(now, limit); n > 0 {
			return n, nil
		}
		t := time.NewTimer(p.Next().Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}
