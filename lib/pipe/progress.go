package pipe

import (
	"fmt"
	"io"
	"time"
)

// Progress draws one self-overwriting line of counts on a terminal
// ("1234567 messages, 12.3 MB, 456789 msgs/s"). It shows nothing for work
// that ends within its delay, so small inputs stay quiet, and redraws at
// most every interval. Callers give it a terminal only; it is not safe for
// concurrent use.
type Progress struct {
	w        io.Writer
	now      func() time.Time
	delay    time.Duration // nothing is drawn before this much time has passed
	interval time.Duration // between redraws
	start    time.Time
	next     time.Time // the earliest time of the next redraw
	msgs     int64
	bytes    int64
	drawn    bool
}

// NewProgress returns a Progress drawing to w (nil: a Progress that does
// nothing); now is the clock (nil: time.Now).
func NewProgress(w io.Writer, now func() time.Time) *Progress {
	if w == nil {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	start := now()
	const delay = time.Second
	return &Progress{w: w, now: now, delay: delay, interval: 250 * time.Millisecond, start: start, next: start.Add(delay)}
}

// Add counts one message of n bytes.
func (p *Progress) Add(n int) {
	if p == nil {
		return
	}
	p.msgs++
	p.bytes += int64(n)
	if p.msgs&255 != 0 && p.drawn {
		return // look at the clock only now and then
	}
	if now := p.now(); !now.Before(p.next) {
		p.draw(now)
		p.next = now.Add(p.interval)
	}
}

// Done draws the final counts and ends the line, if anything was drawn.
func (p *Progress) Done() {
	if p == nil || !p.drawn {
		return
	}
	p.draw(p.now())
	fmt.Fprintln(p.w)
}

func (p *Progress) draw(now time.Time) {
	p.drawn = true
	fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(p.msgs, p.bytes, now.Sub(p.start)))
}

// progressLine is the text of the progress line.
func progressLine(msgs, bytes int64, elapsed time.Duration) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(msgs) / s
	}
	return fmt.Sprintf("%d messages, %.1f MB, %.0f msgs/s", msgs, float64(bytes)/1e6, rate)
}
