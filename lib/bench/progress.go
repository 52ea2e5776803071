package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// startProgress prints "\rWHAT: DONE/TOTAL msgs, RATE msgs/s" to w about
// once a second until the returned stop is called (any number of times);
// stop ends the line. Nothing is printed when w is nil.
func startProgress(w io.Writer, what string, total int64, done func() int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last, lastAt := done(), time.Now()
		printed := false
		for {
			select {
			case <-quit:
				if printed {
					fmt.Fprint(w, "\n")
				}
				return
			case now := <-tick.C:
				d := done()
				rate := float64(d-last) / now.Sub(lastAt).Seconds()
				last, lastAt = d, now
				if total > 0 {
					fmt.Fprintf(w, "\r%s: %d/%d msgs, %.0f msgs/s   ", what, d, total, rate)
				} else {
					fmt.Fprintf(w, "\r%s: %d msgs, %.0f msgs/s   ", what, d, rate)
				}
				printed = true
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-finished
		})
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
