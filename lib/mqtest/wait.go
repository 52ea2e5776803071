package mqtest

import (
	"testing"
	"time"
)

const (
	// waitTimeout bounds WaitFor. It is long because CI runs the tests of
	// every package at once, with the race detector, on two cores: it is
	// reached only when the condition never holds.
	waitTimeout = 20 * time.Second
	// firstPause and maxPause bound the pauses between calls of WaitFor's
	// condition: short at first, as most conditions hold within a few
	// milliseconds, then longer so that a long wait does not take a core.
	firstPause = time.Millisecond
	maxPause   = 20 * time.Millisecond
)

// WaitFor returns once cond reports ok, and fails t if cond has not within
// 20 seconds. It calls cond at once and then after pauses growing from 1
// to 20 ms. cond returns whether the awaited state is there and, either
// way, what it saw; the failure quotes what (completing "waiting for")
// and cond's last report:
//
//	timed out after 20s waiting for the socket file to be removed; last seen: still there
//
// WaitFor calls cond on the calling goroutine, and on timeout calls
// t.Fatalf, so it must be called from the goroutine running the test.
func WaitFor(t testing.TB, what string, cond func() (ok bool, last string)) {
	t.Helper()
	Wait{}.For(t, what, cond)
}

// Wait is WaitFor for the waits that need more: a state that whole
// processes reach (an election among mqd processes, a cluster's start)
// may take longer than 20 seconds, and when it never comes the failure
// may need more than a line (the stacks of the processes that were stuck).
// The zero Wait is WaitFor.
type Wait struct {
	// Timeout bounds the wait; zero means WaitFor's 20 seconds.
	Timeout time.Duration
	// OnTimeout, when not nil, is called once the deadline has passed,
	// before t fails: to record what a failure message cannot hold.
	OnTimeout func()
}

// For is WaitFor with w's deadline and timeout action: it returns once
// cond reports ok, and otherwise, when w.Timeout has passed, calls
// w.OnTimeout and fails t with what and cond's last report.
func (w Wait) For(t testing.TB, what string, cond func() (ok bool, last string)) {
	t.Helper()
	timeout := w.Timeout
	if timeout == 0 {
		timeout = waitTimeout
	}
	deadline := time.Now().Add(timeout)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if w.OnTimeout != nil {
				w.OnTimeout()
			}
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
			return
		}
		time.Sleep(pause)
	}
}
