package broker

import (
	"context"
	"errors"
	"time"

	"github.com/mqproject/mq/lib/log"
)

// scrubIdlePoll is how often an idle scrubber looks for new bytes to check
// (logs recovered with parts unchecked); a partition opened wakes it at
// once (Broker.scrubWake), so that the damage a restarted node holds is
// found (and a follower's fetched again) within moments, not a poll later.
const scrubIdlePoll = 10 * time.Second

// scrubPass checks, at the pace given, every byte of every hosted
// partition's log that mqd has not checked since it started (see
// log.Log.Scrub), and returns how many bytes it read. Damage found is
// recorded and logged by the logs themselves.
func (b *Broker) scrubPass(ctx context.Context, pace func(context.Context, int) error) int64 {
	var total int64
	for _, h := range b.data.all() {
		st, err := h.Log().Scrub(ctx, pace)
		total += st.Bytes
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return total
		case !errors.Is(err, log.ErrClosed):
			b.log.Error("scrub", "partition", h.String(), "err", err)
		}
	}
	return total
}

// forgetChecks makes every hosted log unchecked again, for the next pass
// of the scrubber to read everything.
func (b *Broker) forgetChecks() {
	for _, h := range b.data.all() {
		h.Log().ForgetChecks()
	}
}

// startScrub runs the scrubber: passes at bytesPerSec over every log
// (log.scrub.bytes.per.sec; <= 0 turns it off) until everything mqd holds
// is checked, then an idle wait, and every interval
// (log.scrub.interval.ms) everything again.
func (d *Daemon) startScrub(bytesPerSec int64, interval time.Duration) {
	if bytesPerSec <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stopScrub = cancel
	d.scrubDone = make(chan struct{})
	go func() {
		defer close(d.scrubDone)
		clk := d.broker.clock
		throttle := log.NewThrottle(bytesPerSec, clk)
		idle := clk.NewTicker(scrubIdlePoll)
		defer idle.Stop()
		round := clk.Now()
		for {
			n := d.broker.scrubPass(ctx, throttle.Wait)
			if ctx.Err() != nil {
				return
			}
			if n > 0 {
				d.log.Debug("scrub pass done", "bytes", n)
			}
			if interval > 0 && clk.Now().Sub(round) >= interval {
				d.broker.forgetChecks()
				round = clk.Now()
				continue
			}
			if n == 0 {
				select {
				case <-ctx.Done():
					return
				case <-idle.C():
				case <-d.broker.scrubWake:
				}
			}
		}
	}()
}
