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
	waitFor(t, what, cond, waitTimeout)
}

func waitFor(t testing.TB, what string, cond func() (bool, string), timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
			return
		}
		time.Sleep(pause)
	}
}
