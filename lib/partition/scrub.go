package partition

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mqproject/mq/lib/log"
)

// scrubIdlePoll is how often an idle scrubber looks for new bytes to check
// (logs recovered with parts unchecked); a partition opened wakes it at
// once (Manager.scrubWake), so that the damage a restarted node holds is
// found (and a follower's fetched again) within moments, not a poll later.
const scrubIdlePoll = 10 * time.Second

// scrubPass checks, at the pace given, every byte of every hosted
// partition's log that mqd has not checked since it started (see
// log.Log.Scrub), and returns how many bytes it read. Damage found is
// recorded and logged by the logs themselves.
func (m *Manager) scrubPass(ctx context.Context, pace func(context.Context, int) error) int64 {
	var total int64
	for _, h := range m.All() {
		st, err := h.Log().Scrub(ctx, pace)
		total += st.Bytes
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return total
		case !errors.Is(err, log.ErrClosed):
			m.log.Error("scrub", "partition", h.String(), "err", err)
		}
	}
	return total
}

// forgetChecks makes every hosted log unchecked again, for the next pass
// of the scrubber to read everything.
func (m *Manager) forgetChecks() {
	for _, h := range m.All() {
		h.Log().ForgetChecks()
	}
}

// runScrubber runs the scrubber in wg until ctx ends: passes at bytesPerSec over every log
// (log.scrub.bytes.per.sec; <= 0 turns it off) until everything mqd holds
// is checked, then an idle wait, and every interval
// (log.scrub.interval.ms) everything again.
func (m *Manager) runScrubber(ctx context.Context, wg *sync.WaitGroup, bytesPerSec int64, interval time.Duration) {
	if bytesPerSec <= 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		clk := m.clock
		throttle := log.NewThrottle(bytesPerSec, clk)
		idle := clk.NewTicker(scrubIdlePoll)
		defer idle.Stop()
		round := clk.Now()
		for {
			n := m.scrubPass(ctx, throttle.Wait)
			if ctx.Err() != nil {
				return
			}
			if n > 0 {
				m.log.Debug("scrub pass done", "bytes", n)
			}
			if interval > 0 && clk.Now().Sub(round) >= interval {
				m.forgetChecks()
				round = clk.Now()
				continue
			}
			if n == 0 {
				select {
				case <-ctx.Done():
					return
				case <-idle.C():
				case <-m.scrubWake:
				}
			}
		}
	}()
}
